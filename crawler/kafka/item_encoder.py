"""From an item to its Kafka message, or why it must be dead-lettered (no Scrapy imports).

``ItemEncoder.encode`` writes the item's JSON (``messages.item_json``), checks its class's
``schema_version`` and validates the JSON against the item type's schema, in that order:
the first failure is the dead letter's reason (``unencodable``, ``schema_version``,
``schema``). NaN/Infinity (values sent as null, keys as ``"NaN"``...) are counted and logged
once per item type.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson

from crawler.kafka.health import Count
from crawler.kafka.messages import (
    OutgoingMessage,
    UnencodableItem,
    declared,
    item_json,
    item_message,
    schema_version_error,
)
from crawler.kafka.schemas import SchemaRegistry, class_name, exact_json

logger = logging.getLogger(__name__)

MAX_DEAD_LETTER_REPR = 100_000


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: str  # unencodable, schema_version, schema: kafka/rejected/<reason>
    error: str
    message: OutgoingMessage  # the dead letter's value and headers


@dataclass(frozen=True, slots=True)
class MessageFields:
    spider: str
    topic: str
    item_type: str


class ItemEncoder:
    def __init__(self, schemas: SchemaRegistry, count: Count, node_id: str, crawl_id: str) -> None:
        self.schemas = schemas
        self._count = count
        self._node_id = node_id
        self._crawl_id = crawl_id
        self._said: set[tuple[str, str]] = set()  # (stat, item type) whose warning was logged

    def encode(
        self, item: object, fields: dict[str, Any], to: MessageFields
    ) -> OutgoingMessage | Rejected:
        try:
            encoded = item_json(fields)
        except UnencodableItem as exc:
            return Rejected("unencodable", str(exc), self._message(_repr(fields), fields, to, 1))
        version = declared(item, "schema_version", 1)
        message = self._message(encoded.value, fields, to, str(version))
        if error := schema_version_error(f"item class {type(item).__qualname__}", version):
            return Rejected("schema_version", error, message)
        document = exact_json(encoded.value) if encoded.big_ints else orjson.loads(encoded.value)
        if error := self.schemas.error(to.item_type, document, class_name(type(item))):
            return Rejected("schema", error, message)
        if encoded.nonfinite:
            self._nonfinite(to.item_type, encoded.nonfinite)
        if encoded.lone_surrogates:
            self._lone_surrogates(to.item_type)
        return message

    def not_an_item(self, value: object, to: MessageFields) -> Rejected:
        """What a spider or pipeline passed on that is no item (a str, a list, None: Scrapy's
        feeds refuse it too): dead-lettered ``unencodable``, its value its Python repr."""
        error = (
            f"a {type(value).__qualname__} is not an item (items are dicts, scrapy.Item, "
            "dataclass or attrs objects): yield one of those, or return one from the pipeline "
            "that made it"
        )
        return Rejected("unencodable", error, self._message(_repr(value), {}, to, 1))

    def _message(
        self, value: bytes, fields: dict[str, Any], to: MessageFields, version: int | str
    ) -> OutgoingMessage:
        return item_message(
            value,
            fields,
            topic=to.topic,
            item_type=to.item_type,
            schema_version=version,
            spider=to.spider,
            node_id=self._node_id,
            crawl_id=self._crawl_id,
        )

    def _said_once(self, stat: str, item_type: str, warning: str, *args: object) -> None:
        """Count ``stat``; log ``warning`` (about ``item_type``, then ``args``) the first time
        for each item type."""
        self._count(stat, 1)
        if (stat, item_type) not in self._said:
            self._said.add((stat, item_type))
            logger.warning(warning, item_type, *args)

    def _nonfinite(self, item_type: str, paths: tuple[str, ...]) -> None:
        """NaN/Infinity (JSON has no such numbers)."""
        self._said_once(
            "kafka/coerced/nonfinite_float",
            item_type,
            "Item of type %s has NaN or Infinity at %s, which JSON has no numbers for: sent as "
            'null (as "NaN", "Infinity" or "-Infinity" where a dict key, as Scrapy\'s feeds '
            "write them). Send None or a string if that is not what consumers should see "
            "(further items are only counted in kafka/coerced/nonfinite_float)",
            ", ".join(paths),
        )

    def _lone_surrogates(self, item_type: str) -> None:
        """Text that is no UTF-8."""
        self._said_once(
            "kafka/coerced/lone_surrogate",
            item_type,
            "Item of type %s has text with a lone surrogate (half of a UTF-16 pair, such as an "
            "emoji an API cut in two), which UTF-8 cannot hold and many JSON readers refuse as "
            "an escape: sent as U+FFFD, the replacement character (further items are only "
            "counted in kafka/coerced/lone_surrogate)",
        )


def _repr(value: object) -> bytes:
    """An ``unencodable`` dead letter's value: the item's (its fields') Python repr (cut), or
    why there is none (an integer of more than 4,300 digits has no text)."""
    try:
        text = repr(value)[:MAX_DEAD_LETTER_REPR]
    except ValueError as exc:
        text = f"<no repr: {exc}>"
    return text.encode("utf-8", "backslashreplace")
