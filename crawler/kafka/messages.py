"""Encode one item as a Kafka message.

Value: UTF-8 JSON from orjson (non-ASCII kept as is) of what Scrapy's JSON feed exporter
(``ScrapyJSONEncoder``) writes: ``Decimal`` as a string, ``set`` as a list, dates and times
as ISO 8601 (naive datetimes without an offset, as Scrapy writes them), nested items as
objects (a dataclass's fields, as ``ItemAdapter`` gives them), non-string dict keys as strings
(of any size, NaN and Infinity too), integers of any size as numbers, float subclasses (numpy's)
as floats, items nested deeper than orjson goes (254 levels) through Python's ``json``. NaN and
Infinity values, which Scrapy writes as the invalid tokens ``NaN``/``Infinity``, become ``null``
(reported in ``ItemJson.nonfinite``, as are such keys).
Key: ``sha1(item_type + "\\n" + canonical url)`` of the item's ``url`` field in hex, so
consumers can deduplicate and compaction keeps the latest; items without ``url`` have no key
(items of one page sharing theirs are said: ``crawler.pipelines.shared_keys``). The canonical
URL lowercases scheme and host, sorts the query parameters and drops the fragment. Headers:
``spider``, ``item_type``, ``schema_version``, ``node_id``, ``crawl_id``.
Timestamp: the item's ``crawled_at`` in milliseconds, else now.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

import orjson
from itemadapter import ItemAdapter, is_item

from crawler.kafka.unencodable import where_unencodable


class UnencodableItem(ValueError):
    """The item cannot be written as JSON (reason in the message)."""


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    topic: str
    key: bytes | None
    value: bytes
    headers: list[tuple[str, str | bytes | None]]
    timestamp_ms: int  # 0: the producer's clock
    partition: int = -1  # -1: the partitioner's choice (by key)

    def header(self, name: str) -> str | None:
        """The first header ``name`` as text (``None``: there is none, or it has no value)."""
        for key, value in self.headers:
            if key == name:
                return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        return None


# In a str every surrogate is a lone one, which UTF-8 cannot hold and many JSON readers refuse
# as an escape (orjson, serde_json: "no low surrogate"): sent as U+FFFD, as errors="replace" does
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"
URL_PARTS = re.compile(r"^([^:/?#]+)://([^/?#]*)([^?#]*)(?:\?([^#]*))?")


def canonical_url(url: str) -> str:
    match = URL_PARTS.match(url)
    if match is None:
        return url
    scheme, netloc, path, query = match.groups()
    canonical = f"{scheme.lower()}://{netloc.lower()}{path or '/'}"
    if query:
        canonical += "?" + "&".join(sorted(query.split("&")))
    return canonical


def declared(item: Any, name: str, default: object) -> object:
    """``name`` (``item_type``, ``schema_version``) as the item's class says it (an attribute
    or property), else ``default``; never the item's data: a dataclass's or attrs class's
    field of that name (whose default is a class attribute too) is sent in the value."""
    if is_item(item) and name in ItemAdapter(item).field_names():
        return default
    return getattr(item, name, default)


def item_type_of(item: Any) -> str:
    """The item's type: its class's ``item_type``, else its lowercased class name."""
    return str(declared(item, "item_type", type(item).__name__.lower()))


def item_key(item_type: str, url: str) -> bytes:
    # surrogatepass: a url with a lone surrogate (U+FFFD in its JSON) keys as it was
    digest = hashlib.sha1(f"{item_type}\n{canonical_url(url)}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest().encode("ascii")


AHEAD_MS = 60_000  # brokers refuse timestamps far ahead (log.message.timestamp.after.max.ms)


def _timestamp_ms(value: object) -> int:
    """``crawled_at`` in milliseconds (a naive one is UTC, as ``datetime.utcnow()`` makes it);
    the send time when it is no datetime or outside what Kafka takes (before 1970, or more
    than a minute ahead of this clock)."""
    now = int(time.time() * 1000)
    if not isinstance(value, datetime):
        return now
    moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    crawled = int(moment.timestamp() * 1000)
    return crawled if 0 <= crawled <= now + AHEAD_MS else now


# {1: "a"} -> {"1": "a"}, as json.dumps writes it; dataclasses and dates through ``_default``,
# as Scrapy writes them: orjson's own leave out a dataclass's ``_`` fields and take attributes
# that are no fields, and round an offset with seconds to minutes.
JSON_OPTIONS = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
)
INT64_MIN, UINT64_END = -(2**63), 2**64  # orjson writes the integers from one to below the other


def _beyond_64_bits(value: int) -> bool:
    """An integer orjson does not write (compared, never ``in range(...)``, which walks the
    whole range for an ``int`` subclass such as ``IntEnum``: a node hung on ``HTTPStatus``)."""
    return not INT64_MIN <= value < UINT64_END


@dataclass(frozen=True, slots=True)
class ItemJson:
    value: bytes
    nonfinite: tuple[str, ...]  # JSON paths of NaN/Infinity floats: values null, keys "NaN"...
    big_ints: bool = False  # orjson refused the fields as they were: integers beyond 64 bits?
    lone_surrogates: bool = False  # text that was no UTF-8: its lone surrogates made U+FFFD


@cache
def _scrapy_default() -> Any:
    """``ScrapyJSONEncoder.default``: what Scrapy's feeds write for what JSON has no type for
    (imported at first use: the ``crawler`` commands load this module without Scrapy)."""
    from scrapy.utils.serialize import ScrapyJSONEncoder  # noqa: PLC0415 - Scrapy only here

    return ScrapyJSONEncoder().default


def _default(value: Any) -> Any:
    if isinstance(value, float):  # a subclass (numpy.float64): orjson writes only float itself
        return float(value)
    return _scrapy_default()(value)


def _encodes(value: Any) -> bytes:
    """One value as the item's JSON writes it (``orjson.JSONEncodeError`` is a TypeError)."""
    return orjson.dumps(value, default=_default, option=JSON_OPTIONS)


