"""``NodeDownloadHandler``: how a node's requests leave it.

``ClusterAddon`` installs it for every scheme ``DOWNLOAD_HANDLERS`` serves (one instance per
crawler serves them all). For each request, in this order:

1. **Pacing.** The politeness middleware's limiter books the request's time now, as it
   leaves, after Scrapy's own per-site queue (``CONCURRENT_REQUESTS_PER_DOMAIN``,
   ``DOWNLOAD_SLOTS``): requests that waited there behind a slow response go out at the
   site's rate, not all at once when it returns. No pacing when the politeness middleware
   is off (``POLITENESS_ENABLED``, or removed from ``DOWNLOADER_MIDDLEWARES``). A request
   that carries a shared session then gets its account's cookies as they are now
   (``SharedSessionMiddleware.restamp``): the turn may have lasted seconds.
2. **The browser,** for requests marked for it (meta ``playwright``, set by
   ``BrowserRenderingMiddleware``) when ``BROWSER_ENABLED``: scrapy-playwright's handler,
   built and started by the first such request (unless the project's handler for the
   scheme is scrapy-playwright's own: then that one renders them, as in Scrapy). Its
   Playwright driver (a ``node`` process of about 150 MB) would otherwise start with the
   engine, one per scheme, whether or not the spider ever renders a page; from its start
   on scrapy-playwright does all the browser work (contexts, page limits, its
   ``playwright/*`` stats).
3. **The plain handler** of the request's scheme otherwise: the one ``DOWNLOAD_HANDLERS``
   named for it before the add-on installed this one (kept in ``CRAWLER_DOWNLOAD_HANDLERS``;
   Scrapy's own unless the project chose another), built as Scrapy builds it (at start, or
   at first use when it is ``lazy``); one that fails to build leaves only its scheme
   unsupported, and one on Scrapy's deprecated Deferred API runs as Scrapy runs it, with a
   warning.

Stats: ``browser/started`` (scrapy-playwright started, once per node),
``browser/start_failed`` (its start raised; the next browser request tries again).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

from scrapy import Request
from scrapy.core.downloader.handlers.base import BaseDownloadHandler
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured, NotSupported
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from scrapy.utils.defer import ensure_awaitable, maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler, load_object

from crawler.middlewares.politeness import ClusterRateLimitMiddleware
from crawler.middlewares.sessions import SharedSessionMiddleware
from crawler.said_once import SaidOnce
from crawler.settings_values import get_bool, get_dict

logger = logging.getLogger(__name__)

PLAIN_HANDLERS = "CRAWLER_DOWNLOAD_HANDLERS"


class BrowserMissing(Exception):
    """The Chromium the launch options name is not there: no browser request can be rendered."""


def missing_browser(launch_options: dict[str, Any]) -> str | None:
    """Why ``launch_options``' Chromium (``executable_path``) cannot run, or None if it can (or
    Playwright picks its own)."""
    path = launch_options.get("executable_path")
    if not path or (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None
    return (
        f"BROWSER_EXECUTABLE={path!r} is not an executable file: requests marked for the "
        "browser fail until it is (install Debian's chromium, or set BROWSER_EXECUTABLE or "
        "BROWSER_ENABLED=False)"
    )


HandlerPath = str | Callable[..., Any]  # as DOWNLOAD_HANDLERS gives it: a path or a class

# One handler per crawler, shared by the schemes it is installed for (Scrapy builds one per
# scheme), so http and https pages share one Playwright driver and one Chromium.
_PER_CRAWLER: WeakKeyDictionary[Crawler, NodeDownloadHandler] = WeakKeyDictionary()


def handler_class(path: HandlerPath) -> type | None:
    """The class ``path`` names (None when it cannot be loaded: ``plain_handler`` says why)."""
    try:
        loaded: type = load_object(path)
    except Exception:  # noqa: BLE001 - any import error; plain_handler logs it
        return None
    return loaded


def renders(path: HandlerPath) -> bool:
    """Whether ``path`` names scrapy-playwright's handler (or one built on it)."""
    loaded = handler_class(path)
    return loaded is not None and any(
        cls.__module__.startswith("scrapy_playwright.") for cls in loaded.__mro__
    )


def is_lazy(path: HandlerPath) -> bool:
    loaded = handler_class(path)
    return loaded is not None and bool(getattr(loaded, "lazy", True))


def plain_handler(crawler: Crawler, scheme: str, path: HandlerPath) -> Any:
    """The handler ``path`` names, built as Scrapy builds it, or the reason it cannot serve
    (its ``NotConfigured``, or what building it raised, logged as Scrapy logs it): one broken
    handler leaves only its scheme unsupported. A handler on Scrapy's deprecated Deferred API
    is run as Scrapy runs it, with a warning."""
    try:
        handler = build_from_crawler(load_object(path), crawler)
    except NotConfigured as exc:
        return str(exc) or f"{path} is not configured"
    except Exception as exc:
        logger.error('Loading "%s" for scheme "%s"', path, scheme, exc_info=True)
        return f"{path} failed to load: {exc}"
    if not inspect.iscoroutinefunction(handler.download_request):
        logger.warning(
            "DOWNLOAD_HANDLERS[%r]=%r: download_request is not a coroutine function (Scrapy's "
            "deprecated Deferred API, run as Scrapy runs it); rewrite it as `async def "
            "download_request(self, request)`",
            scheme,
            path,
        )
    return handler


