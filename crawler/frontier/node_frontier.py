"""``NodeFrontier``: what a node's place in the shared frontier is made of once it is open.

``LeasingScheduler`` is Scrapy's scheduler (the requests in and out); this is what stands
behind it: the frontier's client, the hold on the node id, the admission checks, the
heartbeat that keeps the leases, the holdings given back at a stop, and the seen feed. Built
together when the spider opens, stopped together in an order that loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crawler.frontier.admission import FrontierAdmission
from crawler.frontier.holdings import NodeHoldings
from crawler.frontier.lease_keeper import LeaseKeeper, Timing
from crawler.frontier.node_feed import NodeSeenFeed
from crawler.frontier.node_run import NodeIdInUse, NodeRun
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.redis_outage import GaveUp

if TYPE_CHECKING:
    from crawler.frontier.scheduler import LeasingScheduler


@dataclass(frozen=True, slots=True)
class NodeFrontier:
    client: PartitionedFrontier
    node_run: NodeRun  # this process's hold on the node id
    admission: FrontierAdmission
    keeper: LeaseKeeper
    holdings: NodeHoldings
    heartbeat: asyncio.Future[None]
    feed: NodeSeenFeed | None

    @classmethod
    def open(cls, owner: LeasingScheduler, spider: str) -> NodeFrontier:
        """Connect and start the heartbeat; nothing is leased before ``admission.check()``
        (which the owner runs) has passed."""
        settings, context, crawler = owner.settings, owner.context, owner.crawler
        client = PartitionedFrontier.connect(
            context.redis,
            spider,
            owner.node_id,
            settings.partitions,
            dedup=settings.dedup,
            link_check=settings.link_check,
            fingerprinter=owner.store.fingerprinter_path,
        )
        node_run = NodeRun(context.redis, client.keys, owner.node_id, settings.heartbeat_interval)
        admission = FrontierAdmission(
            crawler,
            client,
            settings,
            owner.guard,
            node_run=node_run,
            on_refused=owner.prefetch.clear,
            on_admitted=owner.new_work,
        )
        holdings = NodeHoldings(
            crawler,
            client,
            tracker=owner.tracker,
            prefetch=owner.prefetch,
            seen=owner.seen,
            writer=owner.writer,
            dedup_report=owner.dedup_report,
            refuse=admission.refuse,
            fingerprint=owner.store.stored_fingerprint,
            look_again=admission.look_again,
        )
        timing = Timing(settings.lease_timeout, settings.heartbeat_interval, settings.reclaim_batch)
        keeper = LeaseKeeper(client, holdings, owner.guard, owner.stats, timing, node_run=node_run)
        feed = None
        if settings.seen_feed.enabled:
            feed = NodeSeenFeed.open(
                context,
                settings,
                spider,
                owner.stats,
                epoch=lambda: keeper.epoch,
                learn=owner.seen.add,
            )
        heartbeat = context.supervise("heartbeat", keeper.run)
        return cls(client, node_run, admission, keeper, holdings, heartbeat, feed)

    def may_lease(self) -> bool:
        """Admitted, not refused since, and its leases surely its own (a stale keeper's may be
        other nodes' by now; a recovering one's new lease ids could be the lost data's)."""
        keeper = self.keeper
        admission = self.admission
        return (
            admission.admitted
            and not admission.refused
            and not (keeper.recovering or keeper.stale())
        )

    async def stop_checks(self) -> None:
        """The first steps of a stop: no more heartbeats, the admission's work ended."""
        self.heartbeat.cancel()
        await self.admission.close()

    async def give_back(
        self,
        guarded: Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]],
        lease_timeout: float,
    ) -> int:
        """The last steps of a stop, once the writes went: the leases back to the queue, the
        node id let go, the seen feed closed; how many leases went back."""
        released = 0
        # a node refused for another process's id before it held the id leased nothing, and
        # must not let go of that process's registry entry; one that held it (it still does
        # until end() below) gives back its own
        others = isinstance(self.admission.refusal, NodeIdInUse) and not self.node_run.claimed
        if not others:
            released = await self.holdings.give_back(guarded, lease_timeout)
            with contextlib.suppress(GaveUp):  # Redis away at the stop: the hold expires
                await guarded(self.node_run.end)
        if self.feed is not None:
            await self.feed.close()
        return released
