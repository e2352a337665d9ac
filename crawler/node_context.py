"""``NodeContext``: what one cluster node shares between its components.

One per crawler, built as an extension (the add-on lists it) before the engine, so the
scheduler, middlewares, pipelines, spiders and other extensions reach it with
:meth:`NodeContext.of`. It owns:

- the node's one Redis connection pool for the configured topology (``REDIS_URL``,
  at most ``REDIS_MAX_CONNECTIONS`` commands at once; more wait), closed when the engine
  has stopped;
- the node id (``CRAWLER_NODE_ID``, validated);
- the outage policy (:mod:`crawler.redis_outage`): one guard per component, counting
  ``<component>/redis_error`` and ``redis/outage/<reason>``;
- the lease tracker of the node's ``LeasingScheduler`` (once it is open), and whether
  the scheduler may use the frontier (:meth:`NodeContext.frontier_open`): seeds and start
  requests are read only once it may, and never by a node it refused;
- the cluster clock (Redis server time);
- one deadline for the last Redis work of every component at a stop (short during an
  outage, so Ctrl-C stops a node in seconds whatever Redis is doing);
- supervision of background loops: a loop that crashes is logged with its traceback,
  counted (``node/loop_crashed/<name>``) and restarted;
- a watch on Redis's clock (:mod:`crawler.redis_clock`): a step of it is said in a WARNING
  and counted (``redis/clock_step/ahead``, ``redis/clock_step/back``);
- on a Sentinel URL, the sentinels' failover messages (:mod:`crawler.redis_sentinel_listeners`,
  :mod:`crawler.redis_master_watch`): commands wait while a failover is under way and go to
  the new master once it is promoted (a WARNING, ``redis/master_switched``; a sentinel that
  cannot be heard, a WARNING and ``redis/sentinel_unheard``).

Without ``REDIS_URL`` (standalone) it is not configured and :meth:`of` returns None.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import redis.asyncio
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import StatsCollector

from crawler.frontier.acks import AckTracker
from crawler.node import resolve_node_id
from crawler.redis_checks import topology_problem
from crawler.redis_clock import READ_TIMEOUT, Step, step_message, watch
from crawler.redis_connection import AsyncRedis, async_client, masters_time_ms, time_ms
from crawler.redis_master_watch import Switch
from crawler.redis_outage import GaveUp, OutageGuard
from crawler.redis_sentinel_listeners import follow_master
from crawler.redis_url import RedisConfig, Topology
from crawler.settings_values import get_float, get_int

logger = logging.getLogger(__name__)

LOOP_RESTART_DELAY = 1.0  # seconds before a crashed loop starts again
OUTAGE_CLOSE_BUDGET = 3.0  # seconds all last Redis work at a stop may take during an outage
# seconds a cancelled loop has to finish what it shields (a spill giving its leases back)
LOOP_CANCEL_GRACE = 3.0


class NodeContext:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        url = settings.get("REDIS_URL") or ""
        if not url:
            raise NotConfigured("standalone (no REDIS_URL): no cluster node")
        max_connections = get_int(settings, "REDIS_MAX_CONNECTIONS")
        if max_connections < 1:
            raise ValueError(f"REDIS_MAX_CONNECTIONS={max_connections} must be >= 1")
        self.config = RedisConfig.from_url(url)
        if problem := topology_problem(self.config):  # every command would fail, or MOVED
            raise ValueError(problem)
        self.node_id = resolve_node_id(settings.get("CRAWLER_NODE_ID") or "")
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.redis: AsyncRedis = async_client(self.config, max_connections=max_connections)
        self.tracker: AckTracker | None = None  # set by the LeasingScheduler when it opens
        # and how many leases it holds (its tracker's and its prefetched ones)
        self.leases_held: Callable[[], int] | None = None
        self._frontier_checked = asyncio.Event()
        self._frontier_usable = False
        self.close_timeout = get_float(settings, "FRONTIER_CLOSE_TIMEOUT")
        self._close_by: float | None = None
        self._guards: dict[str, OutageGuard] = {}
        self._loops: set[asyncio.Task[None]] = set()
        self._crawler = crawler
        crawler.signals.connect(self._watch_clock, signal=signals.engine_started)
        crawler.signals.connect(self._follow_master, signal=signals.engine_started)
        crawler.signals.connect(self._close, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NodeContext:
        return cls(crawler)

    @staticmethod
    def of(crawler: Crawler) -> NodeContext | None:
        """The crawler's node context; None when standalone (no ``REDIS_URL``)."""
        context = crawler.get_extension(NodeContext)
        if context is None and crawler.settings.get("REDIS_URL"):
            raise ValueError(
                "REDIS_URL is set but the extension crawler.node_context.NodeContext is off "
                "(EXTENSIONS): every cluster component needs it; remove that EXTENSIONS entry"
            )
        return context

    @staticmethod
    def required(crawler: Crawler, component: str) -> NodeContext:
        """The node context, or ``NotConfigured`` for ``component`` when there is none."""
        context = NodeContext.of(crawler)
        if context is None:
            raise NotConfigured(f"{component} needs REDIS_URL and the crawler add-on's NodeContext")
        return context

    def guard(self, component: str) -> OutageGuard:
        """The outage guard of ``component`` (one per component: it logs each outage once)."""
        if component not in self._guards:

            def count(reason: str) -> None:
                self.stats.inc_value(f"{component}/redis_error")
                self.stats.inc_value(f"redis/outage/{reason}")

            self._guards[component] = OutageGuard(
                component, count, stop_deadline=self.stop_deadline
            )
        return self._guards[component]

    @property
    def redis_down(self) -> bool:
        """Some component is in a Redis outage now."""
        return any(guard.down for guard in self._guards.values())

    def close_deadline(self) -> float:
        """The one deadline (monotonic) of every component's last Redis work at a stop, set
        at the first call: ``FRONTIER_CLOSE_TIMEOUT`` from then, or ``OUTAGE_CLOSE_BUDGET``
        while Redis is in an outage (a stop never waits long for a Redis that is away; what
        is not returned then, other nodes reclaim)."""
        if self._close_by is None:
            budget = OUTAGE_CLOSE_BUDGET if self.redis_down else self.close_timeout
            self._close_by = time.monotonic() + budget
        return self._close_by

    def stop_deadline(self) -> float | None:
        """``close_deadline`` once the node is stopping (a signal, Ctrl-C: Scrapy's
        ``Crawler.stop_async``), else None: every guard's retries end by it, so a download
        waiting on the rate limiter or a write retrying does not hold a stop until Redis is
        back (what is not returned then, other nodes reclaim)."""
        return None if self._crawler.crawling else self.close_deadline()

    def frontier_checked(self, usable: bool) -> None:
        """The scheduler found the frontier usable by this node, or refused it."""
        self._frontier_usable = usable
        self._frontier_checked.set()

    async def frontier_open(self) -> bool:
        """Wait until the scheduler has checked the frontier; False when it refused it
        (``FRONTIER_PARTITIONS`` is not the crawl's): read no seeds then."""
        await self._frontier_checked.wait()
        return self._frontier_usable

    async def now_ms(self, component: str) -> int:
        """The cluster clock: Redis server time in milliseconds, through outages."""
        return await self.guard(component).run(lambda: time_ms(self.redis), reads_only=True)

    def supervise(
        self, name: str, loop: Callable[[], Coroutine[Any, Any, None]]
    ) -> asyncio.Task[None]:
        """Run ``loop`` until it returns or is cancelled, restarting it when it crashes."""

        async def supervised() -> None:
            while True:
                try:
                    await loop()
                    return
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if isinstance(exc, GaveUp) and not self._crawler.crawling:
                        return  # the node stops while Redis is away: the loop ends here
                    self.stats.inc_value(f"node/loop_crashed/{name}")
                    logger.exception(
                        "Background loop %r crashed; restarting it in %.0fs",
                        name,
                        LOOP_RESTART_DELAY,
                    )
                    await asyncio.sleep(LOOP_RESTART_DELAY)

        task = asyncio.ensure_future(supervised())
        self._loops.add(task)
        task.add_done_callback(self._loops.discard)
        return task

    def _watch_clock(self) -> None:
        def stepped(step: Step) -> None:
            self.stats.inc_value(f"redis/clock_step/{step.direction}")
            logger.warning("%s", step_message(step))

        self.supervise(
            "redis_clock",
            lambda: watch(lambda: masters_time_ms(self.redis, READ_TIMEOUT), stepped),
        )

    def _follow_master(self) -> None:
        if self.config.topology is not Topology.SENTINEL:
            return
        assert isinstance(self.redis, redis.asyncio.Redis)
        client = self.redis

        def switched(switch: Switch) -> None:
            self.stats.inc_value("redis/master_switched")
            logger.warning(
                "Redis Sentinel made %s:%d the master of %r (it was %s:%d): this node's "
                "Redis commands go there now",
                *switch.new,
                switch.service,
                *switch.old,
            )

        def unheard(_sentinel: str) -> None:
            self.stats.inc_value("redis/sentinel_unheard")

        self.supervise(
            "redis_master", lambda: follow_master(self.config, client, switched, unheard)
        )

    async def stop_loops(self, *tasks: asyncio.Task[None]) -> None:
        """Cancel ``tasks`` (every loop when none is given) and give them
        ``LOOP_CANCEL_GRACE`` to finish what they shield, before Redis is closed under them."""
        stopping = set(tasks or self._loops)
        for task in stopping:
            task.cancel()
        if stopping:
            await asyncio.wait(stopping, timeout=LOOP_CANCEL_GRACE)

    async def _close(self) -> None:
        await self.stop_loops()
        await self.redis.aclose()
