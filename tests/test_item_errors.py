"""An item a pipeline raised on (not ``DropItem``) is lost, as in Scrapy, which only logs it:
here it is counted by exception, added to the crawl's ledger and shown by ``crawler status``,
so a crawl that lost items to a broken pipeline does not look complete."""

from __future__ import annotations

import redis
from scrapy import Spider, signals
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from crawler.cli.status import frontier_status
from crawler.cli.status_text import render
from crawler.extensions.item_errors import ItemErrors
from crawler.extensions.ledger_layout import LedgerKeys, ledger_fields
from tests.test_operations import status_with_nothing_else


class Shop(Spider):
    name = "shop"


def test_an_item_a_pipeline_raised_on_is_counted_by_exception() -> None:
    crawler = get_crawler(Shop)
    extension = ItemErrors.from_crawler(crawler)  # noqa: F841 - signals hold it weakly
    assert crawler.stats is not None
    for error in (ValueError("bad price"), ValueError("bad name"), KeyError("sku")):
        crawler.signals.send_catch_log(
            signal=signals.item_error,
            item={"url": "http://shop.test/1"},
            response=None,
            spider=Shop(),
            failure=Failure(error),  # type: ignore[no-untyped-call]
        )
    stats = crawler.stats.get_stats()
    assert stats["pipeline/item_error/ValueError"] == 2
    assert stats["pipeline/item_error/KeyError"] == 1
    assert ledger_fields(stats)["items/errored"] == 3


def test_status_says_how_many_items_pipelines_lost(redis_client: redis.Redis) -> None:
    keys = LedgerKeys.for_crawl("pages", "c1")
    redis_client.hset(keys.total, mapping={"done": 10, "items/errored": 3})
    text = render(status_with_nothing_else(frontier_status(redis_client, "pages", "c1")))
    assert "items lost     3 (a pipeline raised: 'Error processing' in the node logs)" in text


def test_status_says_how_many_items_are_only_in_dead_letter_files(
    redis_client: redis.Redis,
) -> None:
    """Items too large for their topic and its DLQ are only in their node's file: status said
    "finished" and nothing of them (only --json's ledger had them, an audit)."""
    stats = {"kafka/dead_lettered_file": 20, "kafka/dead_lettered": 5}
    fields = ledger_fields(stats)
    assert (fields["items/dead_letter_file"], fields["items/dead_lettered"]) == (20, 25)
    keys = LedgerKeys.for_crawl("pages", "c1")
    redis_client.hset(keys.total, mapping={"done": 10, "items/dead_letter_file": 20})
    text = render(status_with_nothing_else(frontier_status(redis_client, "pages", "c1")))
    assert "  not in Kafka   20 items neither their topic nor its DLQ took, only in" in text
