"""JSON Schemas of items: a built-in schema checks only the project's class it was written for."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from crawler.items import PageItem
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
