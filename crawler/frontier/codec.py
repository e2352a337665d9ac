"""JSON encoding of requests stored in the Redis frontier (never pickle).

``dumps`` writes ``Request.to_dict()`` as JSON (orjson), leaving out the fields
whose value is the default of ``Request.__init__`` (``LEAN_DEFAULTS``: a typical link
is about 40% smaller) for the classes whose ``__init__`` has those defaults (``LEAN_CLASSES``:
Request, FormRequest, JsonRequest; another class keeps every field, as its own defaults would
replace them); ``request_from_dict`` restores exactly those defaults, so a request decodes to
what it was. Callbacks and errbacks are stored by name. Bytes values
(headers, body) are tagged as ``{"$b": "<base64>"}`` and restored on load
(``crawler.frontier.meta_objects`` tags items, page methods, NaN and infinity, and classes
and functions, by their import path). Every tag is a dict whose keys
all start with "$" (and are lowercase: header names are stored title-cased, ``$B``), so a user's
dict of that shape in meta, cb_kwargs or cookies (``{"$b": "yes"}``) is wrapped as
``{"$dict": {...}}`` (``escaped``) and the request gets the field ``"$escapes": true``; ``loads``
unwraps them only in a request with that field, so one stored before (none has it) reads as it
did. A dict with any other key cannot be taken for a tag and is stored as is: a typical request's
JSON is what it was. A request JSON cannot hold raises ``UnserializableRequestError`` naming
the request and where the value is (``meta key 'socket'``, ``cb_kwargs key 'price'``, ``field
'priority'``).

Compressed (``FRONTIER_COMPRESS``, the default), that JSON is stored as ``COMPRESSED``
followed by a raw deflate stream (RFC 1951) primed with ``DICTIONARY``, the field names
and values requests repeat: a typical link takes a quarter to a third of its JSON, in Redis's
memory, on the wire and in the Lua scripts that move it. A body that starts with ``{`` is
plain JSON (every body stored before, and with ``FRONTIER_COMPRESS=False``); ``plain``
gives the JSON of either, ``loads`` reads either.
"""

from __future__ import annotations

import base64
import contextlib
import time
import zlib
from collections.abc import Callable
from typing import Any

import orjson

from crawler.url_credentials import mask_secrets

BYTES_TAG = "$b"
DICT_TAG = "$dict"  # {"$dict": {...}}: a user's dict whose keys all start with "$" (escaped)
# A request holding DICT_TAG wrappers has this field, true: those stored before have none (their
# {"$dict": {...}} are the user's own), so they read as they did. request_from_dict ignores it.
ESCAPES_FIELD = "$escapes"
_WRAPPER = b'{"' + DICT_TAG.encode() + b'":{'  # as orjson writes one (a wrapped dict has a key)
COMPRESSED = b"\x01"  # the first byte of a compressed body (a JSON one starts with "{")
# What requests repeat, the likeliest last (deflate reaches its end with the shortest codes).
# Bodies stored with it are read with it: never change it; another one takes another first byte.
DICTIONARY = (
    b'"_class":"scrapy.http.request.form.FormRequest","_class":"scrapy.http.request.json_request'
    b'.JsonRequest","method":"POST","body":{"$b":"","cookies":{},"encoding":"latin-1","flags":[]'
    b',"cb_kwargs":{},"dont_filter":true,"errback":"","Content-Type":["application/x-www-form-u'
    b'rlencoded"],"Content-Type":["application/json"],"Accept":["application/json, text/plain, '
    b'*/*"],"playwright":true,"download_slot":"","priority":-1,"priority":1,"depth":2,"meta":{"'
    b'depth":1,"crawler_scope":"www.","callback":"parse","headers":{"Referer":["https://www.'
    b'.html",".com/","http://127.0.0.1:{"url":"http://{"url":"https://www.'
)
WINDOW_BITS = 12  # a 4 KB window: a request's own repeats, cheaply (inflate takes any window)
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
# The "_class" (None: Request) of the classes whose __init__ builds a field left out as
# Request.__init__'s default does (tests/test_codec.py checks it for Scrapy's version): only their
# requests are stored lean. Another class's __init__ may have defaults of its own (XmlRpcRequest's
# POST and dont_filter), which would replace the values left out: it keeps every field.
LEAN_CLASSES = frozenset(
    {
        None,
        "scrapy.http.request.form.FormRequest",
        "scrapy.http.request.json_request.JsonRequest",
    }
)
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


def escaped(mapping: dict[Any, Any]) -> dict[Any, Any]:
    """A user's dict as stored: ``{"$dict": mapping}`` when every key starts with "$" (it could
    be read as a tag), else ``mapping`` itself (the look ends at its first other key)."""
    for key in mapping:
        if not (isinstance(key, str) and key.startswith("$")):
            return mapping
    return {DICT_TAG: mapping} if mapping else mapping


def to_json(value: object) -> bytes:
    """``value`` as the codec writes it (bytes tagged, tuples and sets as lists); TypeError for a
    value JSON cannot hold."""
    return orjson.dumps(value, default=_default)


def first_bad_key(mapping: dict[Any, Any], check: Callable[[Any], object] = to_json) -> Any:
    """The first key of ``mapping`` (of the user's dict in it, if ``escaped``) whose value
    ``check`` (by default writing it as JSON) raises TypeError for, or None."""
    wrapped = mapping.get(DICT_TAG)
    if len(mapping) == 1 and isinstance(wrapped, dict):  # escaped: the user's keys are in it
        mapping = wrapped
    for key, value in mapping.items():
        try:
            check(value)
        except TypeError:
            return key
    return None


