"""Items, page methods and other values in a request's meta or cb_kwargs, kept through the
frontier's JSON.

Scrapy's tutorials hand a half-filled item to the next callback in ``meta`` (or
``cb_kwargs``); Scrapy's disk queues and scrapy-redis pickle it. The frontier stores JSON,
never pickle, so an item (a ``scrapy.Item`` or a dataclass instance) is stored as
``{"$item": "<module>:<qualname>", "$fields": {...}}`` and comes back as an instance of its
class on any node that has loaded that class: nothing is imported because Redis names it
(the spider's modules import their item classes). Its field values are stored like any
other meta value (a tuple comes back a list).

A function or class (scrapy-playwright's ``playwright_page_init_callback``, a ``PageMethod``'s
function) is stored as ``{"$object": "<module>:<qualname>"}`` and found again like an item's
class; one that path does not find (a lambda, a local function, a bound method) cannot be
stored (``pack`` raises TypeError saying what to give instead). scrapy-playwright's
``PageMethod`` (``playwright_page_methods``) is stored as
``{"$page_method": <name or function>, "$args": [...], "$kwargs": {...}}``. A value that
contains itself (a tree with parent links: JSON has no references) cannot be stored either.

NaN and infinity, which orjson writes as null, are stored as ``{"$float": "nan"}`` (``"inf"``,
``"-inf"``) and come back as they were. ``reshaped_types`` names the values that come back as
another type: a tuple or set as a list, a dict subclass (OrderedDict, defaultdict) as a dict, a
datetime as its ISO text.

A JsonRequest's ``dumps_kwargs`` (``json.dumps`` options, which only a later
``replace(data=...)`` uses: the body is encoded already) keeps a class or function (``cls``,
``default``) as ``{"$object": "<module>:<qualname>"}``, found again like an item's class; one
that path does not find (a lambda, a local function) is left out (``by_path``).

A dict of the user's own of such a shape (every key starting with "$") is wrapped on the way
(``codec.escaped``) and comes back as it was, never as an item, page method or float.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import sys
from collections.abc import Collection, Iterable
from typing import Any

from scrapy import Item
from scrapy_playwright.page import PageMethod

from crawler.frontier import codec

ITEM_TAG = "$item"
FIELDS_TAG = "$fields"
PAGE_METHOD_TAG = "$page_method"
ARGS_TAG = "$args"
KWARGS_TAG = "$kwargs"
OBJECT_TAG = "$object"
FLOAT_TAG = "$float"  # {"$float": "nan"}: NaN or infinity, which orjson writes as null
NON_FINITE = ("nan", "inf", "-inf")
RESTORED = (str, int, float, bool, type(None), bytes)  # come back as their own type
MAX_DEPTH = 255  # orjson's limit: a value nested deeper cannot be written


def pack(value: Any) -> Any:
    """``value`` with every item, page method, NaN and infinity in it (in dicts, lists, tuples
    and sets) replaced by its tagged dict and every dict ``codec.escaped``; the containers with
    nothing to replace or wrap are returned as they are, not copied. Raises TypeError for a
    page method whose method is a function, a value that contains itself (a tree with parent
    links: JSON cannot hold a cycle) and values nested deeper than ``MAX_DEPTH``."""
    return _pack(value, frozenset())


def _pack(value: Any, outer: frozenset[int]) -> Any:
    """``outer``: the ids of the containers, items and page methods ``value`` is in."""
    tag = _tag_of_value(value)
    if tag is not None:
        return tag
    is_item = isinstance(value, Item) or _is_dataclass_item(value)
    if not (is_item or isinstance(value, (PageMethod, dict, list, tuple, set, frozenset))):
        return value
    if id(value) in outer:
        raise TypeError(
            f"a {type(value).__name__} that contains itself, which JSON cannot hold (store "
            "what refers back by a key of its own, not the object)"
        )
    if len(outer) == MAX_DEPTH:
        raise TypeError(
            f"values nested more than {MAX_DEPTH} levels deep, more than the frontier's JSON "
            "encoder (orjson) writes: flatten them, or keep them out of the request"
        )
    inner = outer | {id(value)}
    if isinstance(value, PageMethod):
        return _page_method(value, inner)
    if isinstance(value, Item):
        return _tagged(value, dict(value), inner)
    if is_item:
        fields = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
        return _tagged(value, fields, inner)
    return _container(value, inner)


def _tag_of_value(value: object) -> dict[str, str] | None:
    """What stands for NaN, infinity, a function or a class (None for another value)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {FLOAT_TAG: str(float(value))}
    if _is_code(value):
        return {OBJECT_TAG: _found_path(value)}
    return None


