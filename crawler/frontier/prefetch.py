"""Leases taken ahead of the downloader (no Scrapy imports).

At most ``FRONTIER_PREFETCH`` requests wait leased on the node; one lease call refills
the buffer when it is down to half. A lease call that comes back empty waits
``FRONTIER_IDLE_POLL`` before the next, unless work arrived meanwhile (``new_work``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from crawler.frontier.client import Lease
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.frontier.refusal import FrontierRefused

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

    def decode(self, lease: Lease) -> T_co | None: ...

    def leased(self, count: int) -> None: ...

    def wake(self) -> None: ...


class Prefetch(Generic[T]):
    def __init__(
        self, owner: PrefetchOwner[T], prefetch: int, lease_ms: int, idle_poll: float
    ) -> None:
        self._owner = owner
        self._prefetch = prefetch
        self._lease_ms = lease_ms
        self._idle_poll = idle_poll
        self._buffer: deque[tuple[Lease, T]] = deque()
        self._refilling = False
        self._empty_until = 0.0
        self._work_seen = 0  # times this node saw new work arrive (added or reclaimed)

    def __len__(self) -> int:
        return len(self._buffer)

    def take(self) -> tuple[Lease, T] | None:
        """The next leased request, refilling first when the buffer is down to half."""
        if len(self._buffer) <= self._prefetch // 2:
            self._maybe_refill()
        return self._buffer.popleft() if self._buffer else None

    def leases(self) -> list[Lease]:
        return [lease for lease, _ in self._buffer]

    def clear(self) -> None:
        self._buffer.clear()

    def new_work(self) -> None:
        """Work reached the shared queue: lease again now, even if a lease just came back empty."""
        self._work_seen += 1
        self._empty_until = 0.0

    def _maybe_refill(self) -> None:
        if self._refilling or not self._owner.may_lease():
            return
        if time.monotonic() < self._empty_until:
            return
        self._refilling = True
        self._owner.spawn(self._refill())

    async def _refill(self) -> None:
        owner, work_seen = self._owner, self._work_seen
        try:
            want = self._prefetch - len(self._buffer)
            call = uuid.uuid4().hex  # the same id on a retry: a lease that ran is not redone
            leases = await owner.guarded(lambda: owner.client.lease(want, self._lease_ms, call))
        except FrontierRefused as exc:
            owner.refuse(exc)
            return
        finally:
            self._refilling = False
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
