"""Request fingerprinters a user writes: the canonical URL itself (Scrapy's contract asks only
for bytes that identify the request), and ids that share a prefix."""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler
from w3lib.url import canonicalize_url


class UrlFingerprinter:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> UrlFingerprinter:
        return cls()

    def fingerprint(self, request: Request) -> bytes:
        return canonicalize_url(request.url).encode()
