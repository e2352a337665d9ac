"""Requests and responses as plain values, so routing and rules don't depend on http.server."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson


@dataclass(frozen=True)
class Request:
    method: str
    target: str  # path?query exactly as sent (what the signature covers)
    headers: dict[str, str]  # lower-cased names
    cookies: dict[str, str]
    body: bytes = b""
    base_url: str = ""  # absolute URLs in responses start with this

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        """The first value of each query parameter (blank values kept)."""
        parsed = parse_qs(urlsplit(self.target).query, keep_blank_values=True)
        return {name: values[0] for name, values in parsed.items()}

    def form(self) -> dict[str, str]:
        """The body as a form, or as a JSON object of strings."""
        if self.headers.get("content-type", "").startswith("application/json"):
            loaded = json.loads(self.body or b"{}")
            return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}
        parsed = parse_qs(self.body.decode(), keep_blank_values=True)
        return {name: values[0] for name, values in parsed.items()}


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str
    headers: list[tuple[str, str]] = field(default_factory=list)
    error_code: int | None = None  # the "error.code" of an error body, counted by the server

    def set_cookie(self, name: str, value: str, max_age: int) -> Response:
        self.headers.append(
            ("Set-Cookie", f"{name}={value}; Path=/; Max-Age={max_age}; SameSite=Lax")
        )
        return self


def parse_cookies(header: str) -> dict[str, str]:
    """A ``Cookie`` header; values may hold ``|``, ``=`` or quotes, kept as sent."""
    cookies: dict[str, str] = {}
    for part in header.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep and name:
            cookies[name] = value
    return cookies


def json_response(payload: Any, status: int = 200) -> Response:
    return Response(status, orjson.dumps(payload), "application/json; charset=utf-8")


def html_response(markup: str, status: int = 200) -> Response:
    return Response(status, markup.encode(), "text/html; charset=utf-8")


def error_response(status: int, code: int, message: str, name: str = "") -> Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if name:
        error["name"] = name
    response = json_response({"error": error}, status)
    response.error_code = code
    return response


def redirect_response(status: int, location: str) -> Response:
    return Response(status, b"", "text/html; charset=utf-8", [("Location", location)])


def not_found() -> Response:
    return error_response(404, 404, "你似乎来到了没有知识存在的荒原", "NotFoundError")
