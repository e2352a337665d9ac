"""``SharedSessionMiddleware``: every request of a session spider carries a shared login.

For spiders that set ``session_platform``, each request takes the least
recently used healthy account from the shared store (``crawler.sessions``),
carries its cookies (and its proxy, if the account has one), and records which
account served it (meta ``session_account``). Cookies the site sets flow back
into the shared session. A response that shows the session is expired, risky
or banned (``spider.session_state(response)``, else 401 / a redirect to a login
page = expired, 429 = risky) marks the account for every node and the request
is retried with another account (``SESSIONS_MAX_TRIES``). When no account is
usable, accounts listed in ``spider.session_accounts`` are logged in again with
``spider.session_login()``: exactly one node logs in per account, the others
wait for its cookies without blocking the reactor.

Requests rendered in Chromium (``BrowserRenderingMiddleware``) get the
session's cookies in their browser context before the page loads, so the
page's own requests (scripts, XHR) carry them too; the cookies the page's
response sets flow back like any other. Pages share the node's browser
context (scrapy-playwright's default one): with several accounts rendering at once,
keep ``BROWSER_MAX_PAGES = 1`` so their cookies never meet.

Stats: ``sessions/used``, ``sessions/marked/<health>``, ``sessions/retried``,
``sessions/gave_up``, ``sessions/relogin_failed``, ``sessions/unavailable`` (also the failure
reason of a request dropped with no usable session within ``SESSIONS_WAIT``, logged at WARNING
at most once a minute with the number dropped since the last line).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector

from crawler.browser_page_init import add_step
from crawler.middlewares.politeness import retry_after_seconds
from crawler.middlewares.refused import (
    STOP_LOOK,
    RefusedRequest,
    not_fetched_at_stop,
    not_waiting_past_stop,
)
from crawler.middlewares.session_http import (
    browser_cookies,
    default_state,
    own_cookies,
    set_cookies,
    verdict,
    with_session_cookies,
)
from crawler.node_context import NodeContext
from crawler.redis_outage import OutageGuard
from crawler.sessions import (
    Health,
    LoginLease,
    MemoryLoginLease,
    MemorySessionStore,
    RedisLoginLease,
    RedisSessionStore,
    Session,
    SessionDecodeError,
    SessionError,
    SessionSettings,
    SessionStore,
    ensure_fresh_session,
)
from crawler.sessions.models import UnreadableSession
from crawler.sessions.store import session_to_replace
from crawler.settings_values import get_bool, get_float, get_int
from crawler.url_credentials import mask_secrets

logger = logging.getLogger(__name__)

T = TypeVar("T")

ACCOUNT_META = "session_account"
GENERATION_META = "session_generation"
TRIES_META = "session_tries"
DONT_USE_META = "dont_use_session"
PIN_META = "session_pin"  # the account whose session a request must carry (no other)
BROWSER_COOKIES_META = "session_browser_cookies"
PAGE_INIT_CALLBACK = "crawler.middlewares.sessions.add_session_cookies"  # a page-init step
UNAVAILABLE = "sessions/unavailable"  # the stat and failure reason of a request with no session
UNAVAILABLE_LOG_EVERY = 60  # seconds between two WARNINGs about them


@dataclass(frozen=True, slots=True)
class SessionMiddlewareSettings:
    max_tries: int
    wait: float

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SessionMiddlewareSettings:
        if not get_bool(settings, "SESSIONS_ENABLED"):
            raise NotConfigured
        values = cls(get_int(settings, "SESSIONS_MAX_TRIES"), get_float(settings, "SESSIONS_WAIT"))
        if values.max_tries < 0:
            raise ValueError(f"SESSIONS_MAX_TRIES={values.max_tries} must be >= 0")
        if values.wait <= 0:
            raise ValueError(f"SESSIONS_WAIT={values.wait} must be > 0")
        return values


async def add_session_cookies(page: Any, request: Request) -> None:
    """Page-init step (``crawler.browser_page_init``): the session's cookies into the page's
    context."""
    cookies = request.meta.get(BROWSER_COOKIES_META)
    if cookies:
        await page.context.add_cookies(cookies)


class SharedSessionMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.settings = SessionMiddlewareSettings.from_settings(crawler.settings)
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        store_settings = SessionSettings.from_mapping(crawler.settings)
        context = NodeContext.of(crawler)
        self.store: SessionStore
        self.lease: LoginLease
        self._guard: OutageGuard | None = None
        if context is not None:
            self.store = RedisSessionStore(context.redis, store_settings)
            self.lease = RedisLoginLease(context.redis, store_settings)
            self._guard = context.guard("sessions")
        else:
            self.store = MemorySessionStore(store_settings)
            self.lease = MemoryLoginLease(store_settings)
        self.store_settings = store_settings
        self._dropped = 0  # requests dropped with no session since the last WARNING about them
        self._dropped_logged_at = -math.inf
        self._logins: dict[str, asyncio.Future[None]] = {}  # platform -> its log-in round
        self._cannot_log_in: set[str] = set()  # platforms said to have no log-in (once each)
        crawler.signals.connect(self._report_dropped, signal=signals.spider_closed)
        crawler.signals.connect(self._cancel_logins, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SharedSessionMiddleware:
        return cls(crawler)

    async def _shared(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run a session-store operation, through Redis outages in cluster mode."""
        if self._guard is None:
            return await op()
        with not_fetched_at_stop("sessions/stopped", "the shared sessions"):
            return await self._guard.run(op)

    def _platform(self, request: Request) -> tuple[Spider, str] | None:
        spider = self.crawler.spider
        platform = getattr(spider, "session_platform", None)
        if spider is None or not platform or request.meta.get(DONT_USE_META):
            return None
        return spider, str(platform)

    async def process_request(self, request: Request) -> None:
        found = self._platform(request)
        if found is None:
            return
        spider, platform = found
        pinned = request.meta.get(PIN_META)
        session = (
            await self._pinned_session(platform, str(pinned))
            if pinned
            else await self._usable_session(spider, platform)
        )
        if session is None:
            self._refuse(request, platform, pinned)
        self.stats.inc_value("sessions/used")
        header = with_session_cookies(own_cookies(request), session, request.url)
        if header:
            request.headers[b"Cookie"] = header
        else:
            request.headers.pop(b"Cookie", None)
        request.meta["dont_merge_cookies"] = True  # the session is the jar of what sites set
        request.meta[ACCOUNT_META] = session.account
        request.meta[GENERATION_META] = session.generation
        if session.proxy:
            request.meta["proxy"] = session.proxy
        if request.meta.get("playwright"):
            request.meta[BROWSER_COOKIES_META] = browser_cookies(session, request.url)
            add_step(request, PAGE_INIT_CALLBACK)  # the spider's own callback runs after it

    def _refuse(self, request: Request, platform: str, pinned: Any) -> NoReturn:
        """Drop ``request``: no session for it. Counted, and logged at most once a minute
        (``UNAVAILABLE_LOG_EVERY``) with the number dropped since the last line."""
        why = (
            f"no {platform} session of account {pinned} (meta session_pin): gone or unreadable"
            if pinned
            else f"no usable {platform} session within SESSIONS_WAIT={self.settings.wait} s "
            "(every account busy, resting, expired or retired)"
        )
        self.stats.inc_value(UNAVAILABLE)
        self._dropped += 1
        now = time.monotonic()
        if now - self._dropped_logged_at >= UNAVAILABLE_LOG_EVERY:
            logger.warning(
                "Dropped %d request(s) with no %s session since the last such line (at most "
                "one every %d s; stat %s), the latest %s: %s",
                self._dropped,
                platform,
                UNAVAILABLE_LOG_EVERY,
                UNAVAILABLE,
                mask_secrets(request.url),
                why,
            )
            self._dropped, self._dropped_logged_at = 0, now
        raise RefusedRequest(UNAVAILABLE, why)

    def _report_dropped(self) -> None:
        """At the end, the requests dropped since the last WARNING about them."""
        if self._dropped:
            logger.warning(
                "Dropped %d more request(s) with no session after the last such line (stat %s)",
                self._dropped,
                UNAVAILABLE,
            )

    async def _pinned_session(self, platform: str, account: str) -> Session | None:
        try:
            return await self._shared(lambda: self.store.get(platform, account))
        except SessionDecodeError as exc:
            self._unreadable(exc)
            return None

    def _unreadable(self, exc: SessionDecodeError) -> None:
        self.stats.inc_value("sessions/unreadable")
        logger.error("Stored session cannot be read: %s", exc)

    async def _usable_session(self, spider: Spider, platform: str) -> Session | None:
        deadline = time.monotonic() + self.settings.wait
        pause = 0.05
        while True:
            try:
                session: Session | None = await self._shared(lambda: self.store.acquire(platform))
            except UnreadableSession as exc:  # retired: the next account is drawn at once
                self._unreadable(exc)
                continue
            if session is not None:
                return session
            login = self._logins.get(platform)
            if login is None or login.done():  # one log-in round at a time, shared
                login = self._logins[platform] = asyncio.ensure_future(
                    self._log_in_again(spider, platform)
                )
                login.add_done_callback(_retrieved)
            # for the log-in no longer than the request may wait, nor past a stop
            while not login.done() and (left := deadline - time.monotonic()) > 0:
                not_waiting_past_stop(self.crawler, "sessions/stopped", left, "a session")
                await asyncio.wait({login}, timeout=min(left, STOP_LOOK))
            if time.monotonic() >= deadline:
                return None
            left = deadline - time.monotonic()
            not_waiting_past_stop(self.crawler, "sessions/stopped", left, "a session")
            await asyncio.sleep(pause)
            pause = min(1.0, pause * 2)

    def _cancel_logins(self) -> None:
        """At close: a log-in under way ends (its lease in Redis expires)."""
        for login in self._logins.values():
            login.cancel()

    async def _log_in_again(self, spider: Spider, platform: str) -> None:
        """Log in the spider's accounts that need it (one node per account does it)."""
        login = getattr(spider, "session_login", None)
        provider = login() if callable(login) else None
        if provider is None:
            if platform not in self._cannot_log_in:
                self._cannot_log_in.add(platform)
                logger.warning(
                    "No %s session is usable and the spider cannot log in (its session_login "
                    "gives none: no accounts configured): requests wait SESSIONS_WAIT=%s s for "
                    "one to come back from rest, then are dropped (%s). Import a session: "
                    "`crawler sessions import %s <account> ...`",
                    platform,
                    self.settings.wait,
                    UNAVAILABLE,
                    platform,
                )
            return
        for account in getattr(spider, "session_accounts", ()):
            await self._log_in_account(platform, str(account), provider)

    async def _log_in_account(self, platform: str, account: str, provider: Any) -> None:
        session = await self._shared(lambda: session_to_replace(self.store, platform, account))
        if session is not None and session.health is not Health.EXPIRED:
            return
        try:
            await self._shared(
                lambda: ensure_fresh_session(
                    self.store,
                    self.lease,
                    platform,
                    account,
                    provider,
                    settings=self.store_settings,
                )
            )
        except SessionError as exc:
            self.stats.inc_value("sessions/relogin_failed")
            logger.error("Log-in of %s account %s failed: %s", platform, account, exc)

    async def process_response(self, request: Request, response: Response) -> Request | Response:
        account = request.meta.get(ACCOUNT_META)
        found = self._platform(request)
        if account is None or found is None:
            return response
        spider, platform = found
        check = getattr(spider, "session_state", None)
        state = check(response) if callable(check) else default_state(response)
        if state is None:
            if cookies := set_cookies(response):
                await self._shared(lambda: self.store.merge_cookies(platform, account, cookies))
            return response
        generation = request.meta.get(GENERATION_META)
        reason = f"HTTP {response.status}"
        # the site says when to come back (a 429's Retry-After): the account rests that long,
        # and no strike is counted (strikes retire an account: this one only came too often)
        told = response.headers.get(b"Retry-After")
        rest = retry_after_seconds(told) if told else None  # None: SESSIONS_COOLDOWN
        after = await self._shared(
            lambda: self.store.mark(
                platform, account, state, reason, rest, strike=told is None, generation=generation
            )
        )
        self.stats.inc_value(f"sessions/marked/{state.value}")
        tries = int(request.meta.get(TRIES_META, 0)) + 1
        if tries > self.settings.max_tries:
            self.stats.inc_value("sessions/gave_up")
            return response
        logger.warning(
            "%s account %s answered as %s (HTTP %s on %s): %s; the request is tried again "
            "(retry %d of SESSIONS_MAX_TRIES=%d) with the next usable account",
            platform,
            account,
            state.value,
            response.status,
            request.url,
            verdict(after, self.store_settings.max_strikes),
            tries,
            self.settings.max_tries,
        )
        self.stats.inc_value("sessions/retried")
        retry = request.replace(dont_filter=True)
        retry.meta[TRIES_META] = tries
        retry.meta.pop(ACCOUNT_META, None)
        retry.headers.pop(b"Cookie", None)
        return retry


def _retrieved(login: asyncio.Future[None]) -> None:
    """A log-in round's failure is logged where it happens; a stop's cancellation is not one."""
    if not login.cancelled():
        login.exception()
