"""``browser_session``: renders pages in Chromium with a shared session's cookies."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from scrapy.http import Response

from crawler.items import PageItem
from crawler.spiders.base import RedisSpider


class BrowserSessionSpider(RedisSpider):
    name = "browser_session"
    session_platform = "jsapp"
    render_with_browser = True

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PageItem]:
        yield PageItem(
            url=response.url,
            status=response.status,
            title=response.css("title::text").get(),
            depth=0,
            crawled_at=datetime.now(UTC),
        )