def item_json(fields: Mapping[Any, Any]) -> ItemJson:
    """The item's JSON value; raises ``UnencodableItem`` when Scrapy could not write it either."""
    try:
        value = orjson.dumps(fields, default=_default, option=JSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError):
        # What orjson refuses but Scrapy writes: integers beyond 64 bits, deep nesting.
        nonfinite: list[str] = []
        try:
            widened = _widened(fields, "$", nonfinite)
        except (ValueError, RecursionError) as refused:  # over 4,300 digits, for str(); deep
            reason = where_unencodable(fields, _encodes) or str(refused) or type(refused).__name__
            raise UnencodableItem(reason) from refused
        try:
            value = orjson.dumps(widened, default=_default, option=JSON_OPTIONS)
        except (TypeError, orjson.JSONEncodeError) as refused:
            text = _python_json(_widened(fields, "$", [], fragments=False), refused)
            replaced = LONE_SURROGATE.sub(REPLACEMENT, text)
            return ItemJson(replaced.encode("utf-8"), tuple(nonfinite), True, replaced != text)
        return ItemJson(value, tuple(nonfinite), big_ints=True)
    if b"null" not in value:  # orjson writes non-finite floats as null, without a word
        return ItemJson(value, ())
    nonfinite = []
    widened = _widened(fields, "$", nonfinite)
    if nonfinite:  # the same JSON, but for NaN/Infinity keys, which orjson wrote as "null"
        value = orjson.dumps(widened, default=_default, option=JSON_OPTIONS)
    return ItemJson(value, tuple(nonfinite))


