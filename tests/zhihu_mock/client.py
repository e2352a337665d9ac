"""A small urllib client of the mock for tests: keeps cookies, signs API calls, no redirects."""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from email.message import Message
from typing import Any

from tests.zhihu_mock.config import SIGNATURE_VERSION
from tests.zhihu_mock.messages import parse_cookies


def format_signature(path_with_query: str, d_c0: str) -> str:
    """An ``x-zse-96`` of the right format (not the real algorithm, which the mock can't check)."""
    digest = hashlib.sha384(f"{SIGNATURE_VERSION}+{path_with_query}+{d_c0}".encode()).digest()
    return "2.0_" + base64.b64encode(digest).decode()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass
class Reply:
    status: int
    headers: Message
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()


@dataclass
class MockClient:
    """Requests to one base URL; ``Set-Cookie`` answers update ``cookies``."""

    base_url: str
    cookies: dict[str, str] = field(default_factory=dict)
    sign: bool = True
    _opener: urllib.request.OpenerDirector = field(
        default_factory=lambda: urllib.request.build_opener(_NoRedirect), repr=False
    )

    def request(
        self,
        method: str,
        target: str,
        body: bytes | None = None,
        content_type: str = "",
        extra_headers: dict[str, str] | None = None,
    ) -> Reply:
        """``target`` is a path?query on the base URL, or an absolute URL such as paging.next."""
        url = target if target.startswith("http") else self.base_url + target
        path_with_query = url.removeprefix(self.base_url)
        headers = {"x-requested-with": "fetch", "x-api-version": "3.0.91"}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if self.sign and "d_c0" in self.cookies:
            headers["x-zse-93"] = SIGNATURE_VERSION
            headers["x-zse-96"] = format_signature(path_with_query, self.cookies["d_c0"])
        if content_type:
            headers["Content-Type"] = content_type
        headers.update(extra_headers or {})
        request = urllib.request.Request(url, data=body, headers=headers, method=method)  # noqa: S310
        try:
            with self._opener.open(request, timeout=10) as response:
                reply = Reply(response.status, response.headers, response.read())
        except urllib.error.HTTPError as error:
            reply = Reply(error.code, error.headers, error.read())
            error.close()
        for set_cookie in reply.headers.get_all("Set-Cookie") or []:
            self.cookies.update(parse_cookies(set_cookie.split(";", 1)[0]))
        return reply

    def get(self, target: str, extra_headers: dict[str, str] | None = None) -> Reply:
        return self.request("GET", target, extra_headers=extra_headers)

    def post(self, target: str, body: bytes = b"", content_type: str = "") -> Reply:
        return self.request("POST", target, body, content_type)

    def guest(self) -> MockClient:
        """Visits ``/explore`` for a guest ``d_c0`` cookie."""
        self.get("/explore")
        return self
