"""``crawler seed`` reads a seed as the spider's nodes do: one its ``make_request_from_data``
makes no request of (``None``, an empty list) is skipped, as scrapy-redis and the nodes skip it,
each saying so; seeds are written in the spider's encoding."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import redis
from scrapy import Request
from scrapy.utils.test import get_crawler

from crawler.cli.seed import check, describe, to_push
from crawler.cli.seed_check import Outcome, SeedChecker
from crawler.spiders.base import RedisSpider
from settings import base

SETTINGS = {name: value for name, value in vars(base).items() if name.isupper()}


class Picky(RedisSpider):
    name = "picky_seeds"

    def make_request_from_data(self, data: bytes) -> Any:
        if data.startswith(b"skip"):
            return None if data == b"skip-none" else []
        return super().make_request_from_data(data)


def test_crawler_seed_reports_a_skipped_seed_and_does_not_push_it(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """It was rejected as invalid (no_request), a reason no doc gave, and the command exited 1
    while a node takes such a seed and does nothing, as scrapy-redis does."""
    checker = SeedChecker(Picky, SETTINGS, redis_url)
    reports = check(checker, redis_client, ["skip-none", "skip-empty", "http://shop.test/1"])
    assert [report.outcome for report in reports] == [Outcome.SKIPPED, Outcome.SKIPPED, Outcome.NEW]
    assert to_push(reports) == [b"http://shop.test/1"]
    said = describe(reports[0])
    assert said.startswith("skipped: skip-none: ")
    assert "makes no request of it" in said
    assert reports[0].as_json() == {"seed": "skip-none", "outcome": "skipped"}


def test_a_node_counts_a_seed_it_skips(caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler(Picky, {**SETTINGS, "REDIS_URL": ""})
    spider = Picky.from_crawler(crawler)
    crawler.spider = spider
    assert crawler.stats is not None
    with caplog.at_level(logging.DEBUG, logger="crawler.spiders.base"):
        made = asyncio.run(spider._accept(None, b"skip-none"))  # type: ignore[arg-type]
    assert made == []
    assert crawler.stats.get_value("seeds/skipped") == 1
    assert "make_request_from_data made no request of seed b'skip-none'" in caplog.text
    (request,) = asyncio.run(spider._accept(None, b"http://shop.test/1"))  # type: ignore[arg-type]
    assert isinstance(request, Request)
    assert crawler.stats.get_value("seeds/skipped") == 1


class Latin(RedisSpider):
    name = "latin_seeds"
    redis_encoding = "latin-1"


def test_crawler_seed_writes_seeds_in_the_spider_s_encoding(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The command checked and pushed UTF-8 whatever REDIS_ENCODING said: a node reading
    latin-1 then fetched /echo?q=caf%C3%83%C2%A9 for café. A seed that encoding cannot
    write is invalid (not pushed)."""
    checker = SeedChecker(Latin, SETTINGS, redis_url)
    reports = check(checker, redis_client, ["http://shop.test/?q=café", "http://shop.test/€"])
    assert [report.outcome for report in reports] == [Outcome.NEW, Outcome.INVALID]
    assert reports[0].urls == ["http://shop.test/?q=caf%C3%A9"]  # as the node makes it
    assert reports[1].reason == "encoding"
    assert "latin-1" in reports[1].error
    assert to_push(reports) == ["http://shop.test/?q=café".encode("latin-1")]
