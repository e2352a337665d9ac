"""The frontier writes of a node: what it settles, gathered (no Scrapy imports).

Requests enqueued and leases settled during ``FRONTIER_WRITE_INTERVAL`` (0: one turn of
the event loop) are gathered and written in one atomic step
(``PartitionedFrontier.complete_turn``): their new requests, each settled lease with the
links its page produced, and the refill of the prefetch buffer, if it asked for one
meanwhile (``carry_lease``) or waits for a write (``TurnOwner.top_up``). Then the leases
waiting for their links to be written are released (``AckTracker.release``). One call per
interval, not per request: a call costs Redis more than the entries it carries
(``bench.frontier_load``: 159 us of Redis CPU per page written alone, 61 us at 8 pages a
write). A write goes at once, before the interval ends, when a dry prefetch buffer rides
on it or someone waits for it (``flushed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from crawler.frontier.acks import LeaseState
from crawler.frontier.client import Finish, Lease, LeaseAsk, NewRequest
from crawler.frontier.dedup_report import DedupReport
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.frontier.refusal import FrontierRefused, WriteFailed
from crawler.frontier.request_store import failure_record
from crawler.redis_outage import GaveUp

logger = logging.getLogger(__name__)


class Stats(Protocol):
    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None: ...


class TurnOwner(Protocol):
    """What the writer needs from the scheduler."""

    node_id: str

    @property
    def client(self) -> PartitionedFrontier: ...

    @property
    def refused(self) -> bool: ...

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Future[Any]: ...

    async def guarded(self, op: Callable[[], Awaitable[Any]]) -> Any: ...

    def refuse(self, reason: FrontierRefused) -> None: ...

    def new_work(self) -> None:
        """A write added requests to the shared queue."""

    def release(self, lease_id: str) -> None: ...

    def wrote(self) -> None:
        """A write went and released its leases: the node may hold nothing now."""

    def top_up(self) -> tuple[LeaseAsk, Callable[[list[Lease] | None], None]] | None:
        """A lease for the write about to go (None: none wanted)."""

    @property
    def epoch(self) -> str:
        """The frontier's epoch as the node knows it ("" before it does)."""

    def recorded(self, epoch: str, new: list[str], known: list[str]) -> None:
        """A write in ``epoch`` recorded the fingerprints ``new`` in the dupefilter, and found
        ``known`` there or forced them in (the seen feed shares them)."""


def split_recorded(children: list[NewRequest], dropped: set[int]) -> tuple[list[str], list[str]]:
    """The fingerprints of a write's ``children`` (``dropped``: the positions found seen) that
    it recorded, and those it found recorded; a forced one (a seed) goes with those found,
    since it may have been recorded long before. Requests never deduplicated have none."""
    new: list[str] = []
    known: list[str] = []
    for i, child in enumerate(children):
        if child.fingerprint:
            (known if i in dropped or child.force else new).append(child.fingerprint)
    return new, known