def _is_dataclass_item(value: object) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _container(value: dict[Any, Any] | Collection[Any], inner: frozenset[int]) -> Any:
    # loops, not comprehensions: two frames a level, MAX_DEPTH levels within Python's limit
    if isinstance(value, dict):
        packed: dict[Any, Any] = {}
        for key, item in value.items():
            packed[key] = _pack(item, inner)
        changed = any(packed[key] is not item for key, item in value.items())
        return codec.escaped(packed if changed else value)
    items: list[Any] = []
    for item in value:
        items.append(_pack(item, inner))
    if not any(a is not b for a, b in zip(items, value, strict=True)):
        return value
    return tuple(items) if isinstance(value, tuple) else items  # JSON makes them lists


def _is_code(value: object) -> bool:
    """A function, method or class: stored by its import path, or not at all."""
    return (
        inspect.isfunction(value)
        or inspect.ismethod(value)
        or inspect.isbuiltin(value)
        or inspect.isclass(value)
    )


def _findable_path(value: object) -> str | None:
    """``<module>:<qualname>`` of a class or function that path finds again on a node that
    loaded its module; None for another value (a lambda, a local function, a bound method,
    an instance)."""
    path = f"{getattr(value, '__module__', '')}:{getattr(value, '__qualname__', '')}"
    return path if _loaded(path) is value else None


def _found_path(code: object) -> str:
    """``_findable_path`` of a function or class; TypeError saying what to give instead for
    one without."""
    if (path := _findable_path(code)) is not None:
        return path
    kind = "class" if inspect.isclass(code) else "function"
    raise TypeError(
        f"the {kind} {getattr(code, '__name__', repr(code))}, which cannot be stored (a lambda, a "
        f"local {kind} or a bound method has no import path): define it at a module's top level, "
        "where it is found by its import path, or give what names it (scrapy-playwright takes a "
        "playwright_page_init_callback's import path and a spider method's name for "
        "playwright_page_event_handlers)"
    )


def _page_method(method: PageMethod, inner: frozenset[int]) -> dict[str, Any]:
    called: Any = method.method
    if not isinstance(called, str):
        path = _findable_path(called)
        if path is None:
            name = getattr(called, "__name__", repr(called))
            raise TypeError(
                f"a PageMethod calling the function {name}, which cannot be stored: define it "
                "at a module's top level (found by its import path) or name a method of "
                "Playwright's page (PageMethod('evaluate', '<script>') runs a script)"
            )
        called = {OBJECT_TAG: path}
    return {
        PAGE_METHOD_TAG: called,
        ARGS_TAG: _pack(list(method.args), inner),
        KWARGS_TAG: _pack(method.kwargs, inner),
    }


def _tagged(item: object, fields: dict[str, Any], inner: frozenset[int]) -> dict[str, Any]:
    path = f"{type(item).__module__}:{type(item).__qualname__}"
    return {ITEM_TAG: path, FIELDS_TAG: _pack(fields, inner)}


def reshaped_types(value: Any, found: set[str]) -> None:
    """Add to ``found`` the type names of the values in ``value`` (a request's meta or
    cb_kwargs, as given) that come back from the frontier as another type: a tuple or set as a
    list, a dict subclass (OrderedDict, defaultdict) as a dict, a datetime as its ISO text, a
    subclass of a plain value (IntEnum, a str Enum) as that value, a bytearray as bytes.
    Items, page methods, bytes, NaN and infinity come back as themselves; what they hold is
    looked at too."""
    kept = (  # a subclass (an IntEnum, a str Enum) comes back as its plain value
        type(value) in RESTORED
        or _is_lxml_text(value)
        or isinstance(value, (Item, PageMethod))
        or _is_dataclass_item(value)
        or _is_code(value)
    )
    if not (kept or type(value) in (dict, list)):
        found.add(type(value).__name__)
    for held in _held(value):
        reshaped_types(held, found)


