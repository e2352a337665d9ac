"""A node counts the requests of each download slot in its downloader, as Scrapy's signals say
(crawler.frontier.downloader_load)."""

from __future__ import annotations

from types import SimpleNamespace
from urllib.parse import urlsplit

from scrapy import Request, Spider, signals
from scrapy.pqueues import ScrapyPriorityQueue
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler.frontier.downloader_load import DownloaderLoad, downloader_aware


def test_requests_are_counted_by_slot_from_reaching_the_downloader_to_leaving_it() -> None:
    crawler = get_crawler(Spider)
    crawler.engine = SimpleNamespace(  # type: ignore[assignment]
        downloader=SimpleNamespace(get_slot_key=lambda request: urlsplit(request.url).netloc)
    )
    load = DownloaderLoad(crawler)
    spider = Spider("s")
    a1, a2, b1 = Request("http://a/1"), Request("http://a/2"), Request("http://b/1")
    for request in (a1, a2, b1):
        crawler.signals.send_catch_log(
            signals.request_reached_downloader, request=request, spider=spider
        )
    assert (load.of(Request("http://a/3")), load.of(b1), load.of(Request("http://c/"))) == (
        2,
        1,
        0,
    )
    for request in (a1, b1, b1):  # a request that left twice (or never came) counts once
        crawler.signals.send_catch_log(
            signals.request_left_downloader, request=request, spider=spider
        )
    assert (load.of(a2), load.of(b1)) == (1, 0)


def test_scrapys_default_queue_asks_for_it_and_strict_priority_order_does_not() -> None:
    """A review: ``SCHEDULER_PRIORITY_QUEUE=ScrapyPriorityQueue`` (strict priority order) was
    accepted and then overridden by the downloader-aware pick without a word."""
    assert downloader_aware(Settings())  # Scrapy's default: DownloaderAwarePriorityQueue
    assert not downloader_aware(Settings({"SCHEDULER_PRIORITY_QUEUE": ScrapyPriorityQueue}))
    assert not downloader_aware(
        Settings({"SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"})
    )
