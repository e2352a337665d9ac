"""Where an item JSON cannot hold is, in words an operator acts on (no Scrapy imports).

orjson and Python's ``json`` say why they refuse an item without saying where: ``Dict key must
a type serializable with OPT_NON_STR_KEYS`` for a tuple key, ``maximum recursion depth exceeded``
for an item that contains itself (an audit read both in dead-letter records). ``where_unencodable``
walks the item for the first such place: the reason a dead-letter record carries.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

KEY_TYPES = (str, int, float, bool, type(None))  # what a JSON object's key is written from


def where_unencodable(fields: Mapping[Any, Any]) -> str | None:
    """The first place in ``fields`` JSON cannot hold (a value that contains itself, a key
    that is not text or a number), as ``$.path``; None when none is found."""
    try:
        return _find(fields, "$", frozenset())
    except (RecursionError, ValueError):  # too deep, or a key of 4,300+ digits: the encoder's own
        return None  # reason stands


def _children(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield f"{path}.{key}", item
    elif isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            yield f"{path}[{index}]", item


def _find(value: Any, path: str, outer: frozenset[int]) -> str | None:
    if not isinstance(value, Mapping | list | tuple | set | frozenset):
        return None
    if id(value) in outer:
        return f"{path} is a {type(value).__name__} that contains itself (JSON cannot hold it)"
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, KEY_TYPES):
                return (
                    f"{path} has a key {key!r} of type {type(key).__name__} (JSON keys are text:"
                    " make it a str)"
                )
    inner = outer | {id(value)}
    for child_path, child in _children(value, path):
        if (found := _find(child, child_path, inner)) is not None:
            return found
    return None
