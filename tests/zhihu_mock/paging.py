"""Paging of list endpoints: offset pages, opaque comment cursors and ``paging`` objects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from tests.zhihu_mock.messages import Request
from tests.zhihu_mock.records import Comment


class BadParameter(ValueError):
    """A query parameter the real site would reject (answered with HTTP 400)."""


def int_param(request: Request, name: str, default: int, high: int) -> int:
    """A non-negative integer parameter, capped at ``high``."""
    raw = request.query.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadParameter(f"{name}={raw!r} is not an integer") from None
    if value < 0:
        raise BadParameter(f"{name}={value} is negative")
    return min(value, high)


def page_url(request: Request, **changes: str | int) -> str:
    """The request's own URL on the base URL, with some query parameters replaced or added."""
    pairs = parse_qsl(urlsplit(request.target).query, keep_blank_values=True)
    params: dict[str, str] = {}
    for name, value in pairs:
        params.setdefault(name, value)
    params.update({name: str(value) for name, value in changes.items()})
    return f"{request.base_url}{request.path}?{urlencode(params)}"


def offset_paging(request: Request, offset: int, limit: int, total: int) -> dict[str, Any]:
    return {
        "is_end": offset + limit >= total,
        "is_start": offset == 0,
        "next": page_url(request, offset=offset + limit, limit=limit),
        "previous": page_url(request, offset=max(0, offset - limit), limit=limit),
        "totals": total,
    }


def comment_cursor(comment: Comment, key: int) -> str:
    """An opaque cursor such as ``456770961_10125996085_0``: sort key, last comment id, 0."""
    return f"{key}_{comment.id}_0"


def cursor_start(cursor: str, ordered: Sequence[Comment]) -> int:
    """Index of the first comment after ``cursor`` in ``ordered``; "" starts at the beginning."""
    if cursor == "":
        return 0
    parts = cursor.split("_")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        raise BadParameter(f"offset={cursor!r} is not a cursor")
    for index, comment in enumerate(ordered):
        if comment.id == parts[1]:
            return index + 1
    raise BadParameter(f"offset={cursor!r} names no comment of this list")
