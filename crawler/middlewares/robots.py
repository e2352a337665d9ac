"""``SharedRobotsTxtMiddleware``: robots.txt fetched once for the whole cluster.

Scrapy's ``RobotsTxtMiddleware``, with the robots.txt body of each site cached
in Redis (``ROBOTSTXT_CACHE_KEY``, ``ROBOTSTXT_CACHE_TTL``): the first node to
need it downloads it, every other node parses the cached copy (nodes that need it at the same
moment, before the first copy is stored, each download it: nothing claims the download). 2xx and 4xx
answers are cached (a 4xx means "no rules"); 5xx and errors are not. The
``Crawl-delay`` for our user agent slows the site in the cluster-wide limiter.
Without ``REDIS_URL`` it behaves like Scrapy's middleware. Requests that arrive while a
site's robots.txt is looked up all wait for it (in Scrapy 2.19's own middleware only the
first did: the others were let through as if there were no rules).

Stats: ``robotstxt/shared_hit``, ``robotstxt/shared_stored``, ``robotstxt/redis_error``
(besides Scrapy's ``robotstxt/*``).
"""

from __future__ import annotations

import asyncio
import logging

from protego import Protego
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.robotstxt import RobotParser
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler
from twisted.internet.defer import Deferred

from crawler.lua import data
from crawler.middlewares.refused import RefusedRequest, not_fetched_at_stop
from crawler.node_context import NodeContext
from crawler.politeness.delays import CrawlDelays, site_of_netloc
from crawler.redis_connection import AsyncRedis
from crawler.redis_outage import GaveUp
from crawler.settings_values import get_int

logger = logging.getLogger(__name__)
FORBIDDEN = "robotstxt/forbidden"  # Scrapy's stat, and the failure reason of such a request


def cache_key_template(template: object) -> str:
    """``ROBOTSTXT_CACHE_KEY``: a %-template of one placeholder, ``%(site)s`` (without it every
    site would share one cached robots.txt); ValueError naming it."""
    given = f"ROBOTSTXT_CACHE_KEY={template!r}"
    if not isinstance(template, str) or "%(site)s" not in template:
        raise ValueError(f"{given} must hold %(site)s (each site's robots.txt has its own key)")
    try:
        template % {"site": "example.com"}  # only whether it formats
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{given} is not a valid template ({exc!r}): only %(site)s") from exc
    return template


class SharedRobotsTxtMiddleware(RobotsTxtMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        self._ttl = get_int(settings, "ROBOTSTXT_CACHE_TTL")
        if self._ttl < 1:
            raise ValueError(f"ROBOTSTXT_CACHE_TTL={self._ttl} must be >= 1 (seconds)")
        self._key_template: str = cache_key_template(settings.get("ROBOTSTXT_CACHE_KEY"))
        context = NodeContext.of(crawler)
        self._redis: AsyncRedis | None = context.redis if context is not None else None
        self._guard = context.guard("robotstxt") if context is not None else None
        self.crawl_delays = CrawlDelays()  # read by ClusterRateLimitMiddleware
        self._pending: dict[str, asyncio.Future[RobotParser | None]] = {}  # lookups under way

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SharedRobotsTxtMiddleware:
        return cls(crawler)

    def _key(self, netloc: str) -> str:
        return self._key_template % {"site": netloc}

    def process_request_2(self, rp: RobotParser | None, request: Request) -> None:
        """Scrapy's check; a request robots.txt forbids fails as ``robotstxt/forbidden`` (its
        stat), not as a download error (``download/IgnoreRequest``)."""
        try:
            super().process_request_2(rp, request)
        except IgnoreRequest as exc:
            raise RefusedRequest(FORBIDDEN, str(exc)) from exc

    async def robot_parser(self, request: Request) -> RobotParser | None:
        """The site's parser (None: no rules). One lookup per site at a time; the requests
        that arrive meanwhile wait for its result, every one of them (Scrapy's own middleware
        hands its pending parser, a Deferred, to the first waiter only: the others got None,
        "allowed")."""
        netloc = urlparse_cached(request).netloc
        pending = self._pending.get(netloc)
        if pending is not None:
            return await asyncio.shield(pending)
        if netloc in self._parsers:
            known = self._parsers[netloc]
            if not isinstance(known, Deferred):
                return known
        pending = asyncio.get_running_loop().create_future()
        self._pending[netloc] = pending
        try:
            parser = await self._lookup(request, netloc)
        except BaseException:
            pending.cancel()
            raise
        finally:
            del self._pending[netloc]
        pending.set_result(parser)
        return parser

    async def _lookup(self, request: Request, netloc: str) -> RobotParser | None:
        """The parser from the cluster's cache, else from Scrapy's download of robots.txt."""
        if self._redis is not None:
            body = await self._cached(netloc)
            if body is not None:
                self._stats.inc_value("robotstxt/shared_hit")
                self._learn(netloc, body)
                self._parsers[netloc] = build_from_crawler(self._parserimpl, self.crawler, body)
        return await super().robot_parser(request)  # downloads it when not known yet

    async def _cached(self, netloc: str) -> bytes | None:
        redis, guard = self._redis, self._guard
        assert redis is not None
        assert guard is not None
        with not_fetched_at_stop("robotstxt/stopped", f"the shared robots.txt of {netloc}"):
            body = await guard.run(lambda: redis.get(self._key(netloc)), reads_only=True)
        return None if body is None else data(body)

    async def _parse_robots(self, response: Response, netloc: str, request: Request) -> None:
        await super()._parse_robots(response, netloc, request)
        body = response.body if response.status < 400 else b""
        self._learn(netloc, body)
        redis, guard = self._redis, self._guard
        if redis is None or guard is None or response.status >= 500:
            return
        try:
            await guard.run(lambda: redis.set(self._key(netloc), body, ex=self._ttl))
        except GaveUp:  # the node stops while Redis is away: the next node fetches it again
            return
        self._stats.inc_value("robotstxt/shared_stored")

    def _learn(self, netloc: str, body: bytes) -> None:
        agent = self._robotstxt_useragent or self._default_useragent
        delay = Protego.parse(body.decode("utf-8", "replace")).crawl_delay(agent)
        self.crawl_delays.set(site_of_netloc(netloc), delay)
        if delay:
            logger.info("robots.txt of %s asks for a crawl delay of %ss", netloc, delay)
