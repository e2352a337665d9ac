"""``ZhihuApiMiddleware``: browser headers, ``d_c0`` and the signature on every API request.

Downloader middleware of the zhihu spider (enabled by its ``custom_settings``), after
``SharedSessionMiddleware`` (720) so it sees the session's cookies. API requests (URLs under
``ZHIHU_API_URL``) get ``x-api-version``, ``x-app-za``, ``x-requested-with``, ``x-zse-93`` and
an ``x-zse-96`` signed over their path?query and the ``d_c0`` cookie. A request without
``d_c0`` gets one from ``explore``, fetched through the engine once per account that lacks one
(once per node without sessions): that fetch carries the account's own session (meta
``session_pin``), so the session middleware stores the new ``d_c0`` in it, and the account's
requests on every node carry it from then on. A session that lost it since (imported again
without one) gets this node's back (``zhihu/d_c0/restored``) when one of its requests comes
without it, and before a challenge is solved with it. When ``explore`` sets none, the account's
requests go unsigned, and the fetch is tried again ``GUEST_RETRY`` seconds later.

Responses: every API error answer is counted (``zhihu/api_error/<code>``; a challenge page is
no API answer: ``zhihu/challenge/<endpoint>``, by the spider). A redirect to the sign-in or the
soft-block page (:mod:`crawler.zhihu.errors`) of any request is not followed: the session
middleware and the spider see it (its status added to request meta ``handle_httpstatus_list``,
which gets back what it held before when the request is sent anew); other redirects are
followed. 40362 also starts the
site's shared cooldown (``ClusterRateLimitMiddleware.penalize``) for every node, unless its
HTTP status did (``POLITENESS_PENALTY_STATUSES``: one pause per answer). With
``ZHIHU_CHALLENGE_BROWSER``, a ``__zse_ck`` challenge page is solved in Chromium for the
request's shared session before the response goes on (one node per account solves, the others
wait: :mod:`crawler.zhihu.challenge`); the spider re-enqueues the request either way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from crawler.middlewares.politeness import ClusterRateLimitMiddleware, site_of
from crawler.middlewares.session_http import browser_cookies, set_cookies
from crawler.middlewares.sessions import (
    ACCOUNT_META,
    DONT_USE_META,
    PIN_META,
    SharedSessionMiddleware,
)
from crawler.redis_outage import REDIS_FAILURES
from crawler.sessions import (
    Cookie,
    MemoryLoginLease,
    RedisSessionStore,
    SessionError,
    SessionSettings,
)
from crawler.zhihu.challenge import (
    ZSE_CK,
    ChallengeFailed,
    ChallengeLease,
    ChallengeResolver,
    Outcome,
    lease_seconds,
)
from crawler.zhihu.challenge_browser import BrowserChallengeSolver
from crawler.zhihu.errors import ApiError, Problem, classify
from crawler.zhihu.settings import ZhihuSettings
from crawler.zhihu.signer import load_signer

logger = logging.getLogger(__name__)

D_C0 = "d_c0"
HANDLED_META = "handle_httpstatus_list"  # set on a blocked redirect: the spider sees it
OWN_HANDLED_META = "zhihu_own_handle_httpstatus_list"  # the request's own before (None: none)
GUEST_RETRY = 60.0  # seconds before asking explore again for a d_c0 it did not set
APP_ZA = "OS=Web"


def cookie_value(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None


def response_error(response: Response) -> ApiError | None:
    """What went wrong (:func:`crawler.zhihu.errors.classify`), ``None`` if nothing did."""
    location = response.headers.get(b"Location") or b""
    return classify(response.status, response.body, location)


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
        # account ("": no session) -> (its d_c0 from explore, None: it set none; when to ask again)
        self._guests: dict[str, tuple[Cookie | None, float]] = {}
        self._guest_lock: asyncio.Lock | None = None
        self._challenges: ChallengeResolver | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ZhihuApiMiddleware:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        if OWN_HANDLED_META in request.meta:  # a blocked redirect's, copied into a retry
            own = request.meta.pop(OWN_HANDLED_META)
            if own is None:
                request.meta.pop(HANDLED_META, None)
            else:
                request.meta[HANDLED_META] = own
        request.headers[b"User-Agent"] = self.settings.user_agent
        request.headers.setdefault(b"Accept-Language", b"zh-CN,zh;q=0.9,en;q=0.8")
        if not request.url.startswith(self.api_prefix):
            return
        header = (request.headers.get(b"Cookie") or b"").decode("latin-1")
        d_c0 = cookie_value(header, D_C0)
        if d_c0 is None:
            d_c0 = await self._guest_d_c0(str(request.meta.get(ACCOUNT_META) or ""))
            if d_c0:
                request.headers[b"Cookie"] = (
                    f"{header}; {D_C0}={d_c0}" if header else f"{D_C0}={d_c0}"
                )
        request.headers[b"Referer"] = self.settings.www_url + "/"
        request.headers[b"x-api-version"] = self.settings.api_version
        request.headers[b"x-app-za"] = APP_ZA
        request.headers[b"x-requested-with"] = b"fetch"
        if d_c0:  # a signature needs one
            request.headers[b"x-zse-93"] = self.signer.version
            request.headers[b"x-zse-96"] = self.signer.sign(path_with_query(request.url), d_c0)

    async def _guest_d_c0(self, account: str) -> str:
        """A ``d_c0`` from explore for ``account``'s session ("": no session), fetched once
        (later requests wait for the first fetch; "" again after GUEST_RETRY). The session,
        which the fetch gave it, lacks it again: it gets it back."""
        self._guest_lock = self._guest_lock or asyncio.Lock()
        async with self._guest_lock:
            known = self._guests.get(account)
            if known is None or (known[0] is None and time.monotonic() >= known[1]):
                cookie = await self._fetch_guest(account)
                self._guests[account] = (cookie, time.monotonic() + GUEST_RETRY)
            else:
                await self._restore_d_c0(account)
            found = self._guests[account][0]
            return found.value if found is not None else ""

    async def _restore_d_c0(self, account: str) -> None:
        """Merge this node's ``d_c0`` for ``account`` into its shared session if that has none
        (a session imported again without it), so every node's requests and a challenge's
        browser carry it again."""
        cookie = self._guests.get(account, (None, 0.0))[0]
        sessions = self._sessions()
        platform = getattr(self.crawler.spider, "session_platform", None)
        if not account or cookie is None or sessions is None or not platform:
            return
        try:
            session = await sessions.store.get(str(platform), account)
            if session is None or any(known.name == D_C0 for known in session.cookies):
                return
            await sessions.store.merge_cookies(str(platform), account, [cookie])
        except (*REDIS_FAILURES, SessionError) as exc:
            logger.warning("d_c0 not restored to the %s session of %s: %s", platform, account, exc)
            return
        self.stats.inc_value("zhihu/d_c0/restored")
        logger.info("The %s session of %s had lost its d_c0: restored", platform, account)

    def _sessions(self) -> SharedSessionMiddleware | None:
        return self.crawler.get_downloader_middleware(SharedSessionMiddleware)

    async def _fetch_guest(self, account: str) -> Cookie | None:
        engine = self.crawler.engine
        assert engine is not None
        url = self.settings.endpoints.url("explore")
        session = {PIN_META: account} if account else {DONT_USE_META: True}
        meta = {"handle_httpstatus_all": True, **session}
        try:
            response = await engine.download_async(Request(url, meta=meta, dont_filter=True))
        except Exception as exc:  # noqa: BLE001 (a failed fetch is a missing d_c0, retried later)
            self.stats.inc_value("zhihu/d_c0/missing")
            logger.error("%s failed (%s): API requests go unsigned for now", url, exc)
            return None
        for cookie in set_cookies(response):
            if cookie.name == D_C0 and cookie.value:
                self.stats.inc_value("zhihu/d_c0/guest")
                return cookie
        self.stats.inc_value("zhihu/d_c0/missing")
        logger.error("%s set no d_c0 cookie: API requests go unsigned", url)
        return None

    async def process_response(self, request: Request, response: Response) -> Response:
        error = response_error(response)
        if error is not None and 300 <= response.status < 400:
            # to sign in or to the soft-block page: neither followed (RedirectMiddleware) nor
            # dropped (HttpErrorMiddleware), the spider's (and first the sessions') to handle
            own = request.meta.setdefault(OWN_HANDLED_META, request.meta.get(HANDLED_META))
            request.meta[HANDLED_META] = [*(own or ()), response.status]
        if error is None or not request.url.startswith(self.api_prefix):
            return response
        if error.problem is not Problem.CHALLENGE:
            self.stats.inc_value(f"zhihu/api_error/{error.code}")
        if error.problem is Problem.RATE_LIMITED:
            await self._cool_site(response)
        elif error.problem is Problem.CHALLENGE and self.settings.challenge_browser:
            await self._solve_challenge(request)
        return response

    async def _cool_site(self, response: Response) -> None:
        """40362 pauses the site for every node, once: a status the politeness middleware
        penalizes itself (``POLITENESS_PENALTY_STATUSES``, a 429) has paused it already."""
        politeness = self.crawler.get_downloader_middleware(ClusterRateLimitMiddleware)
        if politeness is None or response.status in politeness.settings.penalty_statuses:
            return
        await politeness.penalize(site_of(response.url), "zhihu_40362", response)

    async def _solve_challenge(self, request: Request) -> None:
        account = request.meta.get(ACCOUNT_META)
        platform = getattr(self.crawler.spider, "session_platform", None)
        resolver = self._challenge_resolver()
        header = (request.headers.get(b"Cookie") or b"").decode("latin-1")
        try:
            if account is None or not platform or resolver is None:
                raise ChallengeFailed("no_session", "the request carries no shared session")
            await self._restore_d_c0(str(account))  # the browser solves with the session's
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
            sessions = self._sessions()
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
