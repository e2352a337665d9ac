"""Anti-bot rules of API v4: rate limit, ``__zse_ck`` challenge, signature, login."""

from __future__ import annotations

import re
import threading
from collections import Counter, deque

from tests.zhihu_mock.config import SIGNATURE_VERSION, MockConfig
from tests.zhihu_mock.counters import MockCounters
from tests.zhihu_mock.login import Sessions
from tests.zhihu_mock.messages import (
    Request,
    Response,
    error_response,
    html_response,
    redirect_response,
)
from tests.zhihu_mock.zse_ck import COOKIE, ZseCk

RATE_LIMITED = (
    "您当前请求存在异常，暂时限制本次访问。"
    "如有疑问，您可以通过手机摇一摇或登录后私信知乎小管家反馈。"
)
BAD_REQUEST = "请求参数异常，请升级客户端后重试"
UNHAPPY = "/account/unhappy?need_login=false"


class Guard:
    """Checks an API v4 request in the order the site does; ``None`` lets it through."""

    def __init__(self, config: MockConfig, sessions: Sessions, counters: MockCounters) -> None:
        self.config = config
        self.sessions = sessions
        self.counters = counters
        self._lock = threading.Lock()
        self._recent: deque[float] = deque()  # clock() of API requests in the last second
        self._challenged: Counter[str] = Counter()  # challenge pages answered per pattern
        self._patterns = [re.compile(p) for p in config.challenge_paths]
        self._blocking = [re.compile(p) for p in config.soft_block_paths]
        self._blocks_left = config.soft_block_limit
        self.zse_ck = ZseCk(config.zse_ck_lifetime, config.clock, counters)

    def check(self, request: Request, needs_login: bool) -> Response | None:
        return (
            self._rate_limit()
            or self._soft_block(request)
            or self._challenge(request)
            or self._signature(request)
            or (self._login(request) if needs_login else None)
        )

    def _rate_limit(self) -> Response | None:
        limit = self.config.rate_limit
        if limit is None:
            return None
        now = self.config.clock()
        with self._lock:
            self._recent.append(now)  # refused requests count too: hammering keeps you out
            while self._recent and self._recent[0] <= now - 1.0:
                self._recent.popleft()
            too_many = len(self._recent) > limit
        return (
            error_response(self.config.rate_limit_status, 40362, RATE_LIMITED) if too_many else None
        )

    def _soft_block(self, request: Request) -> Response | None:
        if not any(p.search(request.target) for p in self._blocking):
            return None
        with self._lock:
            if self._blocks_left <= 0:
                return None
            self._blocks_left -= 1
        self.counters.count_soft_block()
        return redirect_response(302, f"{request.base_url}{UNHAPPY}")

    def _challenge(self, request: Request) -> Response | None:
        pattern = next((p.pattern for p in self._patterns if p.search(request.target)), None)
        if pattern is None or self.zse_ck.accepts(
            request.cookies.get(COOKIE, ""), request.cookies.get("d_c0", "")
        ):
            return None
        limit = self.config.challenge_limit
        with self._lock:
            if limit is not None and self._challenged[pattern] >= limit:
                return None  # the site relents
            self._challenged[pattern] += 1
        self.counters.count_challenge()
        return html_response(self.zse_ck.page(), 403)

    def _signature(self, request: Request) -> Response | None:
        d_c0 = request.cookies.get("d_c0", "")
        if self.config.require_d_c0 and not d_c0:
            return error_response(403, 10003, BAD_REQUEST)
        if not self.config.require_signature:
            return None
        version = request.headers.get("x-zse-93", "")
        value = request.headers.get("x-zse-96", "")
        if version != SIGNATURE_VERSION or not self.config.verify_signature(
            request.target, d_c0, value
        ):
            return error_response(403, 10003, BAD_REQUEST)
        return None

    def _login(self, request: Request) -> Response | None:
        if not self.config.require_login:
            return None
        state = self.sessions.state(request.cookies.get("z_c0"))
        if state == "missing":
            refused = error_response(401, 100, "请先登录", "AuthenticationInvalidRequest")
        elif state == "expired":
            refused = error_response(401, 101, "登录已过期，请重新登录", "AuthenticationExpired")
        else:
            return None
        if self.config.login_refusal == "redirect":
            refused = redirect_response(302, f"{request.base_url}/signin?next={request.path}")
        elif self.config.login_refusal == "html":
            refused = html_response("<html><body>401 Unauthorized</body></html>", 401)
        refused.error_code = 100 if state == "missing" else 101  # counted whatever the form
        return refused
