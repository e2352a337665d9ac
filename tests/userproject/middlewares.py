"""Ordinary downloader middlewares that replace what passes through them."""

from __future__ import annotations

from scrapy import Request
from scrapy.http import HtmlResponse, Response


class ReplaceRequestMiddleware:
    """Sends every request once more as a copy with a header (``request.replace``)."""

    def process_request(self, request: Request) -> Request | None:
        if request.meta.get("replaced"):
            return None
        return request.replace(
            headers={**request.headers.to_unicode_dict(), "X-Replaced": "1"},
            meta={**request.meta, "replaced": True},
            dont_filter=True,
        )


class NewRequestMiddleware:
    """Answers every request with a brand-new ``Request`` object (nothing of the old meta)."""

    def process_request(self, request: Request) -> Request | None:
        if request.meta.get("fresh"):
            return None
        return Request(
            request.url, callback=request.callback, meta={"fresh": True}, dont_filter=True
        )


class NewResponseMiddleware:
    """Rebuilds every response, with a new request object of its own."""

    def process_response(self, request: Request, response: Response) -> Response:
        return HtmlResponse(
            url=response.url,
            body=response.body,
            encoding="utf-8",
            request=Request(response.url, callback=request.callback, meta={"rebuilt": True}),
        )


class UnstorableReplaceMiddleware:
    """Replaces the request of page 1 with a copy whose meta holds what JSON cannot (as
    Scrapy's retry of a scrapy-playwright request with ``playwright_include_page`` copies its
    live page): the frontier cannot store the replacement."""

    def process_request(self, request: Request) -> Request | None:
        if not request.url.endswith("/p/1.html") or "handle" in request.meta:
            return None
        return request.replace(meta={**request.meta, "handle": object()}, dont_filter=True)
