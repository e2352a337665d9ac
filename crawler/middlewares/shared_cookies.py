"""``SharedCookiesMiddleware``: Scrapy's cookie jars, one for the whole cluster.

Scrapy's ``CookiesMiddleware`` keeps its jars in each process: a spider that logged in (a
login page's ``Set-Cookie``, or a cookie given once with ``cookies=``) had the pages another
node leased fetched without the cookie, and scraped the login page as content. This
middleware is Scrapy's, with each jar (``meta['cookiejar']``) also kept in Redis
(``crawler.cookies.jar_store``):

- what a response's ``Set-Cookie`` or a request's ``cookies=`` changes in a node's jar is
  written to the shared jar before the response goes on (so before its callback yields
  anything), and the node knows the jar's version from then on;
- every request a node schedules (``request_scheduled``) carries the newest version of its
  jar that node knows (meta ``_cookies_version``, only once the jar has one);
- a node about to send a request whose version it has not read reads what changed in the jar
  since the version it read first (the whole jar the first time, and when the changes do not
  tell: ``crawler.cookies.jar_store``); and
  once it knows a jar exists, it also looks at the jar's version before a request, at most
  every ``COOKIES_SHARED_REFRESH`` seconds, and reads the jar when it is newer.

A rendered request (``meta['playwright']``) takes the jar into its page's browser context
before it navigates, and what the context holds after it (a cookie the page's script set too)
goes into the jar (``crawler.middlewares.browser_cookies``).

So a request is sent with every cookie set before it was made, on whichever node leases it,
and with what a logout or a new login on another node changed while it waited in the queue
(within ``COOKIES_SHARED_REFRESH``). A spider that meets no cookies costs Redis one version
look per node and jar every ``COOKIES_SHARED_REFRESH`` (a jar another node wrote is read
before its first request here).
Without ``REDIS_URL`` it is Scrapy's middleware. Requests with ``dont_merge_cookies`` are
left alone (shared sessions set it).

Stats: ``cookies/shared/written``, ``cookies/shared/read`` (of them
``cookies/shared/read_whole``), ``cookies/shared/unwritten`` (a write given up at a stop),
``cookies/redis_error``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.http.cookies import CookieJar
from scrapy.settings import BaseSettings

from crawler.browser_page_init import add_step
from crawler.cookies.jar_store import JarStore, jar_label
from crawler.middlewares import browser_cookies
from crawler.middlewares.cookie_domains import (
    added_domains,
    drop_expired,
    held_fields,
    jar_cookies,
    set_or_deleted,
    site_domains,
)
from crawler.middlewares.refused import not_fetched_at_stop
from crawler.node_context import NodeContext
from crawler.redis_outage import GaveUp, OutageGuard
from crawler.said_once import SaidOnce
from crawler.sessions.crypto import CookieCipher
from crawler.settings_values import get_bool, get_float

logger = logging.getLogger(__name__)

VERSION_META = "_cookies_version"  # the newest version of its jar the scheduling node knew
NEVER = 2**62  # Scrapy's own sweep of a jar, unshared: every that many requests


@dataclass(frozen=True, slots=True)
class SharedCookiesSettings:
    debug: bool  # COOKIES_DEBUG (Scrapy's)
    refresh: float  # COOKIES_SHARED_REFRESH: s between two looks at a jar's version

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SharedCookiesSettings:
        refresh = get_float(settings, "COOKIES_SHARED_REFRESH")
        if refresh < 0:
            raise ValueError(
                f"COOKIES_SHARED_REFRESH={refresh} must be >= 0 (seconds; 0: before every request)"
            )
        return cls(get_bool(settings, "COOKIES_DEBUG"), refresh)


@dataclass(frozen=True, slots=True)
class JarDiff:
    """A change of a node's jar, in the shared jar's fields."""

    before: dict[str, bytes]  # the cookies of the change's domains before Scrapy's step
    after: dict[str, bytes]  # and after it
    expired: list[str]  # left as expired: deleted unless another node renewed them
    said: set[str]  # an answer set or deleted them: shared whatever the node held


@dataclass
class JarState:
    read: int = 0  # the version this node's jar holds all of
    known: int = 0  # the newest version this node knows the shared jar has
    looked: float = -math.inf  # when this node last looked at the jar's version (monotonic)
    sent: int = 0  # requests this node sent with the jar (a sweep every check_expired_frequency)
    sweep_every: int = 0  # Scrapy's check_expired_frequency of the jar (0: not looked at yet)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one write or read at a time
    looking: asyncio.Future[int] | None = None  # the look at its version under way


class SharedCookiesMiddleware(CookiesMiddleware):
    def __init__(self, crawler: Crawler, shared: tuple[JarStore, OutageGuard] | None) -> None:
        settings = SharedCookiesSettings.from_settings(crawler.settings)
        super().__init__(settings.debug)
        self._refresh = settings.refresh
        self.crawler = crawler
        assert crawler.stats is not None
        self._stats = crawler.stats
        self._shared = shared  # None: standalone, Scrapy's middleware
        self._states: dict[str, JarState] = {}
        self._said = SaidOnce(self._stats, logger)
        if shared is not None:
            crawler.signals.connect(self._stamp, signal=signals.request_scheduled)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SharedCookiesMiddleware:
        if not get_bool(crawler.settings, "COOKIES_ENABLED"):
            raise NotConfigured
        context = NodeContext.of(crawler)
        if context is None:
            return cls(crawler, None)
        store = JarStore(context.redis, crawler.spidercls.name, CookieCipher.from_env())
        return cls(crawler, (store, context.guard("cookies")))

    def _stamp(self, request: Request) -> None:
        """A request being scheduled carries the newest version of its jar known here."""
        if request.meta.get("dont_merge_cookies"):
            return
        state = self._states.get(jar_label(request.meta.get("cookiejar")))
        if state is not None and state.known > int(request.meta.get(VERSION_META) or 0):
            request.meta[VERSION_META] = state.known

    async def process_request(self, request: Request) -> None:  # type: ignore[override]
        if self._shared is None or request.meta.get("dont_merge_cookies"):
            super().process_request(request)
            return
        jar_id = request.meta.get("cookiejar")
        label = jar_label(jar_id)
        state = self._states.setdefault(label, JarState())
        wanted = max(int(request.meta.get(VERSION_META) or 0), await self._current(label, state))
        if wanted > state.read:
            await self._read(jar_id, label, state, wanted)
        jar = self.jars[jar_id]
        if not state.sweep_every:  # Scrapy's own sweep would not be shared: this one is
            state.sweep_every, jar.check_expired_frequency = jar.check_expired_frequency, NEVER
        state.sent += 1
        if state.sent % state.sweep_every == 0:
            await self._shared_change(jar_id, label, state, lambda: None, domains=None)
        if not request.cookies:
            super().process_request(request)
        else:  # cookies= go into the jar: shared before the request goes
            change = partial(super().process_request, request)
            domains = site_domains(request.url)
            await self._shared_change(jar_id, label, state, change, domains=domains)
        if request.meta.get("playwright"):  # the browser keeps cookies of its own
            self._bridge(request, self.jars[jar_id])

    def _bridge(self, request: Request, jar: CookieJar) -> None:
        """Share ``jar`` with the browser context that renders ``request``: scrapy-playwright's
        default one only. A context a spider names is its own cookie store (one login each,
        as standalone), which the jars would mix: its cookies stay its node's, said once."""
        context = request.meta.get("playwright_context")
        if context not in (None, "default"):
            self._said.count(
                "cookies/shared/own_context",
                "Request %s renders in the browser context %r: a named context's cookies are "
                "its own on each node (not shared with the other nodes' browsers; Set-Cookie "
                "headers still reach the shared jar); use the default context and "
                "meta['cookiejar'] to share a login across nodes",
                request.url,
                context,
            )
            return
        browser_cookies.for_page(request, jar)
        add_step(request, browser_cookies.INTO_PAGE)

    async def process_response(  # type: ignore[override]
        self, request: Request, response: Response
    ) -> Request | Response:
        if self._shared is None or request.meta.get("dont_merge_cookies"):
            return super().process_response(request, response)
        in_browser = await browser_cookies.changed_in_browser(request, response.url)
        if not (in_browser or response.headers.getlist("Set-Cookie")):
            return super().process_response(request, response)
        jar_id = request.meta.get("cookiejar")
        label = jar_label(jar_id)
        state = self._states.setdefault(label, JarState())

        def change() -> None:
            super(SharedCookiesMiddleware, self).process_response(request, response)
            browser_cookies.merge(self.jars[jar_id], in_browser)

        domains = site_domains(request.url) + site_domains(response.url)
        await self._shared_change(jar_id, label, state, change, domains=domains)
        return response

    async def _current(self, label: str, state: JarState) -> int:
        """The jar's version, looked at the first time this node meets the jar (another node
        may have written it: a callback of one jar yielding a request of another) and then
        once ``COOKIES_SHARED_REFRESH`` has passed since the last look, also while the jar
        does not exist (another node's login makes it: the requests scheduled before carry no
        version of it)."""
        if state.looking is not None:  # the requests that came while it is looked at wait too
            return await asyncio.shield(state.looking)
        now = time.monotonic()
        if now - state.looked < self._refresh:
            return 0
        state.looked = now
        state.looking = asyncio.ensure_future(self._look(label, state))
        try:
            return await asyncio.shield(state.looking)
        finally:
            state.looking = None

    async def _look(self, label: str, state: JarState) -> int:
        assert self._shared is not None
        store, guard = self._shared
        with not_fetched_at_stop("cookies/stopped", f"the shared cookie jar {label}"):
            version = await guard.run(lambda: store.version(label), reads_only=True)
        state.known = max(state.known, version)
        return version

    async def _shared_change(
        self,
        jar_id: object,
        label: str,
        state: JarState,
        change: Callable[[], object],
        *,
        domains: list[str] | None,
    ) -> None:
        """Run ``change`` on the node's jar (Scrapy's own step), then share what it changed in
        ``domains`` (None: anywhere), the cookies of theirs that expired, and what the step
        set or deleted whatever the node held (its copy may be out of date: the last answer
        wins, as in one Scrapy process), one change or read of the jar at a time."""
        async with state.lock:
            jar = self.jars[jar_id]
            held = len(jar._cookies)
            before = jar_cookies(jar, domains)
            with set_or_deleted(jar) as said:
                change()
            expired = drop_expired(jar, domains)
            if domains is not None:
                domains = domains + added_domains(jar, held)  # one no rule of Scrapy's names
            # what the step set where no rule of Scrapy's looks (a browser's spelling): a set
            after = jar_cookies(jar, domains)
            after |= held_fields(jar, said - after.keys())
            await self._write(label, state, JarDiff(before, after, expired, said))

    async def _write(self, label: str, state: JarState, diff: JarDiff) -> None:
        """Share what changed in the node's jar (``JarDiff``)."""
        assert self._shared is not None
        store, guard = self._shared
        before, after, expired, said = diff.before, diff.after, diff.expired, diff.said
        changed = {
            name: value
            for name, value in after.items()
            if before.get(name) != value or name in said
        }
        gone = set(expired)
        removed = [name for name in before if name not in after and name not in gone]
        removed += [name for name in said if name not in after and name not in before]
        if not (changed or removed or expired):
            return
        read = state.read
        try:
            prior, version = await guard.run(
                lambda: store.write(label, changed, removed, expired, read)
            )
        except GaveUp:  # the node stops while Redis is away: only this node had them
            self._stats.inc_value("cookies/shared/unwritten")
            logger.warning("Cookies of jar %s not shared: the node stops, Redis is away", label)
            return
        if prior == state.read:  # no other node wrote meanwhile: the jar holds all of it
            state.read = version
        state.known = max(state.known, version)
        if version != prior:  # the same values again change nothing there
            self._stats.inc_value("cookies/shared/written")

    async def _read(self, jar_id: object, label: str, state: JarState, wanted: int) -> None:
        """Bring the node's jar to the shared one, which has ``wanted`` or a later version:
        what changed since the version it read, or, the first time (and when the changes do
        not tell), the whole jar in place of the node's."""
        assert self._shared is not None
        store, guard = self._shared
        async with state.lock:
            if wanted <= state.read:  # read meanwhile, for another request
                return
            jar = self.jars[jar_id]
            with not_fetched_at_stop("cookies/stopped", f"the shared cookie jar {label}"):
                since = state.read
                changes = (
                    await guard.run(lambda: store.changes(label, since), reads_only=True)
                    if since
                    else None
                )
                if changes is None:
                    version, cookies = await guard.run(lambda: store.read(label), reads_only=True)
                    jar.jar.clear()
                    self._stats.inc_value("cookies/shared/read_whole")
                else:
                    version, cookies = changes.version, changes.cookies
                    for domain, path, name in changes.removed:
                        with contextlib.suppress(KeyError):  # never here, or gone already
                            jar.clear(domain, path, name)
            for cookie in cookies:
                jar.set_cookie(cookie)
            # Versions are Redis clock tokens: one below ``wanted`` means Redis lost the
            # jar; none written later is below ``wanted``, so reading again would not help.
            state.read = max(version, wanted)
            state.known = max(state.known, state.read)
            self._stats.inc_value("cookies/shared/read")
