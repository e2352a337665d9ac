"""A downloader middleware that drops responses in ``process_response`` (as Scrapy's
``HttpCompressionMiddleware`` does with a body over its cap): paths starting ``/refuse``."""

from __future__ import annotations

from urllib.parse import urlsplit

from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response


class IgnoreInResponseMiddleware:
    def process_response(self, request: Request, response: Response) -> Response:
        if urlsplit(request.url).path.startswith("/refuse"):
            raise IgnoreRequest("refused by a test middleware")
        return response
