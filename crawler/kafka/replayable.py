"""Which dead letters can go back to their item topic (no Scrapy imports).

The items topic holds UTF-8 JSON objects that pass their schema, with an integer
``schema_version`` header. A dead letter is replayed only if it is such an item now:
``unencodable`` ones never are (their value is the item's Python repr), ``schema`` ones are
validated again against the current schemas (``ITEM_SCHEMA_DIRS``: after a fix of the
schema they pass).
"""

from __future__ import annotations

import orjson

from crawler.kafka.dead_letter_writer import REASON_HEADER
from crawler.kafka.messages import schema_version_error
from crawler.kafka.reader import ReceivedMessage
from crawler.kafka.schemas import SchemaRegistry, exact_json


def replay_refusal(letter: ReceivedMessage, schemas: SchemaRegistry) -> str | None:
    """Why ``letter`` cannot be replayed as an item, saying what to do; ``None``: it can."""
    headers = letter.headers
    if headers.get(REASON_HEADER) == b"unencodable":
        return (
            "its value is not JSON but the item's Python repr (the item could not be encoded): "
            "fix the spider; the item can only be dropped"
        )
    try:
        document = orjson.loads(letter.value)
    except orjson.JSONDecodeError:
        return "its value is not UTF-8 JSON: it can only be dropped"
    if not isinstance(document, dict):
        return "its value is not a JSON object: it can only be dropped"
    version = headers.get("schema_version", b"1").decode("utf-8", "replace")
    if schema_version_error("its", version) is not None:
        return (
            f"its schema_version header is {version!r}, not an integer: make the item class's "
            "schema_version an int; the item can only be dropped"
        )
    if headers.get(REASON_HEADER) == b"schema":
        item_type = headers.get("item_type", b"").decode("utf-8", "replace")
        if error := schemas.error(item_type, exact_json(letter.value)):
            return (
                f"it still fails its schema ({error}): fix the schema (ITEM_SCHEMA_DIRS) and "
                "replay again, or drop it"
            )
    return None
