"""``members``: crawls pages only a logged-in user sees, on a shared session."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from scrapy import Request
from scrapy.http import Response

from crawler.items import PageItem
from crawler.sessions.providers import Credentials, FormLoginConfig, PlaywrightFormLogin
from crawler.spiders.base import RedisSpider


class MembersSpider(RedisSpider):
    name = "members"
    session_platform = "members-site"
    session_accounts = ("alice",)

    def session_login(self) -> PlaywrightFormLogin:
        password = self.settings.get("TEST_LOGIN_PASSWORD")
        return PlaywrightFormLogin(
            FormLoginConfig(url=self.settings.get("TEST_LOGIN_URL"), success_cookie="session"),
            credentials=lambda account: Credentials(account, password),
        )

    def parse(self, response: Response, **kwargs: Any) -> Iterator[PageItem | Request]:
        yield PageItem(
            url=response.url,
            status=response.status,
            title=response.css("title::text").get(),
            depth=int(response.meta.get("depth", 0)),
            crawled_at=datetime.now(UTC),
        )
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)
