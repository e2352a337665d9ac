"""``RedisSpider`` and ``RedisCrawlSpider``: spiders fed from Redis, drop-ins for scrapy-redis's.

scrapy-redis 0.9.1 only defines ``start_requests()``, which Scrapy 2.19 no
longer calls, so its seeds arrive after an idle tick. These base classes read
the seed key in an async ``start()`` that keeps listening while the node is
idle, and close the node after ``max_idle_time`` idle seconds (0 = never).
Without ``REDIS_URL`` they crawl the ``url`` argument
(``scrapy crawl pages -a url=...``) and their ``start_urls`` on Scrapy's own scheduler; with
it their ``start_urls`` too, once per crawl.

scrapy-redis's spider attributes work as there, also as ``-a`` arguments:
``redis_key`` (``%(name)s`` is the spider name), ``redis_batch_size``,
``redis_encoding``, ``max_idle_time``. ``make_request_from_data(data)`` turns
one raw seed (bytes) into a request, a list of them, or nothing; by default
it parses the seed formats of ``crawler.frontier.seeds`` and calls
``request_from_seed``. Seeds are ``dont_filter`` unless ``SEEDS_DONT_FILTER``
is off or the seed says otherwise: pushing a seed again crawls it again.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any, Self

import scrapy
from scrapy import FormRequest, Request, signals
from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings
from scrapy.spiders import CrawlSpider
from scrapy.utils.conf import build_component_list

from crawler import scrapy_redis_compat
from crawler.frontier.codec import UnserializableRequestError
from crawler.frontier.request_store import RequestStore
from crawler.frontier.scheduler import SEED_META, START_URL_META
from crawler.frontier.seed_queue import SeedQueue
from crawler.frontier.seed_settings import SeedSettings
from crawler.frontier.seeds import InvalidSeed, Seed, parse_seed
from crawler.node import resolve_node_id
from crawler.setting_names import require_project_settings
from crawler.settings_values import component_path
from crawler.signals import user_receivers
from crawler.spiders.seed_reader import SeedReader
from crawler.spiders.seed_rules import check_seed_meta, seed_callback
from crawler.url_credentials import mask_secrets
from crawler.wakeup import wake_engine

logger = logging.getLogger(__name__)

URL_LENGTH_MIDDLEWARE = "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware"
WRONG_TYPE_RETRY_MAX = 30.0  # seconds: longest pause between looks at a seed key of another type


def url_length_limit(settings: BaseSettings) -> int:
    """The URL length above which Scrapy's UrlLengthMiddleware drops a request (0: none)."""
    middlewares = build_component_list(settings.getwithbase("SPIDER_MIDDLEWARES"))
    if URL_LENGTH_MIDDLEWARE not in map(component_path, middlewares):
        return 0
    return settings.getint("URLLENGTH_LIMIT")


def invalid_seed(exc: Exception) -> InvalidSeed:
    """What ``make_request_from_data`` raised, as an invalid seed with its reason."""
    if isinstance(exc, InvalidSeed):
        return exc
    return InvalidSeed(f"error/{type(exc).__name__}", f"make_request_from_data: {exc}")


