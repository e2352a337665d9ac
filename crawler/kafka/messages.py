"""Encode one item as a Kafka message.

Value: UTF-8 JSON from orjson (non-ASCII kept as is). Key: the item's
fingerprint, ``sha1(item_type + "\\n" + canonical url)`` in hex, so consumers
can deduplicate and compaction keeps the latest; items without ``url`` have no
key. The canonical URL lowercases scheme and host, sorts the query parameters
and drops the fragment. Headers: ``spider``, ``item_type``, ``schema_version``, ``node_id``,
``crawl_id``.
Timestamp: the item's ``crawled_at`` in milliseconds, else now.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson


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


def item_key(item_type: str, url: str) -> bytes:
    digest = hashlib.sha1(f"{item_type}\n{canonical_url(url)}".encode())
    return digest.hexdigest().encode("ascii")


def _timestamp_ms(value: object) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(time.time() * 1000)


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
    try:
        value = orjson.dumps(fields)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise UnencodableItem(str(exc)) from exc
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
