"""``scrapy.Item`` values in a request's meta or cb_kwargs, kept through the frontier's JSON.

Scrapy's tutorials hand a half-filled item to the next callback in ``meta`` (or
``cb_kwargs``); Scrapy's disk queues and scrapy-redis pickle it. The frontier stores JSON,
never pickle, so an item is stored as ``{"$item": "<module>:<qualname>", "$fields": {...}}``
and comes back as an instance of its class on any node that has loaded that class: nothing
is imported because Redis names it (the spider's modules import their item classes). Its
field values are stored like any other meta value (a tuple comes back a list).
"""

from __future__ import annotations

import sys
from typing import Any

from scrapy import Item

ITEM_TAG = "$item"
FIELDS_TAG = "$fields"


def pack(value: Any) -> Any:
    """``value`` with every item in it (in dicts, lists and tuples) replaced by its tagged
    dict; the containers that hold none are returned as they are, not copied."""
    if isinstance(value, Item):
        path = f"{type(value).__module__}:{type(value).__qualname__}"
        return {ITEM_TAG: path, FIELDS_TAG: pack(dict(value))}
    if isinstance(value, dict):
        packed = {key: pack(item) for key, item in value.items()}
        changed = any(packed[key] is not item for key, item in value.items())
        return packed if changed else value
    if isinstance(value, (list, tuple)):
        items = [pack(item) for item in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def unpack(value: Any) -> Any:
    """``value`` (JSON read back) with every tagged dict in it made its item again. Raises
    ValueError for an item class this node has not loaded, or whose fields it does not have."""
    if isinstance(value, dict):
        if len(value) == 2 and ITEM_TAG in value and FIELDS_TAG in value:
            return _item(value[ITEM_TAG], unpack(value[FIELDS_TAG]))
        return {key: unpack(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unpack(item) for item in value]
    return value


def _item(path: object, fields: object) -> Item:
    module, _, qualname = str(path).partition(":")
    found: object = sys.modules.get(module)
    for name in qualname.split("."):
        found = getattr(found, name, None)
    if not (isinstance(found, type) and issubclass(found, Item)) or not isinstance(fields, dict):
        raise ValueError(
            f"the request's meta or cb_kwargs holds a {path} item, a class this node has not "
            "loaded (nodes must run the same project code)"
        )
    unknown = sorted(set(fields) - set(found.fields))
    if unknown:
        raise ValueError(f"the {path} item stored in the request has no field {unknown[0]!r}")
    return found(fields)
