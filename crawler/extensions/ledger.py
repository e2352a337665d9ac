"""``LedgerExtension``: every node adds what it did to a per-crawl ledger in Redis.

Every ``LEDGER_INTERVAL`` seconds and at spider close the node pushes the deltas
of its stats since its last push (``crawler.extensions.ledger_layout``) in one Lua
step (``ledger_push.lua``): to the crawl's totals and to the bucket of the current
minute (Redis time). ``crawler status`` and ``crawler top`` read them.

Pushes are numbered per node run (``<node id>:<random>``) and fenced in Redis: a
push that failed or timed out is sent again unchanged, through Redis outages, and is
added once even when the first attempt had landed. The runs hash keeps each run's
last push, so ``crawler status`` names the runs that stopped without their final push
(killed nodes): the ledger is short by at most their last interval, and says so.

Spooled messages of another crawl that the node's replays took out of its spool (a node started
with a new ``CRAWLER_CRAWL_ID`` on a host whose spool holds the last crawl's) go to that crawl's
``items/replayed``, in pushes of their own (run ``<node id>:replay-<random>``, a spool replay's to
``crawler status``) numbered as the node's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import TypeVar

from redis.commands.core import AsyncScript
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector

from crawler.extensions.ledger_layout import (
    REPLAY_RUN,
    SPOOLED_BY_PREFIX,
    LedgerKeys,
    fields_by_crawl,
    ledger_fields,
    push_args,
    replayed_of_other_crawls,
)
from crawler.lua import script_text
from crawler.node import resolve_crawl_id
from crawler.node_context import NodeContext
from crawler.redis_outage import GaveUp, OutageGuard
from crawler.settings_values import get_bool, get_float

logger = logging.getLogger(__name__)

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class LedgerSettings:
    crawl_id: str
    interval: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> LedgerSettings:
        if not get_bool(settings, "LEDGER_ENABLED"):
            raise NotConfigured(  # Scrapy says it in a WARNING
                "LEDGER_ENABLED=False: this node's work is not added to the crawl ledger "
                "(`crawler status` and `crawler top` do not count it)"
            )
        if not settings.get("REDIS_URL"):
            raise NotConfigured("REDIS_URL='' (standalone mode): no ledger")
        values = cls(
            crawl_id=resolve_crawl_id(settings.get("CRAWLER_CRAWL_ID")),
            interval=get_float(settings, "LEDGER_INTERVAL"),
        )
        values.validate()
        return values

    def validate(self) -> None:
        if not self.interval > 0:
            raise ValueError(f"LEDGER_INTERVAL={self.interval} must be > 0 (seconds)")


@dataclass(frozen=True, slots=True)
class Push:
    number: int
    deltas: dict[str, int]
    totals: dict[str, int]  # the node's counters this push brings the ledger to
    # (crawl id, field) -> the replayed messages of other crawls since the last push
    other_crawls: dict[tuple[str, str], int]
    other_totals: dict[tuple[str, str], int]


class LedgerExtension:
    def __init__(self, crawler: Crawler) -> None:
        self.settings = LedgerSettings.from_settings(crawler.settings)
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self._pushed: dict[str, int] = {}
        self._pushed_other: dict[tuple[str, str], int] = {}
        self._pending: Push | None = None  # sent, not yet known to be added
        self._number = 0
        self._run = ""
        self._replay_run = ""  # the run of its pushes to other crawls' ledgers
        self._spider = ""
        self._node = ""
        self._script: AsyncScript | None = None
        self._guard: OutageGuard | None = None
        self._keys: LedgerKeys | None = None
        self._stop = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LedgerExtension:
        return cls(crawler)

    def spider_opened(self, spider: Spider) -> None:
        context = NodeContext.required(self.crawler, "LedgerExtension")
        self._keys = LedgerKeys.for_crawl(spider.name, self.settings.crawl_id)
        self._node = context.node_id
        self._spider = spider.name
        run = uuid.uuid4().hex[:8]
        self._run = f"{context.node_id}:{run}"
        self._replay_run = f"{context.node_id}{REPLAY_RUN}{run}"
        self._script = context.redis.register_script(script_text("crawler.frontier", "ledger_push"))
        self._guard = context.guard("ledger")
        self._loop = context.supervise("ledger", self._push_loop)
        logger.info(
            "Ledger %s, pushed every %ss as run %s",
            self._keys.total,
            self.settings.interval,
            self._run,
        )

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        self._stop.set()
        if self._loop is not None:
            # A push cancelled on its way may have landed: the final push sends it again
            # under its number first, and it is added once.
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
        if self._script is None:
            return
        assert self._guard is not None
        deadline = NodeContext.required(self.crawler, "LedgerExtension").close_deadline()
        try:
            await self._guard.run(lambda: self.push(final=True), deadline=deadline)
        except GaveUp:
            if self._pending is not None and self._pending.deltas:
                logger.error(
                    "Last ledger push failed: %s's totals are short by this node's last %ss "
                    "(crawler status names run %s)",
                    spider.name,
                    self.settings.interval,
                    self._run,
                )
            else:  # nothing was missing: only the run is not marked final
                logger.warning("Redis unavailable at close: run %s not marked final", self._run)

    async def _push_loop(self) -> None:
        assert self._guard is not None
        # At once, empty: the run is in the ledger from its start, so one killed before its
        # first interval is named as short, not missing.
        await self._guard.run(self.push)
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._stop.wait(), self.settings.interval)
            except TimeoutError:
                await self._guard.run(self.push)

    async def push(self, final: bool = False) -> dict[str, int]:
        """Add this node's counters since its last push to the ledger; return the deltas.

        A push that failed is sent again unchanged first (added once however often it is
        sent), so one that timed out here but ran in Redis is never counted twice."""
        assert self._script is not None
        if self._pending is not None:
            await self._send(self._pending, final=False)
        stats = self.stats.get_stats()
        current = ledger_fields(stats)
        if current["items/spooled"]:  # status names the nodes whose spool holds items
            current[SPOOLED_BY_PREFIX + self._node] = current["items/spooled"]
        other = replayed_of_other_crawls(stats)
        self._number += 1
        push = Push(
            self._number,
            _changes(current, self._pushed),
            current,
            _changes(other, self._pushed_other),
            other,
        )
        self._pending = push
        await self._send(push, final=final)
        return push.deltas

    async def _send(self, push: Push, *, final: bool) -> None:
        assert self._script is not None
        assert self._keys is not None
        args = push_args(
            self._run,
            push.number,
            self._keys,
            state="final" if final else "running",
            every_ms=int(self.settings.interval * 1000),
            deltas=push.deltas,
        )
        await self._script(keys=[self._keys.total, self._keys.runs], args=args)
        for crawl, deltas in fields_by_crawl(push.other_crawls.items()).items():
            keys = LedgerKeys.for_crawl(self._spider, crawl)
            other_args = push_args(
                self._replay_run, push.number, keys, state="final", every_ms=0, deltas=deltas
            )
            await self._script(keys=[keys.total, keys.runs], args=other_args)
        self._pushed = push.totals
        self._pushed_other = push.other_totals
        self._pending = None


def _changes(current: dict[K, int], pushed: dict[K, int]) -> dict[K, int]:
    """The counters of ``current`` that moved since ``pushed``, by how much."""
    return {
        field: value - pushed.get(field, 0)
        for field, value in current.items()
        if value != pushed.get(field, 0)
    }
