"""JSON Schemas of item types (``crawler/schemas/<item_type>.json``), no Scrapy imports.

Items are validated as consumers will see them: the JSON that goes to Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

BUILTIN = "builtin"  # the schemas shipped in crawler/schemas


class SchemaRegistry:
    def __init__(self, directories: Iterable[str]) -> None:
        self._validators: dict[str, Draft202012Validator] = {}
        for directory in directories:
            for path in self._schema_files(directory):
                schema = orjson.loads(path.read_bytes())
                Draft202012Validator.check_schema(schema)
                self._validators[path.stem] = Draft202012Validator(schema)

    @staticmethod
    def _schema_files(directory: str) -> list[Path]:
        if directory == BUILTIN:
            root = resources.files("crawler.schemas")
            return sorted(
                Path(str(entry)) for entry in root.iterdir() if entry.name.endswith(".json")
            )
        return sorted(Path(directory).glob("*.json"))

    def __contains__(self, item_type: str) -> bool:
        return item_type in self._validators

    def error(self, item_type: str, document: Any) -> str | None:
        """``None`` when valid (or no schema); else ``"<json path>: <message>"``."""
        validator = self._validators.get(item_type)
        if validator is None:
            return None
        found = best_match(validator.iter_errors(document))
        if found is None:
            return None
        return f"{found.json_path}: {found.message}"
