"""``SharedSessionMiddleware``: every request of a session spider carries a shared login.

For spiders that set ``session_platform``, each request takes the least
recently used healthy account from the shared store (``crawler.sessions``),
carries its cookies (and its proxy, if the account has one), and records which
account served it (meta ``session_account``). Cookies the site sets flow back
into the shared session. A response that shows the session is expired, risky
or banned (``spider.session_state(response)``, else 401 / a redirect to a login
page = expired, 429 = risky) marks the account for every node and the request
is retried with another account (``SESSIONS_MAX_TRIES``; an answer to cookies a newer log-in
had replaced while the request waited for its site's turn is counted apart, against the same
number: meta ``session_stale_tries``). A request out of tries fails (``sessions/gave_up``, a
WARNING): its response is no page of the spider's; a spider judging answers with a
``session_state`` of its own gets that last one in its callback instead, marked with meta
``session_gave_up``. When no account is usable, accounts listed in
``spider.session_accounts`` are logged in again with ``spider.session_login()``
(``crawler.middlewares.session_supply``): exactly one node logs in per account, the others
wait for its cookies without blocking the reactor.

Requests rendered in Chromium (``BrowserRenderingMiddleware``) get the
session's cookies in their browser context before the page loads, so the
page's own requests (scripts, XHR) carry them too; the cookies the page's
response sets flow back like any other. Pages share the node's browser
context (scrapy-playwright's default one): with several accounts rendering at once,
keep ``BROWSER_MAX_PAGES = 1`` so their cookies never meet.

Stats: ``sessions/used``, ``sessions/restamped``, ``sessions/marked/<health>``,
``sessions/retried``, ``sessions/gave_up``, ``sessions/unavailable`` (also the failure reason
of a request dropped with no usable session within ``SESSIONS_WAIT``, logged at WARNING at
most once a minute with the number dropped since the last line); its ``SessionSupply`` counts
``sessions/relogin_failed``, ``sessions/key`` and ``sessions/unreadable``, and the node's
Redis layer ``sessions/redis_error`` (docs/stats.md).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, NoReturn

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector

from crawler.browser_page_init import add_step
from crawler.middlewares.politeness import retry_after_seconds
from crawler.middlewares.refused import RefusedRequest
from crawler.middlewares.session_http import (
    browser_cookies,
    default_state,
    own_cookies,
    set_cookies,
    verdict,
    with_session_cookies,
)
from crawler.middlewares.session_supply import UNAVAILABLE, SessionSupply
from crawler.node_context import NodeContext
from crawler.sessions import (
    Health,
    LoginLease,
    MemoryLoginLease,
    MemorySessionStore,
    RedisLoginLease,
    RedisSessionStore,
    Session,
    SessionError,
    SessionSettings,
    SessionStore,
)
from crawler.settings_values import get_bool, get_float, get_int
from crawler.url_credentials import mask_secrets

logger = logging.getLogger(__name__)

ACCOUNT_META = "session_account"
GENERATION_META = "session_generation"
TRIES_META = "session_tries"
# answers to cookies a newer log-in had replaced while the request waited for its site's turn:
# tried again, counted apart (the account was not at fault)
STALE_TRIES_META = "session_stale_tries"
DONT_USE_META = "dont_use_session"
PIN_META = "session_pin"  # the account whose session a request must carry (no other)
BROWSER_COOKIES_META = "session_browser_cookies"
PAGE_INIT_CALLBACK = "crawler.middlewares.sessions.add_session_cookies"  # a page-init step
UNAVAILABLE_LOG_EVERY = 60  # seconds between two WARNINGs about them
GAVE_UP = "sessions/gave_up"  # the stat and failure reason of a request out of tries
GAVE_UP_META = "session_gave_up"  # on a response a spider's own session_state judged bad
STALE_COUNT = " for answers to cookies a newer log-in had replaced"


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
        store: SessionStore
        lease: LoginLease
        if context is not None:
            store = RedisSessionStore(context.redis, store_settings)
            lease = RedisLoginLease(context.redis, store_settings)
        else:
            store = MemorySessionStore(store_settings)
            lease = MemoryLoginLease(store_settings)
        self.supply = SessionSupply(
            crawler,
            store,
            lease,
            store_settings,
            guard=None if context is None else context.guard("sessions"),
            wait=self.settings.wait,
        )
        self.store_settings = store_settings
        self._dropped = 0  # requests dropped with no session since the last WARNING about them
        self._dropped_logged_at = -math.inf
        crawler.signals.connect(self._report_dropped, signal=signals.spider_closed)
        crawler.signals.connect(self.supply.cancel_logins, signal=signals.spider_closed)

    @property
    def store(self) -> SessionStore:
        return self.supply.store

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SharedSessionMiddleware:
        return cls(crawler)

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
        self._stamp(request, await self._draw(request, *found))
        self.stats.inc_value("sessions/used")

    async def _draw(self, request: Request, spider: Spider, platform: str) -> Session:
        """The session ``request`` goes with: its pinned account's, or a usable one."""
        pinned = request.meta.get(PIN_META)
        session = (
            await self.supply.pinned(platform, str(pinned))
            if pinned
            else await self.supply.usable(spider, platform)
        )
        if session is None:
            self._refuse(request, platform, pinned)
        return session

    async def restamp(self, request: Request) -> None:
        """Just before ``request`` leaves, after its site's turn (seconds under a slow rate;
        ``crawler.download_handler``): an account logged in again meanwhile gives it its new
        cookies; one marked since (expired, resting, retired, gone) is swapped for another
        account's session (a pinned request keeps its own). Rendered requests keep theirs:
        they are in the browser's context by then."""
        account = request.meta.get(ACCOUNT_META)
        found = self._platform(request)
        if account is None or found is None or request.meta.get("playwright"):
            return
        spider, platform = found
        try:
            current = await self.supply.shared(lambda: self.store.get(platform, str(account)))
        except SessionError:  # unreadable, or a wrong key: a new draw says why
            current = None
        fresh = current is not None and current.usable(time.time())
        if fresh and current is not None:
            if current.generation == request.meta.get(GENERATION_META):
                return
            self._stamp(request, current)
        elif request.meta.get(PIN_META):
            return
        else:
            request.meta.pop(ACCOUNT_META, None)
            self._stamp(request, await self._draw(request, spider, platform))
        self.stats.inc_value("sessions/restamped")

    def _stamp(self, request: Request, session: Session) -> None:
        """``request`` carries ``session``'s cookies (and proxy), and says which it carries."""
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
                await self.supply.shared(
                    lambda: self.store.merge_cookies(platform, account, cookies)
                )
            return response
        generation = request.meta.get(GENERATION_META)
        reason = f"HTTP {response.status}"
        # the site says when to come back (a 429's Retry-After): the account rests that long,
        # and no strike is counted (strikes retire an account: this one only came too often)
        told = response.headers.get(b"Retry-After")
        rest = retry_after_seconds(told) if told else None  # None: SESSIONS_COOLDOWN
        after = await self.supply.shared(
            lambda: self.store.mark(
                platform, account, state, reason, rest, strike=told is None, generation=generation
            )
        )
        self.stats.inc_value(f"sessions/marked/{state.value}")
        answered = (
            f"{platform} account {account} answered as {state.value} (HTTP {response.status}): "
            f"{verdict(after, self.store_settings.max_strikes)}"
        )
        stale = replaced_before_answer(state, after)
        counter, counted = (STALE_TRIES_META, STALE_COUNT) if stale else (TRIES_META, "")
        tries = int(request.meta.get(counter, 0)) + 1
        if tries > self.settings.max_tries:
            why = f"after SESSIONS_MAX_TRIES={self.settings.max_tries} retries{counted}: {answered}"
            return self._give_up(request, response, state, why, judged=callable(check))
        logger.warning(
            "%s on %s; the request is tried again (retry %d of SESSIONS_MAX_TRIES=%d%s) with "
            "the next usable account",
            answered,
            mask_secrets(request.url),
            tries,
            self.settings.max_tries,
            counted,
        )
        self.stats.inc_value("sessions/retried")
        retry = request.replace(dont_filter=True)
        retry.meta[counter] = tries
        retry.meta.pop(ACCOUNT_META, None)
        retry.headers.pop(b"Cookie", None)
        return retry

    def _give_up(
        self, request: Request, response: Response, state: Health, why: str, *, judged: bool
    ) -> Response:
        """``request`` used up its tries (``why``). Its response (a login page, a refusal) is
        no page of the spider's: the request fails (``sessions/gave_up``), unless the spider
        judged it with a ``session_state`` of its own, whose callback then gets it, marked with
        ``meta['session_gave_up']`` (the health it was judged)."""
        self.stats.inc_value(GAVE_UP)
        gave_up = f"Gave up {mask_secrets(request.url)} {why}"
        if judged:
            request.meta[GAVE_UP_META] = state.value
            logger.warning(
                "%s; the response goes to its callback (the spider's session_state judged it)",
                gave_up,
            )
            return response
        message = f"{gave_up}; the response is not handed to the spider (failure {GAVE_UP})"
        logger.warning("%s", message)
        raise RefusedRequest(GAVE_UP, message)


def replaced_before_answer(asked: Health, after: Health | None) -> bool:
    """Whether a mark was dropped because a newer log-in had replaced the cookies the request
    carried: the account's health after it is neither the one asked nor a retirement (``mark``
    returns the health of the newer session then)."""
    return after is not None and after is not asked and after is not Health.RETIRED