class TurnWriter:
    def __init__(
        self, owner: TurnOwner, stats: Stats, dedup_report: DedupReport, interval: float = 0.0
    ) -> None:
        self._owner = owner
        self._interval = interval
        self._hurry: asyncio.Event | None = None  # set: the write gathering now goes at once
        self._stats = stats
        self._dedup_report = dedup_report
        self._fresh: list[NewRequest] = []
        self._waiters: list[str] = []  # leases held until the fresh batch is written
        self._finishing: list[LeaseState] = []  # leases settled this turn, written with it
        self._lease: tuple[LeaseAsk, Callable[[list[Lease] | None], None]] | None = None
        self._flushes: set[asyncio.Future[Any]] = set()  # writes of this turn's batches
        # settled leases whose write gave up (a stop with Redis away): other nodes reclaim them
        self.unwritten = 0
        self.unwritten_fetched = 0  # of them, pages fetched (not given back unfetched)
        # written back as not fetched by a stop (frontier/requeued/<component>/stopped)
        self.stopped = 0

    @property
    def has_work(self) -> bool:
        """Requests or settled leases wait for this turn's write."""
        return bool(self._fresh or self._finishing)

    @property
    def writing(self) -> bool:
        """Something waits for a write, or a write is on its way to Redis."""
        return bool(self._fresh or self._finishing or self._flushes)

    @property
    def pending(self) -> bool:
        return bool(self._fresh or self._waiters or self._finishing)

    def add_fresh(self, requests: list[NewRequest], waiter: str | None = None) -> None:
        """Write requests at the end of this reactor turn; then release ``waiter``'s hold."""
        self._schedule()
        self._fresh.extend(requests)
        if waiter is not None:
            self._waiters.append(waiter)

    def add_settled(self, state: LeaseState) -> None:
        self._schedule()
        self._finishing.append(state)

    def carry_lease(self, ask: LeaseAsk, done: Callable[[list[Lease] | None], None]) -> bool:
        """Lease with this turn's write, if one is coming: ``done`` gets the leases (None if
        the write failed or wrote nothing). False: no write is coming."""
        if not self.has_work or self._lease is not None:
            return False
        self._lease = (ask, done)
        if ask.idle_ms:  # the node's buffer ran dry: it waits for this write
            self._send_now()
        return True

    def forget(self) -> None:
        """Drop what waits (a purge took the leases): the waiting holds are still released."""
        self._fresh.clear()
        self._finishing.clear()

    async def flushed(self) -> None:
        """Return once every write scheduled so far is done (sending the one gathering now)."""
        while self._flushes:
            self._send_now()
            await asyncio.wait(list(self._flushes))

    def _schedule(self) -> None:
        """Schedule the next write, unless it is scheduled already."""
        if not self.pending:
            self._hurry = asyncio.Event() if self._interval > 0 else None
            flush = self._owner.spawn(self._flush_later(self._hurry))
            self._flushes.add(flush)
            flush.add_done_callback(self._flushes.discard)

    def _send_now(self) -> None:
        if self._hurry is not None:
            self._hurry.set()

    async def _flush_later(self, hurry: asyncio.Event | None) -> None:
        """Gather for the interval (or this reactor turn), then write."""
        if hurry is None:
            await asyncio.sleep(0)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hurry.wait(), self._interval)
        await self._flush()

    async def _flush(self) -> None:
        """Write what was gathered in one atomic step: the new requests, the leases settled
        (their children with them) and a lease asked for meanwhile, then release the held
        leases."""
        batch, self._fresh = self._fresh, []
        waiters, self._waiters = self._waiters, []
        states, self._finishing = self._finishing, []
        carried, self._lease = self._lease, None
        if carried is None and (batch or states) and not self._owner.refused:
            carried = self._owner.top_up()
        leases: list[Lease] | None = None
        try:
            leases = await self._write(batch, states, carried[0] if carried else None)
        except GaveUp:
            self.unwritten += len(states)
            self.unwritten_fetched += sum(state.outcome != "requeue" for state in states)
            raise
        except FrontierRefused as exc:
            self._owner.refuse(exc)
            return  # nothing is written any more: the held leases stay held
        except Exception as exc:  # neither an outage nor a refusal: it would fail again
            logger.error("Frontier write failed", exc_info=exc)
            self._owner.refuse(WriteFailed(exc))
            return
        finally:
            if carried is not None:
                carried[1](leases)
        for lease_id in waiters:
            self._owner.release(lease_id)
        self._owner.wrote()

    async def _write(
        self, batch: list[NewRequest], states: list[LeaseState], ask: LeaseAsk | None
    ) -> list[Lease] | None:
        """The write itself; the leases it took (None: it did not run). Raises
        ``FrontierRefused``."""
        owner = self._owner
        if not (batch or states) or owner.refused:
            return None
        settled = [
            (
                Finish(state.lease_id, state.outcome, failure_record(state, owner.node_id)),
                state.children,
            )
            for state in states
        ]
        children = batch + [child for state in states for child in state.children]
        epoch = owner.epoch
        result = await owner.guarded(lambda: owner.client.complete_turn(batch, settled, ask))
        self._stats.inc_value("frontier/writes")
        if result.added:
            self._stats.inc_value("frontier/added", result.added)
            owner.new_work()
        self._dedup_report.completed(result, children)
        if owner.epoch == epoch:  # else the write's fingerprints may be in a Redis now gone
            self._recorded(epoch, children, set(result.dropped))
        for state, status in zip(states, result.statuses, strict=True):
            self._settled(state, status)
        return list(result.leases)

    def _recorded(self, epoch: str, children: list[NewRequest], dropped: set[int]) -> None:
        """Tell the owner what the write recorded (``split_recorded``)."""
        new, known = split_recorded(children, dropped)
        if new or known:
            self._owner.recorded(epoch, new, known)

    def _settled(self, state: LeaseState, status: str) -> None:
        if status in ("gone", "stolen"):
            self._stats.inc_value(f"frontier/lease_lost/{status}")
            logger.warning("Lease %s was %s before it completed", state.lease_id, status)
        elif status == "failed":
            self._stats.inc_value(f"frontier/failed/{state.failure}")
        elif status == "requeue":
            self._stats.inc_value(f"frontier/requeued/{state.requeue_reason}")
            self.stopped += str(state.requeue_reason).endswith("/stopped")
        else:
            self._stats.inc_value("frontier/done")
