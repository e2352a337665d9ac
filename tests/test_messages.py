"""Kafka message encoding: UTF-8 JSON values, stable keys, headers, timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from crawler.kafka.messages import (
    OutgoingMessage,
    UnencodableItem,
    canonical_url,
    encode_item,
    item_key,
)

CRAWLED = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def _encode(fields: dict[Any, object]) -> OutgoingMessage:
    return encode_item(
        fields, topic="t", item_type="page", schema_version=1, spider="pages", node_id="n1"
    )


def test_value_is_utf8_json_with_non_ascii_kept() -> None:
    message = _encode({"url": "http://h/", "title": "知乎 😀 Ünï", "crawled_at": CRAWLED})
    assert "知乎 😀 Ünï".encode() in message.value
    assert orjson.loads(message.value)["crawled_at"] == "2026-11-29T12:00:00+00:00"
    assert message.timestamp_ms == int(CRAWLED.timestamp() * 1000)
    assert dict(message.headers) == {
        "spider": b"pages",
        "item_type": b"page",
        "schema_version": b"1",
        "node_id": b"n1",
        "crawl_id": b"",
    }


def test_canonical_url() -> None:
    assert canonical_url("HTTP://Example.COM:8080/A/b?z=1&a=2#frag") == (
        "http://example.com:8080/A/b?a=2&z=1"
    )
    assert canonical_url("https://h") == "https://h/"
    assert canonical_url("https://h?q=1") == "https://h/?q=1"
    assert canonical_url("mailto:x@y") == "mailto:x@y"


def test_key_is_stable_across_equivalent_urls_and_types_differ() -> None:
    assert item_key("page", "http://h/a?b=2&a=1") == item_key("page", "http://h/a?a=1&b=2")
    assert item_key("page", "http://h/a") != item_key("comment", "http://h/a")
    assert _encode({"title": "no url"}).key is None


@pytest.mark.parametrize(
    "fields",
    [{"url": "http://h/", "bad": "\ud800"}, {"url": "http://h/", "n": 2**70}, {1: "x"}],
)
def test_unencodable_items_raise_a_clear_error(fields: dict[Any, object]) -> None:
    with pytest.raises(UnencodableItem):
        _encode(fields)
