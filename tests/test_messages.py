"""Kafka message encoding: UTF-8 JSON values, stable keys, headers, timestamps."""

from __future__ import annotations

import json
import re
import time as clock
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from enum import Enum
from http import HTTPStatus
from typing import Any, ClassVar
from uuid import UUID

import attrs
import orjson
import pytest
from itemadapter import ItemAdapter
from scrapy.utils.serialize import ScrapyJSONEncoder

from crawler.kafka.item_encoder import ItemEncoder, MessageFields, Rejected
from crawler.kafka.messages import (
    OutgoingMessage,
    UnencodableItem,
    canonical_url,
    encode_item,
    item_json,
    item_key,
    item_type_of,
    schema_version_error,
)
from crawler.kafka.schemas import SchemaRegistry

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
    [
        {"url": "http://h/", "obj": object()},
        {(1, 2): "x"},
        {"url": "http://h/", "n": 10**5000},  # more digits than str() writes (Scrapy neither)
        {"url": "http://h/", "m": {10**5000: "x"}},
    ],
)
def test_unencodable_items_raise_a_clear_error(fields: dict[Any, object]) -> None:
    with pytest.raises(UnencodableItem):
        _encode(fields)


def test_an_unencodable_item_s_reason_says_where_it_is() -> None:
    """A dead letter's reason was orjson's or Python's words, naming no field: ``Dict key must
    a type serializable with OPT_NON_STR_KEYS``, ``maximum recursion depth exceeded in
    comparison`` (an audit)."""
    looped: dict[str, Any] = {"url": "http://h/", "tags": ["a"]}
    looped["tags"].append(looped)
    with pytest.raises(UnencodableItem, match=re.escape("$.tags[1] is a dict that contains")):
        item_json(looped)
    with pytest.raises(UnencodableItem, match=re.escape("$.m has a key (1, 2) of type tuple")):
        item_json({"url": "http://h/", "m": {date(2020, 1, 1): 1, (1, 2): "x"}})
    with pytest.raises(UnencodableItem, match=re.escape("$.n is an integer of more than 4,300")):
        item_json({"url": "http://h/", "when": {date(2020, 1, 1): 1}, "n": 10**5000})
    # a value of a type JSON has no form for: the commonest case, which named no place either
    # (``Type is not JSON serializable: bytes``: an audit)
    with pytest.raises(UnencodableItem, match=re.escape("$.raw[1] is of type bytes")):
        item_json({"url": "http://h/", "n": 10**30, "raw": ["ok", b"\xff\x00raw"]})
    with pytest.raises(UnencodableItem, match=re.escape("$.m.k is of type object")):
        item_json({"url": "http://h/", "m": {"k": object()}})
    # a frozenset (Scrapy's feeds refuse it too) was walked as a list the encoder writes
    with pytest.raises(UnencodableItem, match=re.escape("$.v is of type frozenset")):
        item_json({"url": "http://h/", "v": frozenset([1])})


def test_an_integer_too_long_for_text_is_dead_lettered_unencodable() -> None:
    """Python writes no integer of more than 4,300 digits (``str``, ``repr``): the item and its
    dead letter's Python repr raised ``ValueError`` out of the pipeline."""
    encoder = ItemEncoder(SchemaRegistry([]), lambda _stat, _n: None, "n1", "")
    fields = {"url": "http://h/", "n": 10**5000}
    rejected = encoder.encode(object(), fields, MessageFields("s", "t", "x"))
    assert isinstance(rejected, Rejected)
    assert rejected.reason == "unencodable"
    assert (
        rejected.error == "$.n is an integer of more than 4,300 digits (Python writes none as text)"
    )
    assert rejected.message.value.startswith(b"<no repr: Exceeds the limit (4300 digits)")
    # keyed as its item would be: a dead-letter consumer matches it to its page
    assert rejected.message.key == item_key("x", "http://h/")


def test_lone_surrogates_are_sent_as_the_replacement_character() -> None:
    """A lone surrogate (a truncated emoji from a JSON API: ``json.loads`` makes one) is not
    UTF-8, and many JSON readers refuse it as an escape (orjson, serde_json): the item was
    dead-lettered unencodable (an audit). Now U+FFFD stands for it, the rest of the text is
    kept, and its url keys it as it was."""
    fields = {"url": "http://h/\udc80", "s": "\ud83d-cut 好", "m": {"k\udcff": ["\udfff"]}}
    counted: list[str] = []
    encoder = ItemEncoder(SchemaRegistry([]), lambda stat, _n: counted.append(stat), "n1", "")
    message = encoder.encode(object(), fields, MessageFields("s", "t", "x"))
    assert isinstance(message, OutgoingMessage)
    assert orjson.loads(message.value) == {
        "url": "http://h/\ufffd",
        "s": "\ufffd-cut 好",
        "m": {"k\ufffd": ["\ufffd"]},
    }
    assert message.key == item_key("x", "http://h/\udc80")
    assert counted == ["kafka/coerced/lone_surrogate"]


