"""JSON Schemas of item types (``crawler/schemas/<item_type>.json``), no Scrapy imports.

Items are validated as consumers will see them: the JSON that goes to Kafka.
Schemas are compiled once (fastjsonschema) so validation costs microseconds.

A built-in schema checks only the project's item class it was written for
(``BUILTIN_ITEM_CLASSES``): a user's class of the same ``item_type`` (a ``Page``
is ``page``) is not checked against it. A schema of the user's folders checks
every class of its item type. Of two schemas of one item type, the later
folder's replaces the earlier's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

import fastjsonschema

BUILTIN = "builtin"  # the schemas shipped in crawler/schemas

# item_type of each built-in schema -> the project's item class it was written for
BUILTIN_ITEM_CLASSES = {
    "page": "crawler.items.PageItem",
    "zhihu_comment": "crawler.zhihu.items.ZhihuCommentItem",
    "zhihu_content": "crawler.zhihu.items.ZhihuContentItem",
    "zhihu_creator": "crawler.zhihu.items.ZhihuCreatorItem",
    "zhihu_list": "crawler.zhihu.items.ZhihuListItem",
    "zhihu_question": "crawler.zhihu.items.ZhihuQuestionItem",
    "zhihu_unparsed": "crawler.zhihu.items.ZhihuUnparsedItem",
}


def exact_json(data: bytes) -> Any:
    """JSON ``data`` parsed with every integer exact: orjson reads those beyond 64 bits as
    floats (``2**70 + 1`` as ``2**70``), which a schema's bounds compare wrongly. The stdlib's
    parser, slower than orjson's: for what may hold such integers only. Raises ``ValueError``
    when ``data`` is not JSON (``NaN`` and ``Infinity`` included, as orjson does)."""
    return json.loads(data, parse_constant=_not_json)


def _not_json(constant: str) -> NoReturn:
    raise ValueError(f"{constant} is not JSON")


def class_name(cls: type) -> str:
    """``module.QualifiedName``: how ``BUILTIN_ITEM_CLASSES`` and dead letters name a class."""
    return f"{cls.__module__}.{cls.__qualname__}"


class SchemaRegistry:
    def __init__(self, directories: Iterable[str]) -> None:
        self._validators: dict[str, Callable[[Any], Any]] = {}
        self._owners: dict[str, str] = {}  # item_type -> the only class its schema checks
        for directory in directories:
            for path in self._schema_files(directory):
                try:
                    validator = fastjsonschema.compile(exact_json(path.read_bytes()))
                except (fastjsonschema.JsonSchemaDefinitionException, ValueError) as e:
                    raise ValueError(f"ITEM_SCHEMA_DIRS: {path} is not a valid schema: {e}") from e
                self._validators[path.stem] = validator
                self._owners.pop(path.stem, None)
                if directory == BUILTIN and path.stem in BUILTIN_ITEM_CLASSES:
                    self._owners[path.stem] = BUILTIN_ITEM_CLASSES[path.stem]

    @staticmethod
    def _schema_files(directory: str) -> list[Path]:
        if directory == BUILTIN:
            entries = [Path(str(entry)) for entry in resources.files("crawler.schemas").iterdir()]
            return sorted(path for path in entries if path.suffix == ".json")
        return sorted(Path(directory).glob("*.json"))

    def item_types(self) -> list[str]:
        return sorted(self._validators)

    def error(self, item_type: str, document: Any, item_class: str | None = None) -> str | None:
        """``None`` when valid (or no schema checks ``item_class`` of ``item_type``; every one
        does when the class is not known); else ``"<json path>: <message>"``."""
        validator = self._validators.get(item_type)
        owner = self._owners.get(item_type)
        if validator is None or (owner is not None and item_class not in (None, owner)):
            return None
        try:
            validator(document)
        except fastjsonschema.JsonSchemaValueException as exc:
            path = "$" + "".join(
                f"[{part}]" if isinstance(part, int) else f".{part}" for part in exc.path[1:]
            )
            message = exc.message.removeprefix(f"{exc.name} ")
            return f"{path}: {message}"
        return None