class NodeDownloadHandler(BaseDownloadHandler):
    lazy = False  # the plain handlers that are not lazy are ready at start, as in Scrapy

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.paths: dict[str, HandlerPath] = get_dict(crawler.settings, PLAIN_HANDLERS)
        # scheme -> its plain handler, or why it has none; lazy ones are built on first use
        self.plain: dict[str, Any] = {
            scheme: plain_handler(crawler, scheme, path)
            for scheme, path in self.paths.items()
            if not is_lazy(path)
        }
        # schemes whose project handler is scrapy-playwright's: it renders their browser requests
        self.project_renders = {scheme for scheme, path in self.paths.items() if renders(path)}
        self.browser_enabled = get_bool(crawler.settings, "BROWSER_ENABLED")
        self.said = SaidOnce(self.stats, logger)
        self.browser: Any = None  # ScrapyPlaywrightDownloadHandler once started
        self.start_lock = asyncio.Lock()
        self.politeness: ClusterRateLimitMiddleware | None = None
        self.politeness_looked_up = False
        self.shared_sessions: SharedSessionMiddleware | None = None
        self.sessions_looked_up = False
        self.closed = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NodeDownloadHandler:
        handler = _PER_CRAWLER.get(crawler)
        if handler is None:
            handler = _PER_CRAWLER[crawler] = cls(crawler)
        return handler

    def pacing(self) -> ClusterRateLimitMiddleware | None:
        """The node's politeness middleware (None when it is off), looked up on first use:
        the downloader's middlewares are built after its handlers."""
        if not self.politeness_looked_up:
            self.politeness = self.crawler.get_downloader_middleware(ClusterRateLimitMiddleware)
            self.politeness_looked_up = True
        return self.politeness

    def sessions(self) -> SharedSessionMiddleware | None:
        """The node's shared-sessions middleware (None when it is off), looked up on first use."""
        if not self.sessions_looked_up:
            self.shared_sessions = self.crawler.get_downloader_middleware(SharedSessionMiddleware)
            self.sessions_looked_up = True
        return self.shared_sessions

    def plain_for(self, scheme: str) -> Any:
        """The plain handler of ``scheme`` (built now if it is lazy), or why there is none."""
        if scheme not in self.plain:
            path = self.paths.get(scheme)
            self.plain[scheme] = (
                f"no handler available for that scheme ({PLAIN_HANDLERS})"
                if path is None
                else plain_handler(self.crawler, scheme, path)
            )
        return self.plain[scheme]

    async def download_request(self, request: Request) -> Response:
        if (pacing := self.pacing()) is not None:
            await pacing.pace(request)
            if (sessions := self.sessions()) is not None:  # its turn may have taken seconds
                await sessions.restamp(request)
        scheme = urlparse_cached(request).scheme
        if self.renders(request, scheme):
            browser = await self.started_browser()
            response: Response = await browser.download_request(request)
            return response
        handler = self.plain_for(scheme)
        if isinstance(handler, str):
            raise NotSupported(f"Unsupported URL scheme '{scheme}': {handler}")
        if inspect.iscoroutinefunction(handler.download_request):
            response = await handler.download_request(request)
        else:  # Scrapy's deprecated Deferred API
            deferred = handler.download_request(request, self.crawler.spider)
            response = await maybe_deferred_to_future(deferred)
        assert isinstance(response, Response)
        return response

    def renders(self, request: Request, scheme: str) -> bool:
        """Whether the node's browser renders ``request``: it asks for one (scrapy-playwright's
        ``playwright`` meta) and no project handler of its scheme renders it. One that asks
        (or has the ``browser`` meta) while ``BROWSER_ENABLED`` is off is fetched without it:
        counted (``browser/disabled``) and said once."""
        asks = request.meta.get("playwright") or request.meta.get("browser")
        if not asks or scheme in self.project_renders:
            return False
        if self.browser_enabled:
            return bool(request.meta.get("playwright"))
        self.said.count(
            "browser/disabled",
            "Request %s asks for a browser, but BROWSER_ENABLED is off: it and every such "
            "request are downloaded without one (their pages' scripts do not run; "
            "browser/disabled counts them). Set BROWSER_ENABLED=True to render them",
            request.url,
        )
        return False

    async def started_browser(self) -> Any:
        """scrapy-playwright's handler, built and started on the first call."""
        async with self.start_lock:
            if self.browser is None:
                self.browser = await self.start_browser()
        return self.browser

    async def start_browser(self) -> Any:
        began = time.monotonic()
        from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler  # noqa: PLC0415 - only a node that renders imports it

        if why := missing_browser(get_dict(self.crawler.settings, "PLAYWRIGHT_LAUNCH_OPTIONS")):
            self.stats.inc_value("browser/start_failed")
            raise BrowserMissing(why)
        handler = build_from_crawler(ScrapyPlaywrightDownloadHandler, self.crawler)
        try:
            # What scrapy-playwright runs at engine_started; the engine has started already.
            await handler._maybe_launch_in_thread()
        except Exception:
            self.stats.inc_value("browser/start_failed")
            await handler.close()
            raise
        self.stats.inc_value("browser/started")
        logger.info(
            "Started Playwright for the first browser request in %.2fs",
            time.monotonic() - began,
        )
        return handler

    async def close(self) -> None:
        if self.closed:  # installed for several schemes: Scrapy closes it once per scheme
            return
        self.closed = True
        for handler in self.plain.values():
            if not isinstance(handler, str) and hasattr(handler, "close"):
                await ensure_awaitable(handler.close())  # a coroutine, a Deferred or None
        async with self.start_lock:
            if self.browser is not None:
                await self.browser.close()
