"""Parse seeds users push into ``<spider>:start_urls``.

A seed is a plain URL (``https://example.com/``) or a JSON object::

    {"url": "...", "meta": {...}, "priority": 0, "method": "GET",
     "headers": {"name": "value"}, "body": "...", "callback": "parse",
     "dont_filter": true}

Any other key is form data, as in scrapy-redis: ``{"url": u, "method":
"POST", "q": "x"}`` posts ``q=x`` (a GET puts it in the query string);
values are strings, numbers or lists of them. ``dont_filter`` left out
means the spider's default (``SEEDS_DONT_FILTER``). ``parse_seed`` raises
``InvalidSeed`` with a short ``reason`` (used in stats and in the
invalid-seed record) for anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

ALLOWED_SCHEMES = frozenset({"http", "https"})
ALLOWED_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
KNOWN_FIELDS = frozenset(
    {"url", "meta", "priority", "method", "headers", "body", "callback", "dont_filter"}
)


class InvalidSeed(ValueError):
    """A seed that cannot become a request; ``reason`` is a short stat-friendly code."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


FormData = Mapping[str, str | list[str]]


@dataclass(frozen=True, slots=True)
class Seed:
    url: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    priority: int = 0
    method: str = "GET"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None
    callback: str | None = None
    dont_filter: bool | None = None  # None: the spider's default (SEEDS_DONT_FILTER)
    formdata: FormData = field(default_factory=dict)


def _check_url(url: object) -> str:
    if url is not None and not isinstance(url, str):
        raise InvalidSeed("url", f"seed url {str(url)[:200]} is not a string")
    if not url or not url.strip():
        raise InvalidSeed("url", "seed has no url")
    url = url.strip()
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise InvalidSeed("url", f"seed url {url[:200]!r} is malformed: {exc}") from exc
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        raise InvalidSeed("scheme", f"seed url {url[:200]!r} is not http(s)")
    if not parts.hostname:
        raise InvalidSeed("url", f"seed url {url[:200]!r} has no host")
    return url


def _form_value(name: str, value: object) -> str | list[str]:
    def text(item: object) -> str:
        if isinstance(item, str):
            return item
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            return str(item)
        raise InvalidSeed(
            "field", f"seed form field {name!r} must be a string, a number or a list of them"
        )

    return [text(item) for item in value] if isinstance(value, list) else text(value)


def _formdata(data: Mapping[str, Any]) -> dict[str, str | list[str]]:
    """The keys that are not request fields: form data (scrapy-redis's JSON seeds)."""
    form = {
        name: _form_value(name, value) for name, value in data.items() if name not in KNOWN_FIELDS
    }
    if form and data.get("body") is not None:
        raise InvalidSeed("field", f"seed has both a body and form fields {sorted(form)}")
    return form


def _check_fields(data: Mapping[str, Any]) -> None:
    checks: list[tuple[str, type | tuple[type, ...]]] = [
        ("meta", dict),
        ("headers", dict),
        ("method", str),
        ("body", str),
        ("callback", str),
        ("dont_filter", bool),
    ]
    for name, expected in checks:
        if name in data and data[name] is not None and not isinstance(data[name], expected):
            raise InvalidSeed("field", f"seed field {name!r} has the wrong type")
    priority = data.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidSeed("field", "seed field 'priority' must be an integer")
    headers = data.get("headers") or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        raise InvalidSeed("field", "seed headers must map strings to strings")
    method = (data.get("method") or "GET").upper()
    if method not in ALLOWED_METHODS:
        raise InvalidSeed("field", f"seed method {method[:20]!r} is not supported")


def decode_seed(raw: bytes | str, *, max_bytes: int, encoding: str = "utf-8") -> str:
    """The seed's text (``encoding``: ``REDIS_ENCODING`` / the spider's ``redis_encoding``)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > max_bytes:
        raise InvalidSeed("too_large", f"seed of {len(raw)} bytes exceeds {max_bytes}")
    try:
        text = raw.decode(encoding).strip()
    except UnicodeDecodeError as exc:
        raise InvalidSeed("encoding", f"seed is not {encoding}") from exc
    if not text:
        raise InvalidSeed("empty", "seed is empty")
    return text


def parse_seed(raw: bytes | str, *, max_bytes: int, encoding: str = "utf-8") -> Seed:
    """Turn one raw queue entry into a ``Seed`` or raise ``InvalidSeed``."""
    text = decode_seed(raw, max_bytes=max_bytes, encoding=encoding)
    if not text.startswith(("{", "[")):
        return Seed(url=_check_url(text))
    try:
        payload = orjson.loads(text.encode("utf-8", "surrogatepass"))
    except orjson.JSONDecodeError as exc:
        raise InvalidSeed("json", f"seed is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise InvalidSeed("json", "seed JSON is not an object")
    url = _check_url(payload.get("url"))
    _check_fields(payload)
    return Seed(
        url=url,
        meta=payload.get("meta") or {},
        priority=payload.get("priority", 0),
        method=(payload.get("method") or "GET").upper(),
        headers=payload.get("headers") or {},
        body=payload.get("body"),
        callback=payload.get("callback"),
        dont_filter=payload.get("dont_filter"),
        formdata=_formdata(payload),
    )
