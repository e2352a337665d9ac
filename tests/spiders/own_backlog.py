"""``own_backlog``: a spider that names its own Kafka backlog topic in ``custom_settings``."""

from __future__ import annotations

from typing import Any

from crawler.spiders.base import RedisSpider


class OwnBacklogSpider(RedisSpider):
    name = "own_backlog"
    custom_settings: dict[str, Any] | None = {  # noqa: RUF012 - Scrapy's attribute
        "FRONTIER_QUEUE_MAX": 1000,
        "FRONTIER_BACKLOG_TOPIC": "own-{spider}-backlog",
    }
