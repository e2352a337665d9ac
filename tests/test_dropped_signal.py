"""``request_dropped`` for the shared dedup's drops reaches the user's handlers, and a record
that cannot be rebuilt never fails the frontier write that reported it."""

from __future__ import annotations

import logging

import pytest
from scrapy import Request, Spider, signals
from scrapy.utils.test import get_crawler

from crawler.frontier import codec
from crawler.frontier.dropped_signal import DroppedSignal


class Heard:
    def __init__(self) -> None:
        self.urls: list[str] = []

    def request_dropped(self, request: Request, spider: Spider) -> None:
        self.urls.append(request.url)


def rebuild(body: bytes) -> Request:
    url = codec.stored_url(body)
    if "broken" in url:
        raise RuntimeError("an item class of the user's refuses its fields")
    return Request(url)


def test_each_drop_is_sent_rebuilt_and_one_that_cannot_be_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    crawler = get_crawler(Spider)
    bodies = [codec.dumps({"url": f"http://shop.test/{path}"}) for path in ("a", "broken", "b")]
    dropped = DroppedSignal(crawler, rebuild)
    dropped(bodies)  # nobody listens: nothing rebuilt, nothing said
    assert caplog.records == []
    heard = Heard()
    crawler.signals.connect(heard.request_dropped, signal=signals.request_dropped)
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.dropped_signal"):
        dropped(bodies)
    assert heard.urls == ["http://shop.test/a", "http://shop.test/b"]
    (said,) = [record.getMessage() for record in caplog.records]
    assert said.startswith("request_dropped not sent for http://shop.test/broken: RuntimeError")
