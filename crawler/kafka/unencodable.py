"""Where an item JSON cannot hold is, in words an operator acts on (no Scrapy imports).

orjson and Python's ``json`` say why they refuse an item without saying where: ``Dict key must
a type serializable with OPT_NON_STR_KEYS`` for a tuple key, ``maximum recursion depth exceeded``
for an item that contains itself, ``Type is not JSON serializable: bytes`` (audits read these in
dead-letter records). ``where_unencodable`` walks the item for the first such place: the reason a
dead-letter record carries.
"""

from __future__ import annotations

import datetime
import enum
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

# What an item's dict keys may be: orjson writes these with OPT_NON_STR_KEYS.
KEY_TYPES = (str, int, float, bool, type(None), datetime.date, datetime.time, uuid.UUID, enum.Enum)
LONGEST_INT_BITS = 14_284  # about 4,300 digits: Python writes no longer integer as text
# Leaves the item encoder writes whatever they hold (a long integer as its digits, a lone
# surrogate replaced): the others are tried with ``encodes``.
PLAIN = (str, int, float, bool, type(None))
Encodes = Callable[[Any], object]  # raises TypeError (or a subclass) for what it cannot write


def where_unencodable(fields: Mapping[Any, Any], encodes: Encodes) -> str | None:
    """The first place in ``fields`` JSON cannot hold (a value that contains itself, a key
    that is not text or a number, a value of a type ``encodes`` refuses), as ``$.path``; None
    when none is found."""
    try:
        return _find(fields, "$", frozenset(), encodes)
    except (RecursionError, ValueError):  # too deep, or a key of 4,300+ digits: the encoder's own
        return None  # reason stands


def _children(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield f"{path}.{str(key)[:100]}", item
    elif isinstance(value, list | tuple | set):  # as the encoder widens them (not frozenset)
        for index, item in enumerate(value):
            yield f"{path}[{index}]", item


def _bad_key(key: Any, path: str) -> str | None:
    if isinstance(key, int) and key.bit_length() > LONGEST_INT_BITS:
        return f"{path} has a key of more than 4,300 digits (Python writes none as text)"
    if not isinstance(key, KEY_TYPES):
        kind = type(key).__name__
        return f"{path} has a key {key!r} of type {kind} (JSON keys are text: make it a str)"
    return None


def _unwritable(value: Any, path: str, encodes: Encodes) -> str | None:
    if isinstance(value, PLAIN):
        return None
    try:
        encodes(value)
    except TypeError:
        kind = type(value).__name__
        hint = "decode it to text" if isinstance(value, bytes | bytearray) else "make it data"
        return (
            f"{path} is of type {kind}, which JSON cannot hold ({hint}: text, numbers, lists, "
            "dicts)"
        )
    return None


def _find(value: Any, path: str, outer: frozenset[int], encodes: Encodes) -> str | None:
    if isinstance(value, int) and value.bit_length() > LONGEST_INT_BITS:
        return f"{path} is an integer of more than 4,300 digits (Python writes none as text)"
    if not isinstance(value, Mapping | list | tuple | set):
        return _unwritable(value, path, encodes)
    if id(value) in outer:
        return f"{path} is a {type(value).__name__} that contains itself (JSON cannot hold it)"
    keys = value if isinstance(value, Mapping) else ()
    if (bad := next(filter(None, (_bad_key(key, path) for key in keys)), None)) is not None:
        return bad
    inner = outer | {id(value)}
    for child_path, child in _children(value, path):
        if (found := _find(child, child_path, inner, encodes)) is not None:
            return found
    return None
