"""Replaying the spool's sealed segments (no Scrapy imports).

A segment is claimed (``flock``), its records are sent again, and it is deleted once every
record is settled elsewhere: delivered, dead-lettered or spooled again (into the segment
being written). A record that could be none of these (the disk is full) keeps its whole
segment for a later replay: delivered records of it may be sent twice, none is lost.

A record of another crawl than the node's (its ``crawl_id`` header), as a node started with a new
``CRAWLER_CRAWL_ID`` finds them in its spool, is also counted as
``kafka/replay_of_crawl/<delivered|dead_lettered>/<id>``: the ledger credits that crawl with it,
not the node's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import IO

from crawler.kafka.health import Count
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.spool import Spool, claim, read_segment

logger = logging.getLogger(__name__)

Settled = Callable[[str], None]
Send = Callable[[OutgoingMessage, Settled], None]


# + "<outcome>/<crawl id>": records of another crawl replayed (delivered, or dead-lettered)
REPLAY_OF_CRAWL = "kafka/replay_of_crawl/"


class SpoolReplay:
    def __init__(self, spool: Spool, count: Count, crawl_id: str) -> None:
        self.spool = spool
        self.count = count
        self.crawl_id = crawl_id  # the node's: records without a crawl_id header are of it
        self.running = 0  # segments being replayed

    def replay(self, send: Send) -> None:
        """Seal the segment being written, then ``send`` every record of every free segment."""
        self.spool.seal()
        for segment in self.spool.segments():
            handle = claim(segment)
            if handle is None:
                continue
            records, broken = read_segment(handle)
            if broken:
                self.count("kafka/spool_unreadable", broken)
                logger.error("%d unreadable lines in spool segment %s", broken, segment)
            if records:
                logger.info("Replaying %d spooled messages from %s", len(records), segment)
            self.running += 1
            replayed = SegmentReplay(self, segment, handle, len(records))
            if not records:
                replayed.finish()
            for record in records:
                crawl = record.message.header("crawl_id")
                other = crawl if crawl and crawl != self.crawl_id else None
                send(record.message, ReplaySettler(replayed, other))


class ReplaySettler:
    """Settles one replayed record (``Settled``), ``other_crawl`` naming its crawl when that is
    not the node's. The sender knows a replayed message by it: spooled again, it is not counted
    as spooled a second time."""

    def __init__(self, segment: SegmentReplay, other_crawl: str | None) -> None:
        self._segment = segment
        self._other_crawl = other_crawl

    def __call__(self, outcome: str) -> None:
        count = self._segment.replay.count
        if outcome in ("delivered", "dead_lettered"):  # out of the spool: dead-lettered to a
            # DLQ, or the node's file
            count("kafka/replayed" if outcome == "delivered" else "kafka/replay_dead_lettered", 1)
            if self._other_crawl is not None:
                count(f"{REPLAY_OF_CRAWL}{outcome}/{self._other_crawl}", 1)
        self._segment.settled(kept=outcome == "requeue")


class SegmentReplay:
    """One replayed segment: deleted once each record is settled, unless one could not be
    (``requeue``: a disk error)."""

    def __init__(self, replay: SpoolReplay, segment: Path, handle: IO[bytes], total: int) -> None:
        self.replay = replay
        self._segment = segment
        self._handle = handle
        self._left = total
        self._kept = False

    def settled(self, *, kept: bool) -> None:
        self._left -= 1
        self._kept = self._kept or kept
        if self._left == 0:
            self.finish()

    def finish(self) -> None:
        if self._kept:
            logger.error("Spool segment %s kept for a later replay (disk error)", self._segment)
        else:
            self._segment.unlink(missing_ok=True)
        self._handle.close()
        self.replay.running -= 1
