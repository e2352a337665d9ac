"""Replaying the spool's sealed segments (no Scrapy imports).

A segment is claimed (``flock``), its records are sent again, and it is deleted once every
record is settled elsewhere: delivered, dead-lettered or spooled again (into the segment
being written). A record that could be none of these (the disk is full) keeps its whole
segment for a later replay: delivered records of it may be sent twice, none is lost.
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


class SpoolReplay:
    def __init__(self, spool: Spool, count: Count) -> None:
        self.spool = spool
        self.count = count
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
            settled = self._settler(segment, handle, len(records))
            for record in records:
                send(record.message, settled)

    def _settler(self, segment: Path, handle: IO[bytes], total: int) -> ReplaySettler:
        settler = ReplaySettler(self, segment, handle, total)
        if total == 0:
            settler.finish()
        return settler


class ReplaySettler:
    """Settles the records of one replayed segment (``Settled``); deletes the segment once
    each is settled, unless one could not be (``requeue``: a disk error). The sender knows a
    replayed message by it: spooled again, it is not counted as spooled a second time."""

    def __init__(self, replay: SpoolReplay, segment: Path, handle: IO[bytes], total: int) -> None:
        self._replay = replay
        self._segment = segment
        self._handle = handle
        self._left = total
        self._kept = False

    def __call__(self, outcome: str) -> None:
        self._left -= 1
        if outcome == "delivered":
            self._replay.count("kafka/replayed", 1)
        elif outcome == "dead_lettered":  # out of the spool too: to a DLQ, or the node's file
            self._replay.count("kafka/replay_dead_lettered", 1)
        elif outcome == "requeue":
            self._kept = True
        if self._left == 0:
            self.finish()

    def finish(self) -> None:
        if self._kept:
            logger.error("Spool segment %s kept for a later replay (disk error)", self._segment)
        else:
            self._segment.unlink(missing_ok=True)
        self._handle.close()
        self._replay.running -= 1