def _is_lxml_text(value: Any) -> bool:
    """Text as lxml gives it (``_ElementUnicodeResult``, as a CrawlSpider's ``link_text``): a
    str that only adds a way back to its element, which no one keeps across requests."""
    return isinstance(value, str) and type(value).__module__ == "lxml.etree"


def _held(value: Any) -> Iterable[Any]:
    """The values a container, item or page method holds; none for another value."""
    if isinstance(value, (dict, Item)):
        return value.values()
    if isinstance(value, (list, tuple, set, frozenset)):
        return value
    if isinstance(value, PageMethod):
        return (*value.args, *value.kwargs.values())
    if _is_dataclass_item(value):
        return [getattr(value, field.name) for field in dataclasses.fields(value)]
    return ()


def by_path(options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A JsonRequest's ``dumps_kwargs`` as stored: a value JSON holds as it is, a class or
    function as ``{"$object": "<module>:<qualname>"}`` if that path finds it; and the names of
    the others (a lambda, a local function, an instance), left out."""
    kept: dict[str, Any] = {}
    left_out: list[str] = []
    for name, value in options.items():
        try:
            codec.to_json(value)
        except TypeError:
            if (path := _findable_path(value)) is not None:
                kept[name] = {OBJECT_TAG: path}
            else:
                left_out.append(name)
        else:
            kept[name] = value
    return kept, left_out


def _loaded(path: object) -> object:
    """What ``<module>:<qualname>`` names in a module this node has loaded (nothing is
    imported), or None."""
    module, _, qualname = str(path).partition(":")
    found: object = sys.modules.get(module)
    for name in qualname.split("."):
        found = getattr(found, name, None)
    return found


def restore(value: dict[str, Any]) -> Any:
    """An object read back, its values restored already (``codec.loads`` calls this for every
    one): the item, page method, class or function a tagged one stands for, else the object
    itself. Raises ValueError for an item class, class or function this node has not loaded,
    or an item class whose fields it does not have."""
    if len(value) == 2 and ITEM_TAG in value and FIELDS_TAG in value:
        return _item(value[ITEM_TAG], value[FIELDS_TAG])
    if len(value) == 1 and value.get(FLOAT_TAG) in NON_FINITE:
        return float(value[FLOAT_TAG])
    if len(value) == 1 and OBJECT_TAG in value:
        found = _loaded(value[OBJECT_TAG])
        if found is None:
            raise ValueError(
                f"the request names {value[OBJECT_TAG]}, a class or function this node has not "
                "loaded (nodes must run the same project code)"
            )
        return found
    if len(value) == 3 and {PAGE_METHOD_TAG, ARGS_TAG, KWARGS_TAG} <= value.keys():
        args, kwargs, called = value[ARGS_TAG], value[KWARGS_TAG], value[PAGE_METHOD_TAG]
        if isinstance(args, list) and isinstance(kwargs, dict):  # a function restored already
            return PageMethod(called if callable(called) else str(called), *args, **kwargs)
    return value


def _item(path: object, fields: object) -> object:
    found = _loaded(path)
    if isinstance(found, type) and isinstance(fields, dict):
        if issubclass(found, Item):
            _check_fields(path, fields, found.fields)
            return found(fields)
        if dataclasses.is_dataclass(found):
            declared = {field.name: field for field in dataclasses.fields(found)}
            _check_fields(path, fields, declared)
            init = {name: value for name, value in fields.items() if declared[name].init}
            try:
                item = found(**init)
            except TypeError as exc:  # a field the class requires now
                message = f"the {path} item stored in the request does not fit it: {exc}"
                raise ValueError(message) from exc
            for name in fields.keys() - init.keys():  # the fields with init=False, as they were
                object.__setattr__(item, name, fields[name])
            return item
    raise ValueError(
        f"the request's meta or cb_kwargs holds a {path} item, a class this node has not "
        "loaded (nodes must run the same project code)"
    )


def _check_fields(path: object, fields: dict[str, Any], declared: Collection[str]) -> None:
    unknown = sorted(set(fields) - set(declared))
    if unknown:
        raise ValueError(f"the {path} item stored in the request has no field {unknown[0]!r}")
