"""Leases taken ahead of the downloader (no Scrapy imports).

At most ``FRONTIER_PREFETCH`` requests wait leased on the node. When the buffer is down to
half, a refill waits up to ``REFILL_WAIT`` for a write of a reactor turn to carry it
(``top_up``, or ``carry_lease`` for a write already coming: one call to Redis for both);
with none by then, or the buffer empty, a lease call of its own refills it. A lease that
comes back empty waits ``FRONTIER_IDLE_POLL`` before the next, unless work arrived
meanwhile (``new_work``). A lease asked with the buffer empty says so (``LeaseAsk.idle_ms``):
finding nothing, the node is recorded as waiting for work, and the other nodes' leases leave
it its share of what the queue holds (``turn.lua``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from crawler.frontier.client import Lease, LeaseAsk
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.frontier.refusal import FrontierRefused

REFILL_WAIT = 0.05  # s a refill waits for a write to carry it, half the buffer still there
PICK_SCAN = 32  # leased requests weighed by their load for each one handed out: a bounded cost

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class PrefetchOwner(Protocol[T_co]):
    """What the buffer needs from the scheduler."""

    @property
    def client(self) -> PartitionedFrontier: ...

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Future[Any]: ...

    async def guarded(self, op: Callable[[], Awaitable[Any]]) -> Any: ...

    def refuse(self, reason: FrontierRefused) -> None: ...

    def may_lease(self) -> bool: ...

    def carry_lease(self, ask: LeaseAsk, done: Callable[[list[Lease] | None], None]) -> bool:
        """Lease with this turn's write if one is coming (``done`` gets the leases, None if
        the write failed); False: none is."""

    def lease_alone(self) -> None:
        """A lease call of its own is on its way (stats)."""

    def decode(self, lease: Lease) -> T_co | None: ...

    def leased(self, count: int) -> None: ...

    def wake(self) -> None: ...


class Prefetch(Generic[T]):
    def __init__(
        self,
        owner: PrefetchOwner[T],
        prefetch: int,
        lease_ms: int,
        idle_poll: float,
        load: Callable[[T], int] | None = None,
    ) -> None:
        self._owner = owner
        # requests of an entry's site in the downloader: the fewest go first (None: in order)
        self._load = load
        self._prefetch = prefetch
        self._lease_ms = lease_ms
        self._idle_poll = idle_poll
        self._buffer: deque[tuple[Lease, T]] = deque()
        self._refilling = False
        self._waiting: asyncio.TimerHandle | None = None  # a refill waiting for a write
        self._empty_until = 0.0
        self._work_seen = 0  # times this node saw new work arrive (added or reclaimed)

    def __len__(self) -> int:
        return len(self._buffer)

    def take(self) -> tuple[Lease, T] | None:
        """The next leased request, refilling first when the buffer is down to half: with a
        ``load``, of the first ``PICK_SCAN`` the one whose site has the fewest requests in the
        downloader (the first leased among equals)."""
        if len(self._buffer) <= self._prefetch // 2:
            self._maybe_refill()
        if not self._buffer:
            return None
        buffer, load = self._buffer, self._load
        if load is None:
            return buffer.popleft()
        scanned = range(min(len(buffer), PICK_SCAN))
        best = min(scanned, key=lambda index: load(buffer[index][1]))
        taken = buffer[best]
        del buffer[best]
        return taken

    def leases(self) -> list[Lease]:
        return [lease for lease, _ in self._buffer]

    def drop(self, lease_ids: set[str]) -> int:
        """Drop the buffered leases ``lease_ids`` names; how many were."""
        kept = deque(entry for entry in self._buffer if entry[0].id not in lease_ids)
        dropped = len(self._buffer) - len(kept)
        self._buffer = kept
        return dropped

    def clear(self) -> None:
        self._buffer.clear()
        self._stop_waiting()

    def new_work(self) -> None:
        """Work reached the shared queue: lease again now, even if a lease just came back empty."""
        self._work_seen += 1
        self._empty_until = 0.0

    def top_up(self) -> tuple[LeaseAsk, Callable[[list[Lease] | None], None]] | None:
        """The refill waiting for a write, for the write about to go, and what takes its
        leases; None when none waits or it may not lease now."""
        if self._waiting is None:
            return None
        self._stop_waiting()
        return self._ask()

    def _maybe_refill(self) -> None:
        if self._buffer and self._waiting is None and not self._refilling:
            loop = asyncio.get_running_loop()
            self._waiting = loop.call_later(REFILL_WAIT, self._refill_now)
        elif not self._buffer:  # ran dry: no waiting for a write
            self._refill_now()

    def _refill_now(self) -> None:
        self._stop_waiting()
        asked = self._ask()
        if asked is not None and not self._owner.carry_lease(*asked):
            self._owner.lease_alone()
            self._owner.spawn(self._refill(*asked))

    def _stop_waiting(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None

    def _ask(self) -> tuple[LeaseAsk, Callable[[list[Lease] | None], None]] | None:
        if self._refilling or not self._owner.may_lease():
            return None
        if time.monotonic() < self._empty_until:
            return None
        self._refilling = True
        want = self._prefetch - len(self._buffer)
        # ran dry: the node waits for work if it finds none (and may take its share of the rest)
        idle_ms = 0 if self._buffer else int(self._idle_poll * 1000)
        # the same call id on a retry: a lease that ran is not redone
        ask = LeaseAsk(want, self._lease_ms, uuid.uuid4().hex, idle_ms)
        work_seen = self._work_seen
        return ask, lambda leases: self._filled(leases, work_seen)

    async def _refill(self, ask: LeaseAsk, done: Callable[[list[Lease] | None], None]) -> None:
        owner = self._owner
        leases: list[Lease] | None = None
        try:
            leases = await owner.guarded(
                lambda: owner.client.lease(ask.count, ask.lease_ms, ask.call, idle_ms=ask.idle_ms)
            )
        except FrontierRefused as exc:
            owner.refuse(exc)
        finally:
            done(leases)

    def _filled(self, leases: list[Lease] | None, work_seen: int) -> None:
        """A lease came back (None: its call failed); ``work_seen``: new work noticed before
        it was sent."""
        self._refilling = False
        owner = self._owner
        if leases is None:
            return
        if not leases:
            if self._work_seen == work_seen:
                self._empty_until = time.monotonic() + self._idle_poll
            else:  # work arrived while this lease was on its way: ask again now
                owner.wake()
            return
        owner.leased(len(leases))
        for lease in leases:
            if (request := owner.decode(lease)) is not None:
                self._buffer.append((lease, request))
        owner.wake()
