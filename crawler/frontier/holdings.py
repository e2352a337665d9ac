"""``NodeHoldings``: what a node holds of the frontier, as its lease keeper sees it.

The requests it is crawling (``AckTracker``), the leases buffered for later (``Prefetch``) and
the fingerprints it sent (``SeenCache``); the heartbeat extends, gives up or forgets them
(``crawler.frontier.lease_keeper.Holder``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from crawler.frontier.acks import AckTracker
from crawler.frontier.dedup_report import DedupReport
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.frontier.prefetch import Prefetch
from crawler.frontier.refusal import FrontierRefused
from crawler.frontier.seen_cache import SeenCache
from crawler.frontier.turn_writer import TurnWriter
from crawler.redis_outage import GaveUp
from crawler.wakeup import engine_idle, wake_engine

logger = logging.getLogger(__name__)


class NodeHoldings:
    def __init__(
        self,
        crawler: Crawler,
        client: PartitionedFrontier,
        *,
        tracker: AckTracker,
        prefetch: Prefetch[Request],
        seen: SeenCache,
        writer: TurnWriter,
        dedup_report: DedupReport,
        refuse: Callable[[FrontierRefused], None],
        fingerprint: Callable[[bytes], str],
        look_again: Callable[[], Awaitable[None]],
    ) -> None:
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.crawler = crawler
        self.client = client
        self.tracker = tracker
        self.prefetch = prefetch
        self.seen = seen
        self.writer = writer
        self.dedup_report = dedup_report
        self.refuse = refuse
        self.fingerprint = fingerprint  # a held body's dedup fingerprint (RequestStore's)
        self.look_again = look_again  # the admission's looks at other nodes (crawl ids)

    def held_leases(self) -> list[str]:
        return self.tracker.held() + [lease.id for lease in self.prefetch.leases()]

    def held_bodies(self) -> list[bytes]:
        return [state.body for state in self.tracker.states()] + [
            lease.body for lease in self.prefetch.leases()
        ]

    async def give_back(
        self,
        guarded: Callable[[Callable[[], Awaitable[int]]], Awaitable[int]],
        lease_timeout: float,
    ) -> int:
        """At a stop, after the last write: return every lease this node still holds, started
        or buffered, to the queue through ``guarded`` (the stop's deadline); how many went
        back. Those Redis does not take now, other nodes reclaim after ``lease_timeout``."""
        unfinished = [state.lease_id for state in self.tracker.drain()]
        unfinished += [lease.id for lease in self.prefetch.leases()]
        self.prefetch.clear()
        left = len(unfinished) + self.writer.unwritten  # with the settled ones not written
        try:
            released = await guarded(lambda: self.client.release(unfinished))
        except GaveUp:
            if left:
                logger.error(
                    "Could not return %d leases at close (%d of them fetched, their write not "
                    "taken: those pages are fetched again); other nodes reclaim them after %ss",
                    left,
                    self.writer.unwritten_fetched,
                    lease_timeout,
                )
            else:  # nothing held: only the node's entry stays, shown as dead after it expires
                logger.warning("Redis unavailable at close: this node holds no lease")
            return 0
        if released:
            self.stats.inc_value("frontier/released", released)
        return released

    def drop_buffered(self) -> None:
        self.prefetch.clear()  # not started: only their copies in the new queue are crawled
        self.seen.clear()  # what this node sent to the dedup set is no longer there

    def lost(self, lease_ids: tuple[str, ...]) -> None:
        dropped = self.prefetch.drop(set(lease_ids))
        if dropped:
            self.stats.inc_value("frontier/lost_not_started", dropped)
            logger.warning(
                "Dropped %d leased requests not yet started: their leases are no longer this "
                "node's (reclaimed while its heartbeats did not reach Redis, or returned by "
                "crawler requeue), so another node fetches them",
                dropped,
            )

    def forget_held(self) -> int:
        dropped = len(self.prefetch) + self.tracker.void_all()
        self.prefetch.clear()
        self.writer.forget()  # the purge took the leases: their output is not written
        self.seen.clear()
        return dropped

    def forget_seen(self) -> None:
        self.seen.clear()

    def work_arrived(self) -> None:
        self.prefetch.new_work()
        wake_engine(self.crawler)

    async def on_beat(self) -> None:
        await self.look_again()
        if self.dedup_report.bloom:
            self.dedup_report.bloom_state(await self.client.bloom_state())

    def after_beat(self) -> None:
        """Finish the leases whose callback outcome no signal reported, once nothing is in
        flight."""
        if not engine_idle(self.crawler):
            return
        stragglers = self.tracker.finish_stragglers()
        if stragglers:
            self.stats.inc_value("frontier/stragglers", len(stragglers))
            logger.warning(
                "Finished %d leases whose output no signal settled (a request or item dropped "
                "by a component before the scheduler or the pipelines; their pages are done): %s",
                len(stragglers),
                ", ".join(stragglers[:5]),
            )
