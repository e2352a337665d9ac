"""``LeasingScheduler``: Scrapy's scheduler on the shared Redis frontier, losing nothing.

A request taken from the shared queue is *leased* to this node (Lua, Redis
server time). The lease is extended by the node's heartbeat and completed
only when the request's callback output is fully processed (see
``crawler.frontier.acks``): new requests are deduplicated and enqueued in the
same atomic step. A node that dies stops extending its leases; any live node
returns them to the queue. A node that stops gracefully returns its leases at
once. Redis outages pause the node; nothing is dropped.

Requests are stored as JSON (``crawler.frontier.codec``), never pickled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import StatsCollector
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.reactor import is_asyncio_reactor_installed
from twisted.internet.defer import Deferred

from crawler.frontier import codec
from crawler.frontier.acks import AckTracker, LeaseState
from crawler.frontier.client import Lease, LeaseAsk, NewRequest
from crawler.frontier.dedup_report import DedupReport
from crawler.frontier.downloader_load import DownloaderLoad, downloader_aware
from crawler.frontier.dropped_signal import DroppedSignal
from crawler.frontier.live_pages import LivePages
from crawler.frontier.node_frontier import NodeFrontier
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.frontier.prefetch import Prefetch
from crawler.frontier.refusal import FrontierRefused
from crawler.frontier.request_store import DECODE_ERRORS, RequestStore
from crawler.frontier.seen_cache import SeenCache
from crawler.frontier.settings import FrontierSettings
from crawler.frontier.turn_writer import TurnWriter
from crawler.node_context import NodeContext
from crawler.redis_outage import GaveUp
from crawler.settings_values import get_bool
from crawler.signals import frontier_flush
from crawler.wakeup import wake_engine

logger = logging.getLogger(__name__)

LEASE_META = "_frontier_lease"  # set on a request taken from the frontier
PARENT_META = "_frontier_parent"  # set on requests its callback yielded
SEED_META = "_frontier_seed"  # set by RedisSpider on dont_filter seeds: fetched, and recorded
# set by RedisSpider on its start_urls in cluster mode (made on every node): kept once a crawl
START_URL_META = "_frontier_start_url"


class LeasingScheduler:
    def __init__(self, crawler: Crawler) -> None:
        if not is_asyncio_reactor_installed():
            raise NotConfigured("LeasingScheduler needs TWISTED_REACTOR to be the asyncio reactor")
        self.crawler = crawler
        self.settings = FrontierSettings.from_settings(crawler.settings)
        self.context = NodeContext.required(crawler, "LeasingScheduler")
        self.node_id = self.context.node_id
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.tracker = AckTracker(self._on_complete, self._on_progress)
        self.dedup_report = DedupReport(
            self.stats,
            self.settings.dedup,
            get_bool(crawler.settings, "DUPEFILTER_DEBUG"),
            # the store is made at open(): looked up at each call
            dropped=DroppedSignal(crawler, lambda body: self.store.rebuild(body)),  # noqa: PLW0108
        )
        self.guard = self.context.guard("frontier")
        self.prefetch: Prefetch[Request] = Prefetch(
            self,
            self.settings.prefetch,
            int(self.settings.lease_timeout * 1000),
            self.settings.idle_poll,
            DownloaderLoad(crawler).of if downloader_aware(crawler.settings) else None,
        )
        self.live_pages = LivePages(self.stats)
        self.seen = SeenCache(self.settings.seen_cache, ttl=self.settings.dedup.ttl)
        self.writer = TurnWriter(self, self.stats, self.dedup_report, self.settings.write_interval)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._store: RequestStore | None = None
        self._frontier: NodeFrontier | None = None
        crawler.signals.connect(self._on_flush_signal, signal=frontier_flush)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LeasingScheduler:
        return cls(crawler)

    @property
    def frontier(self) -> NodeFrontier:
        if self._frontier is None:
            raise RuntimeError("LeasingScheduler used before open()")
        return self._frontier

    @property
    def client(self) -> PartitionedFrontier:
        return self.frontier.client

    # -- Scrapy's scheduler interface ---------------------------------------------------------

    def open(self, spider: Spider) -> None:
        self._store = RequestStore(self.crawler, spider, compress=self.settings.compress)
        self.context.tracker, self.context.leases_held = self.tracker, self.leases_held
        frontier = self._frontier = NodeFrontier.open(self, spider.name)
        self.spawn(frontier.admission.check())
        logger.info(
            "Frontier %s (%d parts) on %s as node %s (lease %ss, heartbeat %ss, dupefilter %s)",
            frontier.client.keys.tag,
            self.settings.partitions,
            self.context.config.display,
            self.node_id,
            self.settings.lease_timeout,
            self.settings.heartbeat_interval,
            self.settings.dedup.mode.value,
        )

    async def _on_flush_signal(self) -> None:
        await self.flushed()

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    def has_pending_requests(self) -> bool:
        """Requests leased here, held, or on their way to Redis: the node is not idle while
        its own new requests travel (a spider_idle handler that hands requests to
        engine.crawl() would otherwise see the node close before they were written). A lease
        call on its way does not count: an idle node polls."""
        return bool(self.prefetch or self.writer.writing or len(self.tracker))

    def __len__(self) -> int:
        return len(self.prefetch)

    def leases_held(self) -> int:
        """Leases this node holds: started (the tracker's) and prefetched."""
        return len(self.tracker) + len(self.prefetch)

    def enqueue_request(self, request: Request) -> bool:
        self.live_pages.take(request)
        lease_id = request.meta.pop(LEASE_META, None)
        parent_id = request.meta.pop(PARENT_META, None)
        seed = bool(request.meta.pop(SEED_META, False)) and request.dont_filter
        start_url = bool(request.meta.pop(START_URL_META, False))
        fingerprint = self.store.fingerprint(request, seed, start_url=start_url)
        if fingerprint in self.seen and not seed and not self.tracker.tracks(lease_id):
            # A certain duplicate: this node already handed it to the shared dupefilter.
            if self.tracker.tracks(parent_id):
                self.tracker.add_child(parent_id, None)
            self.stats.inc_value("dupefilter/filtered")
            self.stats.inc_value("frontier/seen_cache_hit")
            self.dedup_report.filtered(request)
            return False
        try:
            new: NewRequest | None = self.store.encode(request, fingerprint, seed)
        except codec.UnserializableRequestError as exc:
            new = None
            self.stats.inc_value("frontier/unserializable")
            logger.error("Request not enqueued: %s", exc)
            # the lease it came from (its parent's, or the one it replaces) fails, with why
            owner = parent_id if self.tracker.tracks(parent_id) else lease_id
            if self.tracker.tracks(owner):
                self.tracker.fail(owner, "frontier/unserializable", str(exc))
        if new is not None and fingerprint:
            self.seen.add(fingerprint)
        if self.tracker.tracks(parent_id):
            self.tracker.add_child(parent_id, new)  # releases the parent's hold either way
        elif self.tracker.tracks(lease_id):
            self.tracker.replace(lease_id, new)  # a redirect or retry, or a copy made by the spider
        elif new is not None:
            self.writer.add_fresh([new])
        if new is None:
            return False
        self.stats.inc_value("frontier/enqueued")
        return True

    def _on_progress(self, lease_id: str, children: list[NewRequest]) -> None:
        self.writer.add_fresh(children, waiter=lease_id)

    def next_request(self) -> Request | None:
        taken = self.prefetch.take()
        if taken is None:
            return None
        lease, request = taken
        self.tracker.start(lease.id, lease.body)
        self.stats.inc_value("frontier/dequeued")
        return request

    # -- encoding -----------------------------------------------------------------------------

    @property
    def store(self) -> RequestStore:
        if self._store is None:
            raise RuntimeError("LeasingScheduler used before open()")
        return self._store

    def decode(self, lease: Lease) -> Request | None:
        try:
            request = self.store.decode(lease)
        except DECODE_ERRORS as exc:
            self._on_complete(self.store.undecodable(lease, exc))
            return None
        request.meta[LEASE_META] = lease.id
        return request

    # -- Redis work (all asynchronous, retried through outages) -------------------------------

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    async def flushed(self) -> None:
        """Return once every request handed to ``enqueue_request`` so far is in Redis."""
        await self.writer.flushed()

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        exc = None if task.cancelled() else task.exception()
        if exc is not None and not isinstance(exc, GaveUp):
            logger.error("Frontier task failed: %r", exc, exc_info=exc)

    async def guarded(self, op: Callable[[], Awaitable[Any]]) -> Any:
        deadline = self.context.close_deadline() if self._closing else None
        return await self.guard.run(op, deadline=deadline)

    # -- what the prefetch buffer asks (crawler.frontier.prefetch.PrefetchOwner) -------------

    def may_lease(self) -> bool:
        return not self._closing and self._frontier is not None and self._frontier.may_lease()

    def carry_lease(self, ask: LeaseAsk, done: Callable[[list[Lease] | None], None]) -> bool:
        carried = self.writer.carry_lease(ask, done)
        if carried:
            self.stats.inc_value("frontier/lease_calls/with_write")
        return carried

    def lease_alone(self) -> None:
        self.stats.inc_value("frontier/lease_calls/alone")

    def leased(self, count: int) -> None:
        self.stats.inc_value("frontier/leased", count)

    def wake(self) -> None:
        wake_engine(self.crawler)

    @property
    def refused(self) -> bool:
        return self._frontier is not None and self._frontier.admission.refused

    def refuse(self, reason: FrontierRefused) -> None:
        self.frontier.admission.refuse(reason)

    def _on_complete(self, state: LeaseState) -> None:
        self.writer.add_settled(state)

    # -- what the turn writer asks (crawler.frontier.turn_writer.TurnOwner) -------------------

    def new_work(self) -> None:
        self.prefetch.new_work()
        if not self.prefetch:
            wake_engine(self.crawler)  # new work: lease it now, not after FRONTIER_IDLE_POLL

    def release(self, lease_id: str) -> None:
        self.tracker.release(lease_id)

    def wrote(self) -> None:
        # not has_pending_requests(): the write that calls this is still on its way
        if not (self.prefetch or self.writer.has_work or len(self.tracker)):
            # Idle now, may be for good: the engine looks at once (spider_idle, closing on
            # idle), not at its next heartbeat, up to 5 s later.
            wake_engine(self.crawler)

    @property
    def epoch(self) -> str:
        return self._frontier.keeper.epoch if self._frontier is not None else ""

    def recorded(self, epoch: str, new: list[str], known: list[str]) -> None:
        if self._frontier is not None and self._frontier.feed is not None:
            self._frontier.feed.publish(epoch, new, known)

    def top_up(self) -> tuple[LeaseAsk, Callable[[list[Lease] | None], None]] | None:
        asked = self.prefetch.top_up()
        if asked is not None:
            self.stats.inc_value("frontier/lease_calls/with_write")
        return asked

    async def _close(self, reason: str) -> None:
        self._closing = True
        frontier = self._frontier
        if frontier is not None:
            await frontier.stop_checks()
        await self.writer.flushed()  # what is gathered goes now
        pending = [task for task in self._tasks if not task.done()]
        if pending:
            left = self.context.close_deadline() - time.monotonic()
            await asyncio.wait(pending, timeout=max(0.0, left))
        released = 0
        if frontier is not None:
            released = await frontier.give_back(self.guarded, self.settings.lease_timeout)
        self.dedup_report.summary()
        logger.info(
            "Returned %d unfinished leases to the queue (%s); %d more, not fetched at the stop, "
            "went back with the node's writes",
            released,
            reason,
            self.writer.stopped,
        )
        for task in list(self._tasks):
            task.cancel()
        self.context.tracker, self.context.leases_held = None, None
