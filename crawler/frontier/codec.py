"""JSON encoding of requests stored in the Redis frontier (never pickle).

``dumps`` writes ``Request.to_dict()`` as JSON (orjson), leaving out the fields
whose value is the default of ``Request.__init__`` (``LEAN_DEFAULTS``: a typical link
is about 40% smaller); ``request_from_dict`` restores exactly those defaults, so a
request decodes to what it was. Callbacks and errbacks are stored by name. Bytes values
(headers, body) are tagged as ``{"$b": "<base64>"}`` and restored on load.
A request whose meta cannot be written raises ``UnserializableRequestError``
naming the request and the key.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

BYTES_TAG = "$b"
# Request.__init__'s defaults of the fields Request.to_dict() writes: left out when stored.
LEAN_DEFAULTS: dict[str, Any] = {
    "callback": None,
    "errback": None,
    "headers": {},
    "body": b"",
    "cookies": {},
    "meta": {},
    "encoding": "utf-8",
    "flags": [],
    "cb_kwargs": {},
    "dont_filter": False,
    "method": "GET",
    "priority": 0,
}
_MISSING = object()


def _is_default(name: str, value: object) -> bool:
    default = LEAN_DEFAULTS.get(name, _MISSING)
    return default is not _MISSING and type(value) is type(default) and value == default


class UnserializableRequestError(TypeError):
    """A request holds a value JSON cannot represent."""


def _default(value: object) -> object:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {BYTES_TAG: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"type {type(value).__name__} is not JSON serializable")


def _first_bad_key(mapping: dict[str, Any]) -> str | None:
    for key, value in mapping.items():
        try:
            orjson.dumps(value, default=_default)
        except TypeError:
            return key
    return None


def _ascii_or_bytes(value: bytes) -> str | bytes:
    return value.decode("ascii") if value.isascii() else value


def _plain_headers(headers: dict[Any, Any]) -> dict[str, list[str | bytes]]:
    """Header names become strings (HTTP names are ASCII); values stay text where ASCII."""
    plain: dict[str, list[str | bytes]] = {}
    for name, values in headers.items():
        key = name.decode("latin-1") if isinstance(name, bytes) else str(name)
        items = values if isinstance(values, list) else [values]
        plain[key] = [_ascii_or_bytes(v) if isinstance(v, bytes) else v for v in items]
    return plain


def dumps(request_dict: dict[str, Any], *, lean: bool = True) -> bytes:
    """The request as stored; ``lean=False`` keeps the default-valued fields (the format
    before lean storage, which ``loads`` reads alike)."""
    if lean:
        request_dict = {k: v for k, v in request_dict.items() if not _is_default(k, v)}
    if isinstance(request_dict.get("headers"), dict):
        request_dict = {**request_dict, "headers": _plain_headers(request_dict["headers"])}
    try:
        return orjson.dumps(request_dict, default=_default)
    except TypeError as exc:
        meta = request_dict.get("meta") or {}
        bad = _first_bad_key(meta) if isinstance(meta, dict) else None
        where = f"meta key {bad!r}" if bad is not None else "a field"
        raise UnserializableRequestError(
            f"request {request_dict.get('url')!r} cannot be stored in Redis: {where} "
            f"is not JSON serializable ({exc})"
        ) from exc


def _restore(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and BYTES_TAG in value:
            return base64.b64decode(value[BYTES_TAG])
        return {key: _restore(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_restore(item) for item in value]
    return value


def loads(data: bytes | str) -> dict[str, Any]:
    decoded = _restore(orjson.loads(data))
    if not isinstance(decoded, dict):
        raise ValueError(f"stored request is a {type(decoded).__name__}, not an object")
    return decoded
