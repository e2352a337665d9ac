"""The ``pages`` crawl written as scrapy-redis 0.9.1 documents it (baseline only)."""

from __future__ import annotations

from scrapy_redis.spiders import RedisSpider

from crawler.spiders.pages import PagesSpider


class ScrapyRedisPagesSpider(RedisSpider):  # type: ignore[misc]  # scrapy-redis has no types
    name = "scrapy_redis_pages"
    redis_key = "scrapy_redis_pages:start_urls"
    # scrapy-redis as it is: without the project's add-on (which refuses scrapy-redis's
    # scheduler and dupefilter, and adds the frontier's components; the bench runs it with
    # Scrapy's own crawl command, which does not refuse that), items to Kafka by a plain
    # producer (the project's KafkaPipeline is a part of the cluster).
    custom_settings = {  # noqa: RUF012 - Scrapy's own attribute
        "ADDONS": {},
        "ITEM_PIPELINES": {"bench.spiders.raw_kafka.RawKafkaPipeline": 900},
    }
    parse = PagesSpider.parse
    link_extractor = PagesSpider.link_extractor
