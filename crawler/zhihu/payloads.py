"""Reading Zhihu payloads: fields, list envelopes, ``js-initialData`` pages, HTML to text.

Required fields raise :class:`ParseError`; optional ones (:class:`Fields`) give ``None`` and
report the field missing, so an item is written with nulls where data is missing.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit

import orjson
from w3lib.url import canonicalize_url

JSON = dict[str, Any]
IP_PREFIX = "IP 属地"
_BLOCKS = frozenset(
    {"p", "br", "div", "li", "ul", "ol", "blockquote", "figure", "pre", "hr", "tr", "table"}
    | {f"h{level}" for level in range(1, 7)}
)
_INITIAL_DATA = re.compile(
    r'<script[^>]*\bid="js-initialData"[^>]*>(.*?)</script>', re.DOTALL | re.IGNORECASE
)
_HIGHLIGHT = re.compile(r"</?em>")
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


class ParseError(ValueError):
    """A payload without a field the item needs."""


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_to_text(markup: str) -> str:
    """Text of an HTML fragment: entities decoded, one line per block, blank lines dropped."""
    collector = _TextCollector()
    collector.feed(markup)
    collector.close()
    lines = (line.strip() for line in "".join(collector.parts).split("\n"))
    return "\n".join(line for line in lines if line)


def unhighlight(text: str) -> str:
    """A search title or excerpt: ``<em>`` marks removed, HTML entities decoded."""
    return html.unescape(_HIGHLIGHT.sub("", text))


def required(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(key)
    if (isinstance(value, bool) and kind is int) or not isinstance(value, kind):
        raise ParseError(f"field {key!r} is {value!r}, not {kind}")
    return value


def object_id(obj: Mapping[str, Any], key: str = "id") -> str:
    """Ids stay strings (some old payloads carry ints)."""
    return str(required(obj, key, (str, int)))


def ip_location(text: str | None) -> str | None:
    """``"IP 属地上海"`` or ``"上海"`` -> ``"上海"``; empty -> None."""
    place = (text or "").strip().removeprefix(IP_PREFIX).strip()
    return place or None


# (item name, field name): a field the payload did not give
MissingField = Callable[[str, str], None]


@dataclass(frozen=True, slots=True)
class Fields:
    """Optional fields of one object that becomes item ``item``; gaps go to ``missing``."""

    obj: Mapping[str, Any]
    item: str
    missing: MissingField

    def count(self, key: str) -> int | None:
        value = self.obj.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            self.missing(self.item, key)
            return None
        return value

    def text(self, key: str) -> str:
        value = self.obj.get(key)
        return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class ListPage:
    data: list[JSON]
    next_url: str | None  # None: no next page to ask for (none, empty, or the same URL)
    is_end: bool  # the site says this is the last page
    totals: int | None  # paging.totals, when the site declares it


def same_page(next_url: str, current_url: str) -> bool:
    """``next_url`` asks for the current page again: the same path and query, whatever its
    scheme and host (Zhihu writes http:// next URLs, on its own host; the spider moves them
    onto the API's), the order of its parameters and its escaping."""
    found, current = urlsplit(canonicalize_url(next_url)), urlsplit(canonicalize_url(current_url))
    return (found.path, found.query) == (current.path, current.query)


def list_page(body: Mapping[str, Any], current_url: str) -> ListPage:
    """``{"paging": {...}, "data": [...]}``: follow ``next`` until ``is_end``, empty ``data``,
    an empty or a repeated next URL (the spider may go past ``is_end`` while a declared
    total is not reached)."""
    data = [entry for entry in required(body, "data", list) if isinstance(entry, dict)]
    paging = body.get("paging")
    paging = paging if isinstance(paging, Mapping) else {}
    next_url = str(paging.get("next") or "")
    totals = paging.get("totals")
    usable = bool(data) and bool(next_url) and not same_page(next_url, current_url)
    return ListPage(
        data,
        next_url if usable else None,
        bool(paging.get("is_end")),
        totals if isinstance(totals, int) and not isinstance(totals, bool) else None,
    )


def _snake(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            _CAMEL.sub(lambda m: "_" + m.group(1).lower(), k): _snake(v) for k, v in value.items()
        }
    if isinstance(value, list):
        return [_snake(item) for item in value]
    return value


def page_entities(markup: str) -> dict[str, dict[str, JSON]]:
    """``initialState.entities`` of a page, keys in snake_case like the API's
    (``voteupCount`` -> ``voteup_count``): ``{"answers": {id: {...}}, "users": ...}``."""
    match = _INITIAL_DATA.search(markup)
    if match is None:
        raise ParseError("the page has no js-initialData script")
    try:
        state = orjson.loads(match.group(1))
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"js-initialData is not JSON: {exc}") from exc
    entities = (
        ((state.get("initialState") or {}).get("entities") or {}) if isinstance(state, dict) else {}
    )
    return {
        str(kind): _snake(objects)
        for kind, objects in entities.items()
        if isinstance(objects, dict)
    }
