"""JSON Schemas of item types (``crawler/schemas/<item_type>.json``), no Scrapy imports.

Items are validated as consumers will see them: the JSON that goes to Kafka.
Schemas are compiled once (fastjsonschema) so validation costs microseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib import resources
from pathlib import Path
from typing import Any

import fastjsonschema
import orjson

BUILTIN = "builtin"  # the schemas shipped in crawler/schemas


class SchemaRegistry:
    def __init__(self, directories: Iterable[str]) -> None:
        self._validators: dict[str, Callable[[Any], Any]] = {}
        for directory in directories:
            for path in self._schema_files(directory):
                try:
                    validator = fastjsonschema.compile(orjson.loads(path.read_bytes()))
                except (fastjsonschema.JsonSchemaDefinitionException, orjson.JSONDecodeError) as e:
                    raise ValueError(f"ITEM_SCHEMA_DIRS: {path} is not a valid schema: {e}") from e
                self._validators[path.stem] = validator

    @staticmethod
    def _schema_files(directory: str) -> list[Path]:
        if directory == BUILTIN:
            entries = [Path(str(entry)) for entry in resources.files("crawler.schemas").iterdir()]
            return sorted(path for path in entries if path.suffix == ".json")
        return sorted(Path(directory).glob("*.json"))

    def __contains__(self, item_type: str) -> bool:
        return item_type in self._validators

    def error(self, item_type: str, document: Any) -> str | None:
        """``None`` when valid (or no schema); else ``"<json path>: <message>"``."""
        validator = self._validators.get(item_type)
        if validator is None:
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
