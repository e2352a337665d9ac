"""Typed reads of settings, as Scrapy reads them, whose errors name the setting.

``get_float`` and ``get_bool`` are Scrapy's ``getfloat`` and ``getbool``, except that a value
they cannot convert (``-s NAME=abc``) raises ``ValueError`` naming the setting and the value,
not only the value (``get_float`` refuses NaN and infinity too). ``get_int`` takes a whole
number however written (``3``, ``3.0``, ``"3"``) and refuses a fraction or a bool, which
Scrapy's ``getint`` rounds down (2.7 is 2, True is 1), the same way; ``get_list`` refuses a
single value that is not text (``429``), where Scrapy's ``getlist`` raises a bare TypeError.

``-s NAME=VALUE`` and the environment give strings. Scrapy's ``getlist`` splits
a string on commas (``429,503``); a string that is a JSON array
(``'["builtin","/x"]'``) is read as that array here, which Scrapy's ``getlist``
would split into broken pieces. Every element is then converted, and a bad
one raises ``ValueError`` naming the setting and the value.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import orjson

T = TypeVar("T")


class ListSettings(Protocol):
    """The part of Scrapy's ``BaseSettings`` read here."""

    def get(self, name: str, default: Any = None) -> Any: ...
    def getlist(self, name: str, default: list[Any] | None = None) -> list[Any]: ...
    def getint(self, name: str, default: int = 0) -> int: ...
    def getfloat(self, name: str, default: float = 0.0) -> float: ...
    def getbool(self, name: str, default: bool = False) -> bool: ...


def whole_number(value: Any) -> int:
    """``value`` if it is an int, or a float or text holding a whole number (``3``, ``"2.0"``);
    TypeError or ValueError for anything else: a bool, a fraction (Scrapy's ``getint`` rounds
    2.7 down to 2 and reads True as 1, without a word)."""
    if isinstance(value, bool):
        raise TypeError(f"{value!r} is a bool, not a number")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return int(value.strip())
        value = float(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(f"{value!r} is not a whole number")


def int_value(name: str, value: Any) -> int:
    """``whole_number(value)``, its error naming the setting ``name`` and the value as given."""
    try:
        return whole_number(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not an integer") from None


def get_int(settings: ListSettings, name: str, default: int = 0) -> int:
    return int_value(name, settings.get(name, default))


def get_float(settings: ListSettings, name: str, default: float = 0.0) -> float:
    return float_value(name, settings.get(name, default))


def float_value(name: str, value: Any) -> float:
    """``value`` read as Scrapy's ``getfloat`` reads it, its error naming the setting ``name``;
    NaN and infinity are refused too (NaN passes every range check, each comparison being
    false, and neither is a duration, a rate or a size)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} is not a number") from None
    return finite(name, value, number)


def finite(name: str, given: object, value: float) -> float:
    """``value``, read from the setting ``name`` given as ``given``, if it is finite."""
    if not math.isfinite(value):
        raise ValueError(f"{name}={given!r} is not a finite number")
    return value


def get_bool(settings: ListSettings, name: str, default: bool = False) -> bool:
    try:
        return settings.getbool(name, default)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name}={settings.get(name)!r} is not a boolean (True/False, true/false or 1/0)"
        ) from None


def _json(name: str, value: str, kind: type[T], what: str) -> T:
    """``value`` read as JSON, which must be a ``kind`` (``what``: "array" or "object")."""
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{name}={value!r} is not a JSON {what}: {exc}") from exc
    if not isinstance(parsed, kind):
        raise ValueError(f"{name}={value!r} must be a JSON {what}")
    return parsed


def get_list(settings: ListSettings, name: str) -> list[Any]:
    value = settings.get(name)
    if isinstance(value, str) and value.strip().startswith("["):
        return _json(name, value, list, "array")
    if (isinstance(value, str) and value.strip().startswith("{")) or isinstance(value, Mapping):
        raise ValueError(f"{name}={value!r} must be a list: a JSON array or comma-separated values")
    if value is not None and not isinstance(value, str | list | tuple | set | frozenset):
        raise ValueError(f"{name}={value!r} must be a list: a JSON array or comma-separated values")
    return [item.strip() if isinstance(item, str) else item for item in settings.getlist(name)]


def dict_value(name: str, value: Any) -> dict[str, Any]:
    """A dict setting's value, given as a dict or as the text of a JSON object (``-s``, the
    environment, the ``crawler`` CLI's settings)."""
    if isinstance(value, str):
        return _json(name, value, dict, "object") if value.strip() else {}
    if value and not isinstance(value, Mapping):
        raise ValueError(f"{name}={value!r} is not a JSON object")
    return dict(value or {})


def get_dict(settings: ListSettings, name: str) -> dict[str, Any]:
    """``settings.getdict`` whose errors name the setting and its value."""
    return dict_value(name, settings.get(name))


def get_typed_list(
    settings: ListSettings, name: str, convert: Callable[[Any], T], expected: str
) -> list[T]:
    """``get_list`` with every element converted by ``convert`` (``expected`` names the
    element type in the error)."""
    values = get_list(settings, name)
    try:
        return [convert(item) for item in values if not (isinstance(item, str) and not item)]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}={settings.get(name)!r} must be a list of {expected}") from exc


def status_code(value: Any) -> int:
    code = whole_number(value)
    if not 100 <= code <= 599:
        raise ValueError(f"{code} is not an HTTP status")
    return code


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not a string")
    return value.strip()


def component_path(value: object) -> str:
    """The import path of a component setting's value: a string as given, a class by the name
    its module gives it (Scrapy's queue classes are made by a factory, whose qualified name
    would be ``_scrapy_non_serialization_queue.<locals>.ScrapyRequestQueue``)."""
    if isinstance(value, str):
        return value
    module = getattr(value, "__module__", "")
    named = vars(sys.modules[module]) if module in sys.modules else {}
    name = next((key for key, found in named.items() if found is value), None)
    return f"{module}.{name or getattr(value, '__qualname__', repr(value))}"
