"""JSON Schemas of items: a built-in schema checks only the project's class it was written for."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from crawler.items import PageItem
from crawler.kafka.item_encoder import ItemEncoder, MessageFields
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.reader import ReceivedMessage
from crawler.kafka.replayable import replay_refusal
from crawler.kafka.schemas import BUILTIN, BUILTIN_ITEM_CLASSES, SchemaRegistry, class_name


@dataclass
class Page:
    url: str


def test_every_builtin_schema_names_the_project_class_it_was_written_for() -> None:
    registry = SchemaRegistry([BUILTIN])
    assert sorted(BUILTIN_ITEM_CLASSES) == sorted(registry.item_types())
    for item_type, qualified in BUILTIN_ITEM_CLASSES.items():
        module, _, name = qualified.rpartition(".")
        owner = getattr(importlib.import_module(module), name)
        assert owner.item_type == item_type
        assert class_name(owner) == qualified


def test_a_builtin_schema_checks_its_own_class_only() -> None:
    registry = SchemaRegistry([BUILTIN])
    mine = {"url": "http://h/"}
    assert registry.error("page", mine, class_name(Page)) is None
    error = registry.error("page", mine, class_name(PageItem))
    assert error is not None and error.startswith("$: must contain")
    # The class unknown (a dead letter written before dlq_item_class): every schema applies.
    assert registry.error("page", mine) == error
    item = PageItem("http://h/", 200, None, 0, datetime.now(UTC))
    assert (
        registry.error(
            "page",
            {
                **mine,
                "status": 200,
                "title": None,
                "depth": 0,
                "crawled_at": item.crawled_at.isoformat(),
            },
            class_name(PageItem),
        )
        is None
    )


def test_a_schema_of_the_users_folders_checks_every_class_of_its_item_type(tmp_path: Path) -> None:
    (tmp_path / "page.json").write_text('{"type": "object", "required": ["title"]}')
    registry = SchemaRegistry([BUILTIN, str(tmp_path)])
    assert (
        registry.error("page", {"url": "u"}, class_name(Page))
        == "$: must contain ['title'] properties"
    )
    assert registry.error("page", {"title": "t"}, class_name(PageItem)) is None


@dataclass
class Counted:
    url: str
    n: int


BIG = 2**70  # beyond 64 bits: orjson reads it as the float 1.1805916207174113e+21


@pytest.mark.parametrize(
    ("maximum", "n", "valid"), [(BIG, BIG + 1, False), (BIG + 1, BIG + 1, True)]
)
def test_integers_beyond_64_bits_are_validated_exactly(
    tmp_path: Path, maximum: int, n: int, valid: bool
) -> None:
    """Validated as floats, ``2**70 + 1`` passed a ``maximum`` of ``2**70`` (and failed one of
    ``2**70 + 1``): the item, its dead letter replayed and the schema are read exactly."""
    schema = {"type": "object", "properties": {"n": {"type": "integer", "maximum": maximum}}}
    (tmp_path / "counted.json").write_text(json.dumps(schema))
    registry = SchemaRegistry([str(tmp_path)])
    encoder = ItemEncoder(registry, lambda _stat, _n: None, "n1", "")
    encoded = encoder.encode(
        Counted("http://h/", n), {"url": "http://h/", "n": n}, MessageFields("s", "t", "counted")
    )
    assert isinstance(encoded, OutgoingMessage) is valid
    letter = ReceivedMessage(
        "t.dlq",
        0,
        0,
        None,
        b'{"url":"http://h/","n":%d}' % n,
        {"item_type": b"counted", "dlq_reason": b"schema"},
        0,
    )
    assert (replay_refusal(letter, registry) is None) is valid
