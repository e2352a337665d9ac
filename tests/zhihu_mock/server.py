"""Routing and the :class:`ZhihuMock` server: one loopback host stands for www, zhuanlan, api."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from http.server import BaseHTTPRequestHandler

from crawler.demo.server import BackgroundHTTPServer, QuietHandler
from tests.zhihu_mock.api import Api
from tests.zhihu_mock.config import MockConfig
from tests.zhihu_mock.counters import MockCounters
from tests.zhihu_mock.data import generate
from tests.zhihu_mock.enforcement import Guard
from tests.zhihu_mock.login import Sessions, qr_signin_page, signin_page
from tests.zhihu_mock.messages import (
    Request,
    Response,
    error_response,
    html_response,
    not_found,
    parse_cookies,
    redirect_response,
)
from tests.zhihu_mock.pages import Pages
from tests.zhihu_mock.paging import BadParameter
from tests.zhihu_mock.records import MockData


class Access(Enum):
    OPEN = "open"  # pages, login endpoints
    API = "api"  # API v4: rate limit, challenge, d_c0 and signature
    API_LOGIN = "api_login"  # ... and a valid z_c0


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    endpoint: str  # the key of MockCounters.requests
    access: Access
    handler: Callable[..., Response | None]  # (request, *path groups); None means 404


_ID = r"(\d{1,19})"
_SLUG = r"([A-Za-z0-9_.-]+)"
_HEX = r"([0-9a-f]{32})"


class ZhihuMock(BackgroundHTTPServer):
    """The mock site on ``config.host``, served from a background thread while entered."""

    def __init__(self, config: MockConfig | None = None) -> None:
        self.config = config or MockConfig()
        self.data: MockData = generate(self.config.data)
        self.counters = MockCounters()
        self.sessions = Sessions(self.config, self.counters)
        self.guard = Guard(self.config, self.sessions, self.counters)
        self.routes = self._routes(
            Api(self.data, self.sessions, self.config.variety), Pages(self.data)
        )
        super().__init__(self._handler_class(), self.config.host, self.config.port)

    def issue_session(self, username: str) -> str:
        """A valid ``z_c0`` for a configured account, not counted as a login."""
        return self.sessions.issue(username)

    def _routes(self, api: Api, pages: Pages) -> list[Route]:
        s = self.sessions
        table: list[tuple[str, str, str, Access, Callable[..., Response | None]]] = [
            ("GET", "/", "page_explore", Access.OPEN, pages.explore),
            ("GET", "/explore", "page_explore", Access.OPEN, pages.explore),
            ("GET", f"/question/{_ID}", "page_question", Access.OPEN, pages.question),
            ("GET", f"/question/{_ID}/answer/{_ID}", "page_answer", Access.OPEN, pages.question),
            ("GET", f"/answer/{_ID}", "page_answer", Access.OPEN, self._answer_page(pages)),
            ("GET", f"/p/{_ID}", "page_article", Access.OPEN, pages.article),
            ("GET", f"/people/{_SLUG}", "page_people", Access.OPEN, pages.people),
            ("GET", f"/zvideo/{_ID}", "page_zvideo", Access.OPEN, pages.zvideo),
            ("GET", "/signin", "page_signin", Access.OPEN, self._signin_page),
            ("GET", "/account/unhappy", "page_unhappy", Access.OPEN, self._unhappy_page),
            ("POST", "/api/v3/oauth/sign_in", "sign_in", Access.OPEN, s.sign_in),
            ("POST", "/api/v3/account/api/login/qrcode", "qr_create", Access.OPEN, s.qr_create),
            (
                "GET",
                f"/api/v3/account/api/login/qrcode/{_HEX}/scan_info",
                "qr_scan_info",
                Access.OPEN,
                s.qr_scan_info,
            ),
            (
                "GET",
                f"/api/v3/account/api/login/qrcode/{_HEX}/image",
                "qr_image",
                Access.OPEN,
                s.qr_image,
            ),
            ("POST", f"/__mock__/qr/{_HEX}/scan", "mock_qr_scan", Access.OPEN, s.qr_scan),
            ("GET", f"/api/v4/questions/{_ID}", "question", Access.API, api.question),
            (
                "GET",
                f"/api/v4/questions/{_ID}/answers",
                "question_answers",
                Access.API,
                api.question_answers,
            ),
            (
                "GET",
                f"/api/v4/questions/{_ID}/feeds",
                "question_feeds",
                Access.API,
                api.question_feeds,
            ),
            ("GET", f"/api/v4/answers/{_ID}", "answer", Access.API, api.answer),
            ("GET", f"/api/v4/articles/{_ID}", "article", Access.API, api.article),
            ("GET", f"/api/v4/zvideos/{_ID}", "zvideo", Access.API, api.zvideo),
            ("GET", f"/api/v4/members/{_SLUG}", "member", Access.API, api.member),
            (
                "GET",
                f"/api/v4/members/{_SLUG}/answers",
                "member_answers",
                Access.API_LOGIN,
                api.member_answers,
            ),
            (
                "GET",
                f"/api/v4/members/{_SLUG}/articles",
                "member_articles",
                Access.API_LOGIN,
                api.member_articles,
            ),
            (
                "GET",
                f"/api/v4/members/{_SLUG}/zvideos",
                "member_zvideos",
                Access.API_LOGIN,
                api.member_zvideos,
            ),
            (
                "GET",
                f"/api/v4/comment_v5/(answers|articles|zvideos)/{_ID}/root_comment",
                "root_comment",
                Access.API,
                api.root_comments,
            ),
            (
                "GET",
                f"/api/v4/comment_v5/comment/{_ID}/child_comment",
                "child_comment",
                Access.API_LOGIN,
                api.child_comments,
            ),
            ("GET", "/api/v4/search_v3", "search", Access.API_LOGIN, api.search),
            ("GET", "/api/v4/me", "me", Access.API, api.me),
        ]
        return [
            Route(method, re.compile(path), endpoint, access, handler)
            for method, path, endpoint, access, handler in table
        ]

    def _answer_page(self, pages: Pages) -> Callable[..., Response | None]:
        """``/answer/{aid}``: the page, or with ``answer_redirect`` a 301 to its long URL."""
        if not self.config.answer_redirect:
            return pages.answer

        def redirect(request: Request, aid: str) -> Response | None:
            answer = self.data.answers.get(aid)
            if answer is None:
                return None
            long_url = f"{request.base_url}/question/{answer.question_id}/answer/{aid}"
            return redirect_response(301, long_url)

        return redirect

    def _unhappy_page(self, request: Request) -> Response:
        del request
        return html_response("<html><body>系统监测到您的网络环境存在异常</body></html>")

    def _signin_page(self, request: Request) -> Response:
        return html_response(qr_signin_page() if request.query.get("qr") else signin_page())

    def handle(self, request: Request) -> Response:
        """Answers one request; counts it per endpoint and every error code answered."""
        if self.config.before_answer is not None:
            self.config.before_answer(request)
        response = self._dispatch(request)
        if response.error_code is not None:
            self.counters.count_error(response.error_code)
        return response

    def _dispatch(self, request: Request) -> Response:
        path = request.path.rstrip("/") or "/"
        for route in self.routes:
            match = route.pattern.fullmatch(path)
            if match is None or route.method != request.method:
                continue
            self.counters.count_request(route.endpoint)
            if route.access is not Access.OPEN:
                refusal = self.guard.check(request, route.access is Access.API_LOGIN)
                if refusal is not None:
                    return refusal
            try:
                return route.handler(request, *match.groups()) or not_found()
            except BadParameter as exc:
                return error_response(400, 400, str(exc), "ParamError")
        self.counters.count_request("unknown")
        return not_found()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        mock = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                host = self.headers.get("Host")
                request = Request(
                    method=self.command,
                    target=self.path,
                    headers={name.lower(): value for name, value in self.headers.items()},
                    cookies=parse_cookies(self.headers.get("Cookie", "")),
                    body=self.rfile.read(length) if length else b"",
                    base_url=mock.config.public_base_url
                    or (f"http://{host}" if host else mock.base_url),
                )
                response = mock.handle(request)
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
                for name, value in response.headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(response.body)

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

        return Handler