class RedisSpider(scrapy.Spider):
    """Base class for spiders fed from ``<name>:start_urls`` (or ``redis_key``)."""

    reads_redis_seeds = True  # scrapy_redis_compat refuses scrapy-redis hooks it never calls

    redis_key: str | None = None
    redis_batch_size: int | str | None = None
    redis_encoding: str | None = None
    max_idle_time: float | str | None = None

    seed_settings: SeedSettings
    node_id: str

    def __init__(self, *args: Any, url: str | None = None, **kwargs: Any) -> None:
        if url is not None:  # the seeds below, and, as Scrapy makes every argument, self.url
            kwargs["url"] = url
        super().__init__(*args, **kwargs)
        self.argument_seeds: list[str] = [u for u in (url or "").split(",") if u.strip()]
        self._seed_reader: SeedReader | None = None
        self._seed_store: RequestStore | None = None  # checks that a seed's request is storable

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        # Scrapy builds the spider before add-ons run: read the settings as ClusterAddon
        # will leave them (scrapy-redis names mapped), from a copy.
        require_project_settings(crawler.settings)
        settings = crawler.settings.copy()
        scrapy_redis_compat.apply(settings)
        spider.seed_settings = config = SeedSettings.from_settings(settings, spider)
        # as scrapy-redis's setup_redis leaves them, for the spider's own code to read
        spider.redis_key = config.seeds_key
        spider.redis_batch_size = config.batch_size
        spider.redis_encoding = config.encoding
        spider.max_idle_time = config.max_idle_time
        spider.node_id = resolve_node_id(crawler.settings.get("CRAWLER_NODE_ID") or "")
        crawler.signals.connect(spider._return_seeds, signal=signals.spider_closed)
        crawler.signals.connect(spider.check_idle_handlers, signal=signals.spider_opened)
        if not spider.seed_settings.redis_url and not spider.argument_seeds:
            logger.warning(
                "REDIS_URL is empty (standalone mode): spider %r reads no seeds from Redis and "
                "has no -a url=...; set REDIS_URL (or REDIS_HOST/REDIS_PORT) to join a cluster",
                spider.name,
            )
        return spider

    def check_idle_handlers(self) -> None:
        """Warn about ``spider_idle`` handlers of the user's (connected by then): Scrapy sends
        the signal only once ``start()`` ends, and this ``start()`` reads seeds until the node
        has been idle ``max_idle_time``; a handler that then raises ``DontCloseSpider`` keeps
        the node open with no seed read any more."""
        theirs = sorted(
            getattr(receiver, "__qualname__", repr(receiver))
            for receiver in user_receivers(self.crawler, signals.spider_idle)
        )
        if theirs:
            logger.warning(
                "spider_idle handlers of spider %r (%s) are not called while it reads seeds "
                "from Redis, and one that raises DontCloseSpider after max_idle_time keeps the "
                "node open reading none: schedule such work from callbacks or seeds, and let "
                "max_idle_time (MAX_IDLE_TIME_BEFORE_CLOSE) close the node",
                self.name,
                ", ".join(theirs),
            )

    def make_request_from_data(self, data: bytes) -> Request | Iterable[Request] | None:
        """One raw seed from Redis -> requests (scrapy-redis's hook). Raise ``InvalidSeed``
        (or any error) to move the seed to the invalid-seed list with its reason."""
        config = self.seed_settings
        seed = parse_seed(data, max_bytes=config.max_bytes, encoding=config.encoding)
        return self.request_from_seed(seed)

    def seed_dont_filter(self, given: bool | None) -> bool:
        """Whether a seed bypasses the dedup: as the seed says, else ``SEEDS_DONT_FILTER`` in
        cluster mode. Standalone (Scrapy's scheduler, which would not record it as seen) a seed
        is filtered like any request, so the links back to it are not fetched again."""
        if given is not None:
            return given
        return self.seed_settings.dont_filter and bool(self.seed_settings.redis_url)

    def request_from_seed(self, seed: Seed) -> Request:
        """Build the request for one parsed seed; the callback is named by the seed, or
        Scrapy's default (``parse``; the rules of a ``CrawlSpider``). Callback and meta obey
        ``crawler.spiders.seed_rules``."""
        check_seed_meta(seed.meta, self.seed_settings.allowed_meta)
        callback = None if seed.callback is None else seed_callback(self, seed.callback)
        dont_filter = self.seed_dont_filter(seed.dont_filter)
        common: dict[str, Any] = {
            "callback": callback,
            "method": seed.method,
            "headers": dict(seed.headers) or None,
            "meta": dict(seed.meta),
            "priority": seed.priority,
            "dont_filter": dont_filter,
        }
        if seed.formdata:
            return FormRequest(seed.url, formdata=dict(seed.formdata), **common)
        return Request(seed.url, body=seed.body, **common)

    async def start(self) -> AsyncIterator[Any]:
        for url in self.argument_seeds:
            try:
                requests = self.requests_from_raw_seed(url.strip().encode())
            except Exception as exc:  # noqa: BLE001 - the user's make_request_from_data may raise anything
                self._log_invalid(invalid_seed(exc), "dropped")
                continue
            for request in requests:
                yield request
        # as Scrapy's own start() makes them (dont_filter: a page that links back to one is not
        # taken for it); in cluster mode on every node, so the frontier keeps each once a crawl
        # (by a fingerprint of the crawl's own), and a crawl run again does not fetch them again
        # (as a plain spider's start())
        cluster = bool(self.seed_settings.redis_url)
        for url in getattr(self, "start_urls", None) or ():
            try:
                request = Request(url, dont_filter=True)
            except (TypeError, ValueError) as exc:
                self._log_invalid(InvalidSeed("url", f"start_urls: {exc}"), "dropped")
                continue
            if cluster:
                request.meta[START_URL_META] = True
            yield request
        if not self.seed_settings.redis_url:
            return
        async for request in self._redis_seeds():
            yield request

    def requests_from_raw_seed(self, raw: bytes) -> list[Request]:
        output = self.make_request_from_data(raw)
        if output is None:
            return []
        requests = [output] if isinstance(output, Request) else list(output)
        if not all(isinstance(request, Request) for request in requests):
            raise InvalidSeed(
                "make_request_from_data", "make_request_from_data returned a non-Request"
            )
        limit = url_length_limit(self.crawler.settings)
        for request in requests:
            if limit and len(request.url) > limit:  # UrlLengthMiddleware drops it, at INFO
                shown = request.url if len(request.url) <= 200 else f"{request.url[:200]}..."
                raise InvalidSeed(
                    "url_too_long",
                    f"its URL has {len(request.url)} characters, more than URLLENGTH_LIMIT="
                    f"{limit} (Scrapy's UrlLengthMiddleware would drop it): {shown}",
                )
            self._check_storable(request)
            if request.dont_filter:  # fetched again when pushed again; its links back are not
                request.meta[SEED_META] = True
        return requests

    def _check_storable(self, request: Request) -> None:
        """A seed whose request the frontier cannot store (meta nested deeper than JSON holds,
        a priority beyond 64 bits) is invalid, recorded as such (the scheduler would log an
        ERROR and record nothing). Standalone, Scrapy's own scheduler holds anything."""
        if not self.seed_settings.redis_url:
            return
        if self._seed_store is None:
            self._seed_store = RequestStore(self.crawler, self, compress=False)
        try:
            self._seed_store.stored(request)
        except UnserializableRequestError as exc:
            raise InvalidSeed("unstorable", str(exc)) from exc

    def _log_invalid(self, exc: InvalidSeed, where: str) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(f"seeds/invalid/{exc.reason}")
        logger.error("Invalid seed %s (%s): %s", where, exc.reason, mask_secrets(str(exc)))

    async def _redis_seeds(self) -> AsyncIterator[Request]:
        reader = self._seed_reader = SeedReader(self.crawler, self.seed_settings)
        async for request in reader.requests(self._accept, self._cluster_idle):
            yield request

    async def _return_seeds(self) -> None:
        if self._seed_reader is not None:
            await self._seed_reader.close()

    async def _accept(self, queue: SeedQueue, raw: bytes) -> list[Request]:
        try:
            requests = self.requests_from_raw_seed(raw)
        except Exception as exc:  # noqa: BLE001 - the user's make_request_from_data may raise anything
            invalid = invalid_seed(exc)
            self._log_invalid(invalid, f"moved to {queue.keys.invalid}")
            assert self._seed_reader is not None
            await self._seed_reader.guard.run(
                lambda: queue.reject(raw, invalid.reason, str(invalid), self.node_id)
            )
            return []
        if not requests:  # the spider's choice, as scrapy-redis lets it
            assert self.crawler.stats is not None
            self.crawler.stats.inc_value("seeds/skipped")
            logger.debug("make_request_from_data made no request of seed %r", raw[:200])
        return requests

    async def _cluster_idle(self, queue: SeedQueue) -> bool:
        """Wake the engine if the shared frontier holds work; True when the cluster is idle.

        Idle means: nothing queued or leased by any node, and nothing in flight here.
        """
        engine = self.crawler.engine
        assert engine is not None
        if await queue.pending_requests():
            wake_engine(self.crawler)
            return False
        scraper_slot = engine.scraper.slot
        busy = engine.downloader.active or (scraper_slot is not None and not scraper_slot.is_idle())
        return not busy


class RedisCrawlSpider(RedisSpider, CrawlSpider):
    """A ``CrawlSpider`` fed from Redis: its rules apply to the seeds' pages and those they
    lead to, and ``parse_start_url`` sees every seed's response (scrapy-redis's class)."""
