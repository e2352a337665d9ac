"""scrapy-redis's example project, moved over as docs/migrating-from-scrapy-redis.md says.

Its two Redis spiders keep their names, keys, rules and ``domain`` argument; only the
import line changed (``scrapy_redis.spiders`` -> ``crawler.spiders.base``). Its
``ExamplePipeline`` stamps every item; ``SCHEDULER``, ``DUPEFILTER_CLASS`` and the
``RedisPipeline`` lines of its settings are dropped (items go to Kafka).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scrapy import Request
from scrapy.http import Response
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import Rule

from crawler.spiders.base import RedisCrawlSpider, RedisSpider


class MySpider(RedisSpider):
    """Spider that reads urls from redis queue (myspider:start_urls)."""

    name = "myspider_redis"
    redis_key = "myspider:start_urls"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        domain = kwargs.pop("domain", "")
        self.allowed_domains = [d for d in domain.split(",") if d]
        super().__init__(*args, **kwargs)

    def parse(self, response: Response, **kwargs: Any) -> Any:
        yield {"name": response.css("title::text").get(), "url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


class MyCrawler(RedisCrawlSpider):
    """Spider that reads urls from redis queue (mycrawler:start_urls)."""

    name = "mycrawler_redis"
    redis_key = "mycrawler:start_urls"
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        domain = kwargs.pop("domain", "")
        self.allowed_domains = [d for d in domain.split(",") if d]
        super().__init__(*args, **kwargs)

    def parse_page(self, response: Response) -> dict[str, Any]:
        return {"name": response.css("title::text").get(), "url": response.url}


class ExamplePipeline:
    def process_item(self, item: dict[str, Any], spider: Any = None) -> dict[str, Any]:
        item["crawled"] = datetime.now(UTC).isoformat()
        item["spider"] = "example"
        return item


class IdSpider(RedisSpider):
    """Seeds are bare ids; make_request_from_data turns each into a page request."""

    name = "id_seeds"

    def make_request_from_data(self, data: bytes) -> Request:
        site = self.settings.get("SITE_URL")
        return Request(f"{site}/p/{int(data)}.html", callback=self.parse_page)

    def parse_page(self, response: Response) -> dict[str, Any]:
        return {"url": response.url}