@dataclass
class Inner:
    n: int


@dataclass
class Offer:
    price: float
    _id: str

    def __post_init__(self) -> None:
        self.cache = "internal"  # an attribute, not a field: Scrapy's feed leaves it out


class Price(float):  # numpy.float64 is such a subclass
    pass


def _nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"v": [value]}
    return value


SCRAPY_ENCODABLE: list[object] = [
    {"offer": Offer(9.5, "sku-1")},
    [Offer(1.0, "a"), {"offer": Offer(2.0, "b")}],
    datetime(1900, 1, 1, tzinfo=timezone(timedelta(minutes=19, seconds=32))),
    time(1, 2, tzinfo=timezone(timedelta(seconds=-30))),
    Price(2.5),
    {"prices": [Price(1.5)], Price(3.5): 1},
    _nested(150),  # 300 levels: orjson writes 254 at most
    Decimal("1.10"),
    {1},
    2**70,
    -(2**70),
    [2**64, {"deep": 2**80}],
    {1: "a", None: "b", 2.5: "c"},
    date(2026, 11, 29),
    time(12, 30, tzinfo=UTC),
    datetime(2026, 11, 29, 12, 0),
    Inner(2**70),
    {"inner": Inner(1)},
    (1, "two"),
    {2**70: "a", -(2**70): "b", 2**64 - 1: "c"},
    {float("nan"): 1, float("inf"): 2, float("-inf"): 3, 2.5: 4},
    {"inner": Inner(1), 2**70: [Inner(2**70)]},
]


@pytest.mark.parametrize("value", SCRAPY_ENCODABLE, ids=lambda value: repr(value)[:60])
def test_what_scrapys_json_exporter_writes_is_sent_as_the_same_json(value: object) -> None:
    """Scrapy's JSON feed (``ScrapyJSONEncoder``) is the reference: same JSON, orjson's bytes."""
    fields = {"url": "http://h/", "v": value}
    expected = json.loads(ScrapyJSONEncoder(ensure_ascii=False).encode(fields))
    assert orjson.loads(_encode(fields).value) == expected


class Colour(Enum):
    RED = "red"


def test_values_scrapys_feed_refuses_that_orjson_writes_are_sent_as_it_writes_them() -> None:
    """As docs/kafka.md says: a UUID, an Enum member and a date key (Scrapy's feed refuses all
    three) are sent, not dead-lettered."""
    fields = {
        "url": "http://h/",
        "id": UUID(int=1),
        "colour": Colour.RED,
        "by_day": {date(2026, 1, 2): 1},
    }
    assert orjson.loads(_encode(fields).value) == {
        "url": "http://h/",
        "id": "00000000-0000-0000-0000-000000000001",
        "colour": "red",
        "by_day": {"2026-01-02": 1},
    }


def test_an_item_nested_deeper_than_orjson_goes_keeps_its_nan_report_and_big_ints() -> None:
    """Over 254 levels with a NaN: dead-lettered, where the rest are sent with null (a review);
    deeper than Python's recursion limit: unencodable, not a RecursionError."""
    deep = _nested(150)
    assert isinstance(deep, dict)
    encoded = item_json({"url": "http://h/", "deep": deep, "score": float("nan"), "big": 2**70})
    loaded = orjson.loads(encoded.value)
    assert (loaded["score"], loaded["big"], encoded.nonfinite) == (None, 2**70, ("$.score",))
    with pytest.raises(UnencodableItem):
        item_json({"url": "http://h/", "deep": _nested(5000)})


def test_an_int_subclass_beside_a_null_is_sent_at_once() -> None:
    """``{"status": HTTPStatus(200), "note": None}``: the check of integers beyond 64 bits
    walked 2**64 values for an int subclass, and every node that leased the page hung (an
    audit)."""
    encoded = item_json({"note": None, "status": HTTPStatus.OK, "by_status": {HTTPStatus.OK: 1}})
    assert orjson.loads(encoded.value) == {"note": None, "status": 200, "by_status": {"200": 1}}


def test_non_finite_floats_are_sent_as_null_and_reported() -> None:
    encoded = item_json({"url": "http://h/", "a": [1.5, float("nan")], "b": {"c": float("inf")}})
    assert orjson.loads(encoded.value) == {"url": "http://h/", "a": [1.5, None], "b": {"c": None}}
    assert encoded.nonfinite == ("$.a[1]", "$.b.c")
    assert item_json({"url": "http://h/", "title": None}).nonfinite == ()


