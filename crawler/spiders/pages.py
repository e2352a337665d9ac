"""``pages``: a generic spider that crawls every page of its seeds' sites.

It follows links within the seed's host and port (the scope travels in the
request meta key ``crawler_scope``; ``RedirectScopeMiddleware`` holds redirects to
it too) and yields one ``PageItem`` per response.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from scrapy import Request
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor

from crawler.frontier.seeds import Seed
from crawler.items import PageItem
from crawler.scope import SCOPE_META_KEY, site_of
from crawler.spiders.base import RedisSpider


class PagesSpider(RedisSpider):
    name = "pages"
    link_extractor = LinkExtractor()

    def request_from_seed(self, seed: Seed) -> Request:
        request = super().request_from_seed(seed)
        request.meta.setdefault(SCOPE_META_KEY, site_of(seed.url))
        return request

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PageItem | Request]:
        title = None
        if isinstance(response, TextResponse):
            raw_title = response.css("title::text").get()
            title = raw_title.strip() if raw_title is not None else None
        yield PageItem(
            url=response.url,
            status=response.status,
            title=title,
            depth=int(response.meta.get("depth", 0)),
            crawled_at=datetime.now(UTC),
        )
        if not isinstance(response, TextResponse):
            return
        scope = response.meta.get(SCOPE_META_KEY) or site_of(response.url)
        for link in self.link_extractor.extract_links(response):
            if site_of(link.url) == scope:
                yield response.follow(link.url, meta={SCOPE_META_KEY: scope})
