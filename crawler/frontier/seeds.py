"""Parse seeds users push into ``<spider>:start_urls``.

A seed is a plain URL (``https://example.com/``) or a JSON object::

    {"url": "...", "meta": {...}, "priority": 0, "method": "GET",
     "headers": {"name": "value"}, "body": "...", "callback": "parse",
     "dont_filter": false}

``parse_seed`` raises ``InvalidSeed`` with a short ``reason`` (used in stats
and in the invalid-seed record) for anything else.
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


@dataclass(frozen=True, slots=True)
class Seed:
    url: str
    meta: Mapping[str, Any] = field(default_factory=dict)
    priority: int = 0
    method: str = "GET"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None
    callback: str | None = None
    dont_filter: bool = False


def _check_url(url: object) -> str:
    if not isinstance(url, str) or not url.strip():
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


def _check_fields(data: Mapping[str, Any]) -> None:
    unknown = set(data) - KNOWN_FIELDS
    if unknown:
        raise InvalidSeed("field", f"seed has unknown fields {sorted(unknown)}")
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


def parse_seed(raw: bytes | str, *, max_bytes: int) -> Seed:
    """Turn one raw queue entry into a ``Seed`` or raise ``InvalidSeed``."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if len(data) > max_bytes:
        raise InvalidSeed("too_large", f"seed of {len(data)} bytes exceeds {max_bytes}")
    text = data.strip()
    if not text:
        raise InvalidSeed("empty", "seed is empty")
    if not text.startswith((b"{", b"[")):
        try:
            return Seed(url=_check_url(text.decode("utf-8")))
        except UnicodeDecodeError as exc:
            raise InvalidSeed("encoding", "seed is not UTF-8") from exc
    try:
        payload = orjson.loads(text)
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
        dont_filter=bool(payload.get("dont_filter", False)),
    )