def where(field: str, value: Any, check: Callable[[Any], object] = to_json) -> str:
    """Where in a request's ``field`` (holding ``value``) ``check`` raises TypeError: the first
    such key of a dict (``cb_kwargs key 'price'``), else the field (``field 'priority'``)."""
    key = first_bad_key(value, check) if isinstance(value, dict) else None
    return f"field {field!r}" if key is None else f"{field} key {key!r}"


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


def dumps(request_dict: dict[str, Any], *, lean: bool = True, compress: bool = True) -> bytes:
    """The request as stored, its meta, cb_kwargs and cookies as ``meta_objects.pack`` leaves
    them (the user's dicts ``escaped``); ``lean=False`` keeps the default-valued fields (the
    format before lean storage, which ``loads`` reads alike; always, for a class not in
    ``LEAN_CLASSES``); ``compress=False`` stores the JSON itself."""
    if lean and request_dict.get("_class") in LEAN_CLASSES:
        request_dict = {k: v for k, v in request_dict.items() if not _is_default(k, v)}
    if isinstance(request_dict.get("headers"), dict):
        request_dict = {**request_dict, "headers": _plain_headers(request_dict["headers"])}
    try:
        data = to_json(request_dict)
        if _WRAPPER in data:  # rare: marked, so that loads unwraps them
            data = to_json({**request_dict, ESCAPES_FIELD: True})
    except TypeError as exc:
        field = first_bad_key(request_dict)
        bad = "a field" if field is None else where(field, request_dict[field])
        raise UnserializableRequestError(
            f"request {request_dict.get('url')!r} cannot be stored in Redis: {bad} "
            f"is not JSON serializable ({exc}). A request travels to other nodes as JSON: give "
            "meta and cb_kwargs data (text, numbers, lists, dicts, bytes, items, dataclasses) "
            "and make objects in the callback from it (an ItemLoader: pass "
            "loader.load_item(), and ItemLoader(item=...) in the next callback)"
        ) from exc
    return stored(data, compress)


def stored(data: bytes, compress: bool) -> bytes:
    """A request's JSON as Redis stores it: compressed, or as is (``FRONTIER_COMPRESS``)."""
    return deflate(data) if compress else data


def deflate(data: bytes) -> bytes:
    """A request's JSON as stored compressed."""
    packer = zlib.compressobj(6, zlib.DEFLATED, -WINDOW_BITS, 5, zdict=DICTIONARY)
    return COMPRESSED + packer.compress(data) + packer.flush()


def plain(data: bytes) -> bytes:
    """The JSON of a stored request, compressed or not; ValueError for compressed data that
    does not inflate (raw deflate has no checksum: not every damage shows)."""
    if not data.startswith(COMPRESSED):
        return data
    unpacker = zlib.decompressobj(-zlib.MAX_WBITS, zdict=DICTIONARY)
    try:
        found = unpacker.decompress(data[1:]) + unpacker.flush()
    except zlib.error as exc:
        raise ValueError(f"stored request is damaged compressed data ({exc})") from exc
    if not unpacker.eof:
        raise ValueError("stored request is truncated compressed data")
    return found


def failure_json(reason: str, node_id: str, body: bytes, error: str | None) -> bytes:
    """The ``{<spider>}:failed`` record of a failed lease: its reason, the node, the time,
    its request (``body`` as stored) and the failure's ``error``, URL credentials masked."""
    record: dict[str, Any] = {
        "reason": reason,
        "node": node_id,
        "at": time.time(),
        "request": _masked_json(body),
    }
    if error is not None:
        record["error"] = mask_secrets(error)
    return orjson.dumps(record)


def stored_url(body: bytes) -> str:
    """The URL of a stored request, credentials masked ("?" when the body is unreadable)."""
    try:
        url = orjson.loads(plain(body)).get("url")
    except (ValueError, AttributeError):
        return "?"
    return mask_secrets(url) if isinstance(url, str) else "?"


def _masked_json(body: bytes) -> Any:
    """A stored request's JSON, URL credentials masked: a JSON fragment, or text if it was
    damaged or masking left it unreadable."""
    with contextlib.suppress(ValueError):  # a damaged one is kept as found, as text
        body = plain(body)
    masked = mask_secrets(body.decode("utf-8", "replace"))
    try:
        orjson.loads(masked)
    except orjson.JSONDecodeError:
        return masked
    return orjson.Fragment(masked.encode())


# Called with every object read back, its values restored already: what stands for it
TaggedObjects = Callable[[dict[str, Any]], Any]


def _restore(value: Any, tagged: TaggedObjects | None, escapes: bool) -> Any:
    if isinstance(value, dict):
        if len(value) == 1:
            if BYTES_TAG in value:
                return base64.b64decode(value[BYTES_TAG])
            if escapes and DICT_TAG in value:  # the user's dict: its keys are no tag
                user_dict = value[DICT_TAG].items()
                return {key: _restore(item, tagged, escapes) for key, item in user_dict}
        restored = {key: _restore(item, tagged, escapes) for key, item in value.items()}
        return restored if tagged is None else tagged(restored)
    if isinstance(value, list):
        return [_restore(item, tagged, escapes) for item in value]
    return value


def loads(data: bytes | str, tagged: TaggedObjects | None = None) -> dict[str, Any]:
    """The stored request's fields, bytes restored and the user's dicts unwrapped (in a request
    marked ``ESCAPES_FIELD`` only); ``tagged`` makes the other tagged objects what they stand
    for in the same pass (``crawler.frontier.meta_objects.restore``)."""
    found = orjson.loads(data if isinstance(data, str) else plain(data))
    escapes = isinstance(found, dict) and found.pop(ESCAPES_FIELD, None) is True
    decoded = _restore(found, tagged, escapes)
    if not isinstance(decoded, dict):
        raise ValueError(f"stored request is a {type(decoded).__name__}, not an object")
    return decoded