def test_non_finite_float_keys_are_written_as_scrapy_writes_them_and_reported() -> None:
    """orjson writes such keys as ``"null"``: ``{nan: 1, inf: 2}`` lost one of its entries."""
    encoded = item_json({"url": "http://h/", "m": {float("nan"): 1, float("inf"): 2}})
    assert orjson.loads(encoded.value) == {"url": "http://h/", "m": {"NaN": 1, "Infinity": 2}}
    assert encoded.nonfinite == ("$.m.NaN", "$.m.Infinity")


@pytest.mark.parametrize("version", [1, 0, 12, "2"])
def test_schema_versions_are_integers_or_their_digits(version: object) -> None:
    assert schema_version_error("item class Page", version) is None


@pytest.mark.parametrize("version", ["v2", 1.5, True, -1, None, "²"])
def test_other_schema_versions_are_refused_saying_what_to_do(version: object) -> None:
    error = schema_version_error("item class Page", version)
    assert error is not None
    assert error.startswith(f"item class Page schema_version is {version!r}, not an integer")


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The node's local time zone is five hours behind UTC."""
    monkeypatch.setenv("TZ", "America/New_York")
    clock.tzset()
    yield
    monkeypatch.undo()
    clock.tzset()


@pytest.mark.usefixtures("new_york")
@pytest.mark.parametrize(
    ("crawled_at", "expected"),
    [
        (CRAWLED, int(CRAWLED.timestamp() * 1000)),
        (CRAWLED.replace(tzinfo=None), int(CRAWLED.timestamp() * 1000)),  # naive: UTC
        (datetime(1, 1, 1), None),  # before 1970: Kafka has no such timestamp
        (datetime(9999, 12, 31, tzinfo=UTC), None),  # ahead of now: brokers refuse it
        ("2026-11-29T12:00:00", None),
    ],
)
def test_the_timestamp_is_crawled_at_when_kafka_takes_it_else_the_send_time(
    crawled_at: object, expected: int | None
) -> None:
    before = int(clock.time() * 1000)
    timestamp = _encode({"url": "https://example.com/", "crawled_at": crawled_at}).timestamp_ms
    if expected is None:
        assert before <= timestamp <= int(clock.time() * 1000)
    else:
        assert timestamp == expected


@pytest.mark.usefixtures("new_york")
def test_a_naive_utc_crawl_time_is_not_read_as_local_time() -> None:
    """``datetime.utcnow()``-style values: read as local time they would be five hours ahead,
    past what brokers accept, and the item could never be sent."""
    naive_now = datetime.now(UTC).replace(tzinfo=None)
    timestamp = _encode({"url": "https://example.com/", "crawled_at": naive_now}).timestamp_ms
    assert abs(timestamp - clock.time() * 1000) < 5000


@dataclass
class Product:
    url: str
    item_type: str  # data: "book", "Blu-ray disc"
    schema_version: str  # data: "2.1"


@attrs.define
class Listing:
    url: str
    item_type: str = "dvd"
    schema_version: str = "3.0"


@dataclass
class Versioned:
    url: str
    item_type: ClassVar[str] = "versioned_page"
    schema_version: ClassVar[int] = 4


@pytest.mark.parametrize(
    "item", [Product("http://h/", "Blu-ray disc", "2.1"), Listing("http://h/")]
)
def test_a_data_field_named_like_the_item_metadata_is_data(item: Any) -> None:
    """A dataclass or attrs item whose fields are named ``item_type`` or ``schema_version``
    had its data read as the message's metadata: "2.1" dead-lettered (schema_version) with
    advice to change a class attribute it does not have, "Blu-ray disc" made a topic name
    Kafka refused, stopping the node (an audit: 40 of 81 items lost). Only the class says
    them; its data fields stay data, sent in the value."""
    encoder = ItemEncoder(SchemaRegistry([]), lambda _stat, _n: None, "n1", "")
    item_type = item_type_of(item)
    fields = dict(ItemAdapter(item).items())
    message = encoder.encode(item, fields, MessageFields("s", "t", item_type))
    assert isinstance(message, OutgoingMessage)
    assert item_type == type(item).__name__.lower()
    assert dict(message.headers)["schema_version"] == b"1"
    assert orjson.loads(message.value) == {
        "url": "http://h/",
        "item_type": item.item_type,
        "schema_version": item.schema_version,
    }


def test_a_class_attribute_names_the_item_metadata() -> None:
    item = Versioned("http://h/")
    encoder = ItemEncoder(SchemaRegistry([]), lambda _stat, _n: None, "n1", "")
    message = encoder.encode(item, {"url": item.url}, MessageFields("s", "t", item_type_of(item)))
    assert isinstance(message, OutgoingMessage)
    assert item_type_of(item) == "versioned_page"
    assert dict(message.headers)["schema_version"] == b"4"
