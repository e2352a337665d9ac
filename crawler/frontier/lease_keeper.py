"""``LeaseKeeper``: a node's heartbeat on the shared frontier (no Scrapy imports).

Every ``FRONTIER_HEARTBEAT_INTERVAL`` it extends the leases the node holds, returns
expired leases of any node to the queue, and checks the frontier's epoch
(``crawler.frontier.epoch``): when Redis lost its data the node re-enqueues what it
holds. After an outage (its own beat late in Redis, or Redis unanswered for half a lease
timeout) it reclaims nothing for a lease timeout: every node's leases looked expired, and
their beats extend them. While no heartbeat reaches Redis for a lease timeout the node's leases may
already be other nodes', so :meth:`LeaseKeeper.stale` tells the scheduler to lease
nothing more until one does (``frontier/leasing_paused``). Redis outages go through
the node's outage guard; any other error ends the loop, and the node context's
supervisor logs it and starts it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Protocol

from crawler.frontier.client import Heartbeat
from crawler.frontier.epoch import RECRAWL_EPOCH, operator_reset, recover
from crawler.frontier.node_run import NodeIdInUse, NodeRun
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.frontier.refusal import FrontierRefused
from crawler.redis_outage import OutageGuard

logger = logging.getLogger(__name__)


class Stats(Protocol):
    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None: ...


class Holder(Protocol):
    """What the node holds, told to its keeper (``crawler.frontier.holdings.NodeHoldings``)."""

    def held_leases(self) -> list[str]:
        """Ids of every lease the node holds (in flight and buffered)."""

    def held_bodies(self) -> list[bytes]:
        """The bodies of every lease held (in flight and buffered)."""

    def fingerprint(self, body: bytes) -> str:
        """The dedup fingerprint of a held request's body ("": never deduplicated, or not
        readable)."""

    def drop_buffered(self) -> None:
        """The held requests were queued again: drop the buffered ones (not started: only
        their copies in the queue are crawled) and the seen-cache."""

    def forget_held(self) -> int:
        """The frontier was purged: drop the buffered leases, write nothing the others yield.
        Returns how many were held."""

    def forget_seen(self) -> None:
        """The dedup was emptied for a recrawl: forget the seen-cache, keep the work."""

    def lost(self, lease_ids: tuple[str, ...]) -> None:
        """Leases the node held are no longer its (its heartbeats did not reach Redis for the
        lease timeout, and another node reclaimed them): drop those not started."""

    def work_arrived(self) -> None:
        """Requests reached the shared queue: lease again now."""

    async def on_beat(self) -> None:
        """Extra Redis work once per heartbeat (the Bloom filter's fill), under the guard."""

    def after_beat(self) -> None:
        """Once per heartbeat, whatever happened (the idle sweep of stragglers)."""

    def refuse(self, reason: FrontierRefused) -> None:
        """The frontier can't be used as this node is configured: stop the node."""


@dataclass(frozen=True, slots=True)
class Timing:
    lease_timeout: float
    heartbeat_interval: float
    reclaim_batch: int


class LeaseKeeper:
    def __init__(
        self,
        client: PartitionedFrontier,
        holder: Holder,
        guard: OutageGuard,
        stats: Stats,
        timing: Timing,
        *,
        node_run: NodeRun,
    ) -> None:
        self.client = client
        self.node_run = node_run
        self.holder = holder
        self.guard = guard
        self.stats = stats
        self.timing = timing
        self.epoch = ""  # the frontier's epoch, once known
        self.recovering = False  # re-enqueuing what the node holds after a loss of data
        self._beat_at = time.monotonic()  # the last heartbeat Redis answered
        self._reclaim_from = 0.0  # no expired lease is reclaimed before (monotonic time)
        self._at_risk = False

    async def run(self) -> None:
        timing = self.timing
        if not self.epoch:
            try:
                self.epoch = await self.guard.run(self.client.open_epoch)
            except FrontierRefused as exc:
                self.holder.refuse(exc)
                return
        while True:
            try:
                if self.client.lost_writes.is_set():
                    await self._writes_lost()
                beat = await self.client.heartbeat(
                    self.holder.held_leases(),
                    node_ttl_ms=int(timing.lease_timeout * 1000),
                    lease_ms=int(timing.lease_timeout * 1000),
                    reclaim_limit=self._reclaim_limit(),
                    interval_ms=int(timing.heartbeat_interval * 1000),
                    epoch=self.epoch,
                )
                if beat.epoch != self.epoch:
                    await self._frontier_lost(beat.epoch)
                    continue  # beat again at once, in the new epoch
                await self.holder.on_beat()
                if (other := await self.node_run.beat()) is not None:
                    self.holder.refuse(NodeIdInUse(self.node_run.node_id, other))
                    return
            except Exception as exc:
                if self.guard.failed(exc) is None:
                    raise  # not an outage: the supervisor logs it and restarts the loop
            else:
                self.guard.succeeded()
                self._beaten(beat)
            self.stale()  # also while no lease is asked (a write waits out the outage)
            self.holder.after_beat()
            slept_at = time.monotonic()
            with contextlib.suppress(TimeoutError):  # or at once when Redis lost writes
                await asyncio.wait_for(self.client.lost_writes.wait(), timing.heartbeat_interval)
            self._woke(time.monotonic() - slept_at - timing.heartbeat_interval)

    def _woke(self, late: float) -> None:
        """The heartbeat woke ``late`` seconds after its time: more than half a lease timeout
        means the event loop was blocked (a sleep cannot be late otherwise), and beats did not
        go meanwhile (an ERROR once that was a lease timeout: the leases are lost by then)."""
        if late <= self.timing.lease_timeout / 2:
            return
        self.stats.inc_value("frontier/loop_blocked")
        blocked = late + self.timing.heartbeat_interval
        logger.log(
            logging.ERROR if blocked >= self.timing.lease_timeout else logging.WARNING,
            "The event loop was blocked for %.1fs (a callback, pipeline or middleware that blocks: "
            "time.sleep, a synchronous HTTP or database call, a long computation): no heartbeat "
            "reached Redis meanwhile, and past FRONTIER_LEASE_TIMEOUT (%.0fs) this node's leases "
            "go to other nodes, which fetch those pages again (a page that blocks each time it "
            "is fetched is then fetched again and again). Make the work asynchronous or run it "
            "in a thread (asyncio.to_thread), or raise FRONTIER_LEASE_TIMEOUT",
            blocked,
            self.timing.lease_timeout,
        )

    def _reclaim_limit(self) -> int:
        """How many expired leases this beat may return to the queue: none for a lease timeout
        after beats could not reach Redis for half of one. The other nodes' could not either,
        and their leases look expired meanwhile (Redis's clock ran on); their beats, a heartbeat
        interval apart, extend them, and a lease timeout later only a dead node's are left."""
        now = time.monotonic()
        if now - self._beat_at > self.timing.lease_timeout / 2:
            self._reclaim_from = now + self.timing.lease_timeout
        return self.timing.reclaim_batch if now >= self._reclaim_from else 0

    def _beaten(self, beat: Heartbeat) -> None:
        self._beat_at = time.monotonic()
        if self._at_risk:
            self.holder.work_arrived()  # leasing may go on: look now
        if beat.reclaimed:
            self.stats.inc_value("frontier/reclaimed", beat.reclaimed)
            of = ", ".join(
                f"{count} of {node or '?'}" for node, count in sorted(beat.reclaimed_from.items())
            )
            logger.warning(
                "Returned %d expired leases to the queue (%s: nodes that stopped extending them, "
                "killed, frozen or cut off from Redis, or leases a live node no longer held, as "
                "after a failover to a replica that was behind; their pages are fetched again, so "
                "an item of a page such a node had fetched may be delivered twice)",
                beat.reclaimed,
                of,
            )
            self.holder.work_arrived()
        if beat.lost:
            self.stats.inc_value("frontier/lease_lost/heartbeat", len(beat.lost))
            self.holder.lost(beat.lost)

    async def _writes_lost(self) -> None:
        """Redis lost writes it had answered (``crawler.frontier.write_marks``) but kept its
        epoch: start another, so every node (this one at once, the others at their next
        beat) re-enqueues what it holds and forgets its seen-cache, whose fingerprints Redis
        may no longer hold, as when the data is lost. A frontier whose epoch changed (an
        operator's purge deleted the marks too, or Redis lost everything) is left to the
        heartbeat, which tells them apart. Redis away meanwhile: tried again at the next beat."""
        if await self.client.epochs() != self.epoch:
            self.client.lost_writes.clear()
            return
        logger.error(
            "Redis lost writes of the frontier %s it had acknowledged (a failover to a replica "
            "that was behind, or a restart from an older snapshot): starting another epoch, so "
            "every node re-enqueues what it holds and forgets its seen-cache",
            self.client.keys.tag,
        )
        await self.client.start_epoch()
        self.client.lost_writes.clear()
        self.stats.inc_value("frontier/writes_lost")

    async def _frontier_lost(self, found: str) -> None:
        """Redis lost the frontier's data: re-enqueue what this node holds. An operator's
        purge (``crawler purge --force`` writes a ``purged:`` epoch) is not a loss: what the
        node holds is dropped instead; a recrawl (``recrawl:``) only empties its seen-cache."""
        self.client.forget_marks()
        if operator_reset(found) is not None:
            self._operator_reset(found)
            return
        self.recovering = True  # no lease call now: its ids could be the lost data's
        try:
            held_ids, held = self.holder.held_leases(), self.holder.held_bodies()
            recovery = await recover(
                self.client, self.epoch, found, held, held_ids, fingerprint=self.holder.fingerprint
            )
            self.holder.drop_buffered()  # only once they are queued again (an outage retries)
        finally:
            self.recovering = False
        self.epoch = recovery.epoch
        # again: the seen feed may have taught the cache the lost epoch's meanwhile
        self.holder.forget_seen()
        self.stats.inc_value("frontier/epoch_lost")
        self.stats.inc_value("frontier/requeued_after_loss", recovery.requeued)
        self.holder.work_arrived()

    def _operator_reset(self, found: str) -> None:
        """Adopt the epoch an operator's reset wrote; a recrawl keeps the work held."""
        self.epoch = found
        if operator_reset(found) == RECRAWL_EPOCH:
            self.holder.forget_seen()
            self.stats.inc_value("frontier/recrawl")
            what = "forgot every URL it had seen (crawler seed --recrawl): forgot this node's"
        else:
            held = self.holder.forget_held()
            self.stats.inc_value("frontier/purged")
            what = f"was purged by an operator: dropped the {held} requests this node held and its"
        logger.warning("The frontier %s %s seen-cache", self.client.keys.tag, what)

    def stale(self) -> bool:
        """True while no heartbeat reached Redis for a lease timeout."""
        stale = time.monotonic() - self._beat_at > self.timing.lease_timeout
        if stale != self._at_risk:
            self._at_risk = stale
            if stale:
                self.stats.inc_value("frontier/leasing_paused")
                logger.warning(
                    "No heartbeat reached Redis for %.0fs (the lease timeout): leasing paused",
                    self.timing.lease_timeout,
                )
            else:
                logger.warning("Heartbeats reach Redis again: leasing resumed")
        return stale
