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
        self._count = count
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
                self._count("kafka/spool_unreadable", broken)
                logger.error("%d unreadable lines in spool segment %s", broken, segment)
            if records:
                logger.info("Replaying %d spooled messages from %s", len(records), segment)
            self.running += 1
            settled = self._settler(segment, handle, len(records))
            for record in records:
                send(record.message, settled)

    def _settler(self, segment: Path, handle: IO[bytes], total: int) -> Settled:
        left = [total]
        kept = [False]

        def finish() -> None:
            if kept[0]:
                logger.error("Spool segment %s kept for a later replay (disk error)", segment)
            else:
                segment.unlink(missing_ok=True)
            handle.close()
            self.running -= 1

        def settled(outcome: str) -> None:
            left[0] -= 1
            if outcome == "delivered":
                self._count("kafka/replayed", 1)
            elif outcome == "requeue":
                kept[0] = True
            if left[0] == 0:
                finish()

        if total == 0:
            finish()
        return settled
