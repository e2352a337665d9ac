"""``ClusterRateLimitMiddleware``: one rate limit per site for the whole cluster.

Downloader middleware, and the pacing the node's download handler
(``crawler.download_handler``) asks of it as each request leaves, after Scrapy's own
per-site queue: a request reserves its site's next slot (``crawler.politeness.limiter``;
one Redis round trip, Redis server time) and waits for it with ``asyncio.sleep``: the
reactor never blocks and requests to other sites keep flowing. A request that had to wait
checks the site's cooldown before it goes (a second round trip) and books a
new slot if a penalty started meanwhile; a node that starts stopping ends the wait (the
request is not fetched, its lease goes back to the queue). Responses with a status in
``POLITENESS_PENALTY_STATUSES`` (429, 503) start a shared cooldown for the
site on every node, at least as long as their ``Retry-After``, and halve its
rate, which then recovers gradually. The site is ``host[:port]`` (a default port left out),
or the ``download_slot`` a spider gave a request (``site_for``).

Without ``REDIS_URL`` (standalone) the same limiter runs in memory. In cluster
mode a Redis outage (:mod:`crawler.redis_outage`) pauses requests until Redis
answers again: limiting per node meanwhile would multiply a site's rate by the
number of nodes. Redis's clock is the limiter's: a step of it ahead lets the requests already
booked go with the next ones, once.

Waits and cooldowns also go to the node's metrics (``crawler_politeness_wait_seconds``,
``crawler_politeness_cooldown_seconds``). Stats: ``politeness/reserved``, ``politeness/delayed``,
``politeness/wait_ms``, ``politeness/rebooked``, ``politeness/penalty/<reason>``,
``politeness/redis_error``.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from scrapy.utils.httpobj import urlparse_cached

from crawler.extensions.metrics import PrometheusMetrics
from crawler.middlewares.refused import STOP_LOOK, not_fetched_at_stop, not_waiting_past_stop
from crawler.middlewares.robots import SharedRobotsTxtMiddleware
from crawler.node_context import NodeContext
from crawler.politeness.delays import CrawlDelays, site_of_netloc
from crawler.politeness.limiter import READ_ONLY_CALLS, Limiter, LocalLimiter, RedisLimiter
from crawler.politeness.settings import DEFAULT_PORTS, PolitenessSettings
from crawler.redis_outage import OutageGuard

logger = logging.getLogger(__name__)

DONT_THROTTLE_META = "dont_throttle"


def site_of(url: str) -> str:
    """The site of ``url`` (``crawler.politeness.delays.site_of_netloc``)."""
    return site_of_netloc(urlsplit(url).netloc)


# Set on a request that reached the downloader without a ``download_slot``: the one Scrapy's
# downloader then gives it (its host name, kept by retries and redirects) is not the spider's.
AUTO_SLOT_META = "politeness_auto_slot"


def site_for(request: Request) -> str:
    """The site the limiter paces ``request`` under: its ``host[:port]`` (a default port
    written out is left out, as Scrapy's slot leaves it), or the ``meta['download_slot']`` its
    spider gave it to pace hosts as one, whatever its name (Scrapy's own slot, the host name,
    is none, nor is the first URL's host a redirect carries over)."""
    url = urlparse_cached(request)
    site = site_of_netloc(url.netloc)
    if url.port is not None and url.port == DEFAULT_PORTS.get(url.scheme):
        site = site.rpartition(":")[0]
    slot = request.meta.get("download_slot")
    if not isinstance(slot, str) or not slot:
        return site
    if request.meta.get(AUTO_SLOT_META):
        first = (request.meta.get("redirect_urls") or [request.url])[0]
        if slot in (url.hostname, urlsplit(str(first)).hostname):
            return site
    return slot.lower()


def retry_after_seconds(value: bytes | None) -> float:
    """``Retry-After`` as seconds (delta or HTTP date); 0 when absent or unreadable."""
    if not value:
        return 0.0
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, when.timestamp() - time.time())


class ClusterRateLimitMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.settings = PolitenessSettings.from_settings(crawler.settings)
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.local = LocalLimiter()
        self.crawler = crawler
        self.metrics = PrometheusMetrics.node_metrics(crawler)
        self._delays: CrawlDelays | None = None
        self.shared: Limiter | None = None
        self.guard: OutageGuard | None = None
        context = NodeContext.of(crawler)
        if context is not None:
            self.shared = RedisLimiter(context.redis, self.settings.key_template)
            self.guard = context.guard("politeness")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterRateLimitMiddleware:
        return cls(crawler)

    @property
    def delays(self) -> CrawlDelays:
        """The ``Crawl-delay`` values the node's robots.txt middleware learned (none if it is
        off). Looked up once the downloader's middlewares are all built."""
        if self._delays is None:
            robots = self.crawler.get_downloader_middleware(SharedRobotsTxtMiddleware)
            self._delays = robots.crawl_delays if robots is not None else CrawlDelays()
        return self._delays

    async def _limited(self, call: str, site: str, *args: object) -> float:
        if self.shared is not None and self.guard is not None:
            shared = self.shared
            with not_fetched_at_stop("politeness/stopped", f"the rate limit of {site}"):
                result: float = await self.guard.run(
                    lambda: getattr(shared, call)(site, *args), reads_only=call in READ_ONLY_CALLS
                )
            return result
        local_result: float = await getattr(self.local, call)(site, *args)
        return local_result

    async def pace(self, request: Request) -> None:
        """Wait until ``request`` may leave: its site's next slot, and no cooldown. Called by
        the node's download handler, so a request held in Scrapy's per-site queue books its
        time when it leaves it, not when it reached the downloader. Requests without a host
        (``data:``, ``file:``) and those with meta ``dont_throttle`` go at once."""
        url = urlparse_cached(request)
        if request.meta.get(DONT_THROTTLE_META) or not url.hostname:
            return
        site = site_for(request)  # a slot's rate, with its host's robots.txt Crawl-delay
        rate = self.delays.apply(site_of_netloc(url.netloc), self.settings.rate_for(site))
        while True:
            jitter = self.settings.jitter
            spread = random.uniform(1 - jitter, 1 + jitter) if jitter else 1.0
            wait = await self._limited("reserve", site, rate, self.settings.penalty, spread)
            self.stats.inc_value("politeness/reserved")
            self.metrics.politeness_wait.observe(wait)
            if wait <= 0:
                return
            self.stats.inc_value("politeness/delayed")
            self.stats.inc_value("politeness/wait_ms", int(wait * 1000))
            await self._wait_turn(wait, site)
            # A penalty may have started while this request waited for its slot.
            if await self._limited("cooling", site) <= 0:
                return
            self.stats.inc_value("politeness/rebooked")

    async def _wait_turn(self, wait: float, site: str) -> None:
        """Sleep ``wait`` seconds, unless the node stops meanwhile (``politeness/stopped``)."""
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            not_waiting_past_stop(self.crawler, "politeness/stopped", left, f"its turn at {site}")
            await asyncio.sleep(min(left, STOP_LOOK))

    def process_request(self, request: Request) -> None:
        """Mark a request without a ``download_slot`` before Scrapy's downloader gives it its
        own (``site_for``)."""
        if not request.meta.get("download_slot"):
            request.meta[AUTO_SLOT_META] = True

    async def process_response(self, request: Request, response: Response) -> Response:
        # a 429 or 503 from the HTTP cache is no answer of the site's now
        if response.status in self.settings.penalty_statuses and "cached" not in response.flags:
            await self.penalize(site_for(request), str(response.status), response)
        return response

    async def penalize(self, site: str, reason: str, response: Response | None = None) -> float:
        """Cool ``site`` down for every node (also for spiders' own anti-bot checks)."""
        retry_after = retry_after_seconds(
            response.headers.get(b"Retry-After") if response is not None else None
        )
        cooldown = await self._limited("penalize", site, retry_after, self.settings.penalty)
        self.stats.inc_value(f"politeness/penalty/{reason}")
        self.metrics.cooling(site, cooldown)
        logger.warning("%s answered %s: every node pauses it for %.1fs", site, reason, cooldown)
        return cooldown
