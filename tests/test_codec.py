"""The scheduler's JSON request codec: round trips, never pickle, clear errors."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.utils.request import request_from_dict

from crawler.frontier import codec
from crawler.spiders.pages import PagesSpider


def test_request_round_trip_keeps_bytes_text_and_callback() -> None:
    spider = PagesSpider()
    request = Request(
        "http://h/页面?q=1",
        callback=spider.parse,
        headers={"X-Bin": b"\xff\x00", "Accept": "text/html"},
        body=b"\x00\x01\xfe",
        meta={"crawler_scope": "h", "depth": 2, "tags": ["中文", "😀"]},
        priority=7,
        cb_kwargs={"n": 1},
    )
    data = codec.dumps(request.to_dict(spider=spider))
    assert data.startswith(b"{")  # JSON, not pickle
    restored = request_from_dict(codec.loads(data), spider=spider)
    assert restored.url == request.url
    assert restored.body == request.body
    assert restored.headers.getlist("X-Bin") == [b"\xff\x00"]
    assert restored.headers.getlist("Accept") == [b"text/html"]
    assert restored.meta == request.meta
    assert restored.priority == 7
    assert restored.cb_kwargs == {"n": 1}
    assert restored.callback == spider.parse


def test_unserializable_meta_names_the_request_and_key() -> None:
    request = Request("http://h/x", meta={"fine": 1, "socket": object()})
    with pytest.raises(codec.UnserializableRequestError, match=r"'http://h/x'.*meta key 'socket'"):
        codec.dumps(request.to_dict())


def test_loads_rejects_non_objects() -> None:
    with pytest.raises(ValueError, match="not an object"):
        codec.loads(b"[1, 2]")
