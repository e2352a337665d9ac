"""Noticing a Redis that lost writes it had acknowledged (no Scrapy imports).

Redis replicates asynchronously: a failover to a replica that was behind, or a restart from an
older snapshot, gives back a frontier that still has its epoch but lacks its last writes: leases
that were finished are held again, requests that were queued are gone, and fingerprints the
nodes' seen-caches hold are no longer in the dedup, so a page fetched again would have its links
dropped by a cache without a word. Each call of ``turn.lua`` carries a token (microseconds,
rising) and gets back the node's write mark in that part before it: the highest token of the
node's calls Redis has. A mark lower than the token of a call whose reply came before this call
was sent means Redis lost that call: ``lost`` is set, and the lease keeper starts another epoch,
so every node re-enqueues what it holds and forgets its seen-cache (``crawler.frontier.epoch``).
"""

from __future__ import annotations

import asyncio
import time


class WriteMarks:
    """The tokens of one node's calls in one part; ``lost``: set when Redis lost one (a
    ``PartitionedFrontier`` gives its parts one event)."""

    def __init__(self, lost: asyncio.Event) -> None:
        self.lost = lost
        self._issued = 0  # the last token handed out
        self._applied = 0  # the highest token of a call whose reply came (0: none yet)
        self._since = 0  # calls up to this token were sent before the node's epoch changed

    def issue(self) -> tuple[int, int]:
        """A new call's token, and the highest token known applied before it is sent."""
        self._issued = max(self._issued + 1, time.time_ns() // 1000)
        return self._issued, self._applied

    def settled(self, token: int, applied_before: int, mark: bytes | str) -> bool:
        """The reply of the call ``token`` came with the node's ``mark`` before the call ('':
        none); True (and ``lost`` set) when Redis lost calls it had answered."""
        if token <= self._since:
            return False  # sent before the epoch this node now knows: no measure
        lost = applied_before > 0 and (not mark or int(mark) < applied_before)
        self._applied = max(self._applied, token)
        if lost:
            self.lost.set()
        return lost

    def forget(self) -> None:
        """The node adopted another epoch (a purge deleted the marks, Redis lost its data, or
        the node started one after a loss): the calls before it measure nothing."""
        self._applied = 0
        self._since = self._issued
        self.lost.clear()