def _python_json(fields: Any, refused: Exception) -> str:
    """Python's own JSON of what orjson refuses but Scrapy's feed writes (``fields`` widened,
    without fragments): an item nested deeper than orjson goes (254 levels), text with a lone
    surrogate; raises ``UnencodableItem`` with orjson's reason when it cannot either."""
    try:
        return json.dumps(
            fields, default=_default, ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    except (TypeError, ValueError, RecursionError):
        raise UnencodableItem(where_unencodable(fields, _encodes) or str(refused)) from refused


def _widened(value: Any, path: str, nonfinite: list[str], *, fragments: bool = True) -> Any:
    """``value`` with what orjson cannot write in the form Scrapy writes it (integers beyond
    64 bits as fragments of their digits, unless ``fragments`` is off: Python's ``json``
    writes them), non-finite floats as None, their paths appended to ``nonfinite``."""
    if isinstance(value, float) and not math.isfinite(value):
        nonfinite.append(path)
        value = None
    elif isinstance(value, int) and not isinstance(value, bool) and _beyond_64_bits(value):
        value = orjson.Fragment(str(value).encode()) if fragments else value
    elif isinstance(value, Mapping):
        widened: dict[Any, Any] = {}
        for key, item in value.items():
            name = _widened_key(key, path, nonfinite)
            widened[name] = _widened(item, f"{path}.{name}", nonfinite, fragments=fragments)
        value = widened
    elif isinstance(value, list | tuple | set):
        value = [
            _widened(v, f"{path}[{i}]", nonfinite, fragments=fragments) for i, v in enumerate(value)
        ]
    elif is_item(value):
        # its fields as they are (ItemAdapter.asdict() rebuilds tuples by class: a namedtuple
        # refuses)
        value = _widened(item_fields(value), path, nonfinite, fragments=fragments)
    return value


def item_fields(item: Any) -> dict[str, Any]:
    """An item's fields, its values as they are (Scrapy's feed exporters read them so)."""
    return dict(ItemAdapter(item).items())


def _widened_key(key: Any, path: str, nonfinite: list[str]) -> Any:
    """A dict key orjson refuses or writes otherwise, as Scrapy writes it: an integer beyond 64
    bits as its digits, NaN and ±Infinity (orjson: ``"null"``) as ``"NaN"``, ``"Infinity"``,
    ``"-Infinity"``, their paths appended to ``nonfinite``."""
    if isinstance(key, float) and not math.isfinite(key):
        name = "NaN" if math.isnan(key) else "Infinity" if key > 0 else "-Infinity"
        nonfinite.append(f"{path}.{name}")
        return name
    if isinstance(key, int) and not isinstance(key, bool) and _beyond_64_bits(key):
        return str(key)
    return key


def schema_version_error(owner: str, version: object) -> str | None:
    """``None`` when ``version`` is a schema version: an integer >= 0, or its digits."""
    if isinstance(version, int) and not isinstance(version, bool) and version >= 0:
        return None
    if isinstance(version, str) and version.isascii() and version.isdigit():
        return None
    return (
        f"{owner} schema_version is {version!r}, not an integer: make it an int such as 2 "
        "(consumers read the schema_version header as a number)"
    )


def encode_item(
    fields: Mapping[str, Any],
    *,
    topic: str,
    item_type: str,
    schema_version: int,
    spider: str,
    node_id: str,
    crawl_id: str = "",
) -> OutgoingMessage:
    return item_message(
        item_json(fields).value,
        fields,
        topic=topic,
        item_type=item_type,
        schema_version=schema_version,
        spider=spider,
        node_id=node_id,
        crawl_id=crawl_id,
    )


def item_message(
    value: bytes,
    fields: Mapping[str, Any],
    *,
    topic: str,
    item_type: str,
    schema_version: int | str,
    spider: str,
    node_id: str,
    crawl_id: str = "",
) -> OutgoingMessage:
    """The message of an item whose JSON is ``value`` (key and timestamp from ``fields``)."""
    url = fields.get("url")
    return OutgoingMessage(
        topic=topic,
        key=item_key(item_type, url) if isinstance(url, str) else None,
        value=value,
        headers=[
            ("spider", spider.encode()),
            ("item_type", item_type.encode()),
            ("schema_version", str(schema_version).encode()),
            ("node_id", node_id.encode()),
            ("crawl_id", crawl_id.encode()),
        ],
        timestamp_ms=_timestamp_ms(fields.get("crawled_at")),
    )
