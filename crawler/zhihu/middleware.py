"""``ZhihuApiMiddleware``: browser headers, ``d_c0`` and the signature on every API request.

Downloader middleware of the zhihu spider (enabled by its ``custom_settings``), after
``SharedSessionMiddleware`` (720) so it sees the session's cookies. API requests (URLs under
``ZHIHU_API_URL``) get ``x-api-version``, ``x-app-za``, ``x-requested-with``, ``x-zse-93`` and
an ``x-zse-96`` signed over their path?query and the ``d_c0`` cookie. A request without
``d_c0`` gets the node's guest ``d_c0``, fetched once per node from ``explore`` through the
engine: that request carries the shared session, so the session middleware also stores the
new ``d_c0`` in the account's shared session, and other nodes sign with it too.

Responses: every error answer is counted (``zhihu/api_error/<code>``); 40362 also starts the
site's shared cooldown (``ClusterRateLimitMiddleware.penalize``) for every node. With
``ZHIHU_CHALLENGE_BROWSER``, a ``__zse_ck`` challenge page is solved in Chromium for the
request's shared session before the response goes on (one node per account solves, the others
wait: :mod:`crawler.zhihu.challenge`); the spider re-enqueues the request either way.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from crawler.middlewares.politeness import ClusterRateLimitMiddleware, site_of
from crawler.middlewares.sessions import ACCOUNT_META, SharedSessionMiddleware, browser_cookies
from crawler.sessions import MemoryLoginLease, RedisSessionStore, SessionSettings
from crawler.zhihu.challenge import (
    ZSE_CK,
    ChallengeFailed,
    ChallengeLease,
    ChallengeResolver,
    Outcome,
    lease_seconds,
)
from crawler.zhihu.challenge_browser import BrowserChallengeSolver
from crawler.zhihu.errors import Problem, classify
from crawler.zhihu.settings import ZhihuSettings
from crawler.zhihu.signer import load_signer

logger = logging.getLogger(__name__)

D_C0 = "d_c0"
APP_ZA = "OS=Web"


def cookie_value(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None


def path_with_query(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


class ZhihuApiMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.settings = ZhihuSettings.from_settings(crawler.settings)
        self.signer = load_signer(self.settings.signer)
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.api_prefix = self.settings.api_url + "/"
        self._guest: str | None = None  # the node's guest d_c0 ("" when explore set none)
        self._guest_lock: asyncio.Lock | None = None
        self._challenges: ChallengeResolver | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ZhihuApiMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        request.headers[b"User-Agent"] = self.settings.user_agent
        request.headers.setdefault(b"Accept-Language", b"zh-CN,zh;q=0.9,en;q=0.8")
        if not request.url.startswith(self.api_prefix):
            return
        header = (request.headers.get(b"Cookie") or b"").decode("latin-1")
        d_c0 = cookie_value(header, D_C0)
        if d_c0 is None:
            d_c0 = await self._guest_d_c0()
            if d_c0:
                request.headers[b"Cookie"] = (
                    f"{header}; {D_C0}={d_c0}" if header else f"{D_C0}={d_c0}"
                )
        request.headers[b"Referer"] = self.settings.www_url + "/"
        request.headers[b"x-api-version"] = self.settings.api_version
        request.headers[b"x-app-za"] = APP_ZA
        request.headers[b"x-requested-with"] = b"fetch"
        request.headers[b"x-zse-93"] = self.signer.version
        request.headers[b"x-zse-96"] = self.signer.sign(path_with_query(request.url), d_c0)

    async def _guest_d_c0(self) -> str:
        """The node's guest ``d_c0``, fetched once (later requests wait for the first fetch)."""
        self._guest_lock = self._guest_lock or asyncio.Lock()
        async with self._guest_lock:
            if self._guest is None:
                self._guest = await self._fetch_guest()
        return self._guest

    async def _fetch_guest(self) -> str:
        engine = self.crawler.engine
        assert engine is not None
        url = self.settings.endpoints.url("explore")
        response = await engine.download_async(
            Request(url, meta={"handle_httpstatus_all": True}, dont_filter=True)
        )
        for header in response.headers.getlist(b"Set-Cookie"):
            value = cookie_value(header.decode("latin-1").split(";", 1)[0], D_C0)
            if value:
                self.stats.inc_value("zhihu/d_c0/guest")
                return value
        self.stats.inc_value("zhihu/d_c0/missing")
        logger.error("%s set no d_c0 cookie: API requests go unsigned", url)
        return ""

    async def process_response(self, request: Request, response: Response) -> Response:
        if not request.url.startswith(self.api_prefix):
            return response
        error = classify(response.status, response.body)
        if error is None:
            return response
        self.stats.inc_value(f"zhihu/api_error/{error.code}")
        if error.problem is Problem.RATE_LIMITED:
            politeness = self.crawler.get_downloader_middleware(ClusterRateLimitMiddleware)
            if politeness is not None:
                await politeness.penalize(site_of(response.url), "zhihu_40362", response)
        elif error.problem is Problem.CHALLENGE and self.settings.challenge_browser:
            await self._solve_challenge(request)
        return response

    async def _solve_challenge(self, request: Request) -> None:
        account = request.meta.get(ACCOUNT_META)
        platform = getattr(self.crawler.spider, "session_platform", None)
        resolver = self._challenge_resolver()
        header = (request.headers.get(b"Cookie") or b"").decode("latin-1")
        try:
            if account is None or not platform or resolver is None:
                raise ChallengeFailed("no_session", "the request carries no shared session")
            outcome = await resolver.resolve(
                str(platform), str(account), request.url, cookie_value(header, ZSE_CK)
            )
        except ChallengeFailed as exc:
            self.stats.inc_value(f"zhihu/challenge/failed/{exc.reason}")
            logger.warning(
                "__zse_ck challenge on %s not solved (%s): %s", request.url, exc.reason, exc
            )
            return
        self.stats.inc_value(f"zhihu/challenge/{outcome.value}")
        logger.log(
            logging.INFO if outcome is Outcome.SOLVED else logging.DEBUG,
            "__zse_ck challenge on %s: %s (account %s)",
            request.url,
            outcome.value,
            account,
        )

    def _challenge_resolver(self) -> ChallengeResolver | None:
        """Built at the first challenge, on the session middleware's store (none: no sessions)."""
        if self._challenges is None:
            sessions = self.crawler.get_downloader_middleware(SharedSessionMiddleware)
            if sessions is None:
                return None
            ttl = lease_seconds(self.settings.challenge_timeout)
            store = sessions.store
            lease = (
                ChallengeLease(store.redis, ttl)
                if isinstance(store, RedisSessionStore)
                else MemoryLoginLease(SessionSettings(login_lease=ttl))
            )
            solver = BrowserChallengeSolver(
                self.settings.browser_executable,
                self.settings.challenge_timeout,
                self.settings.user_agent,
                browser_cookies,
            )
            self._challenges = ChallengeResolver(store, lease, solver, wait=ttl)
        return self._challenges
