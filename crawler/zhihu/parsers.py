"""Pure parsers: API v4 JSON and ``js-initialData`` pages -> items; HTML -> plain text.

Parsers raise :class:`ParseError` when a required field is missing or of the wrong type;
extra fields and nulls real payloads carry are ignored.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from html.parser import HTMLParser
from typing import Any

import orjson

from crawler.zhihu.items import (
    Author,
    ContentType,
    ZhihuCommentItem,
    ZhihuContentItem,
    ZhihuCreatorItem,
)
from crawler.zhihu.privacy import Privacy
from crawler.zhihu.urls import Endpoints

JSON = dict[str, Any]
CONTENT_TYPES: tuple[ContentType, ...] = ("answer", "article", "zvideo")
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


def _get(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(key)
    if (isinstance(value, bool) and kind is int) or not isinstance(value, kind):
        raise ParseError(f"field {key!r} is {value!r}, not {kind}")
    return value


def _id(obj: Mapping[str, Any], key: str = "id") -> str:
    """Ids stay strings (some old payloads carry ints)."""
    return str(_get(obj, key, (str, int)))


def ip_location(text: str | None) -> str | None:
    """``"IP 属地上海"`` or ``"上海"`` -> ``"上海"``; empty -> None."""
    place = (text or "").strip().removeprefix(IP_PREFIX).strip()
    return place or None


def author_of(obj: Mapping[str, Any], privacy: Privacy) -> Author:
    author = obj.get("author") or {}
    if not isinstance(author, Mapping):
        raise ParseError(f"author is {author!r}")
    return privacy.author(
        Author(
            id=str(author.get("id") or ""),
            url_token=str(author.get("url_token") or ""),
            name=str(author.get("name") or ""),
        )
    )


@dataclass(frozen=True, slots=True)
class Context:
    """What every item of one response shares."""

    source: str
    crawled_at: datetime
    privacy: Privacy
    endpoints: Endpoints


def content_item(
    obj: Mapping[str, Any], ctx: Context, *, highlighted: bool = False
) -> ZhihuContentItem:
    """An answer, article or zvideo object (API, search result, or a page entity).

    ``highlighted``: search results carry ``<em>`` markup (HTML-escaped) in titles and excerpts.
    """
    kind = _get(obj, "type", str)
    if kind not in CONTENT_TYPES:
        raise ParseError(f"type {kind!r} is no content type")

    def plain(text: str) -> str:
        return unhighlight(text) if highlighted else text

    content_id = _id(obj)
    question_id = None
    if kind == "answer":
        question = _get(obj, "question", Mapping)
        question_id = _id(question)
        title = plain(str(question.get("title") or question.get("name") or ""))
        url = ctx.endpoints.url("answer_url", qid=question_id, aid=content_id)
        times = ("created_time", "updated_time")
    elif kind == "article":
        title = plain(_get(obj, "title", str))
        url = ctx.endpoints.url("article_url", id=content_id)
        times = ("created", "updated")
    else:
        title = plain(_get(obj, "title", str))
        url = ctx.endpoints.url("zvideo_url", id=content_id)
        times = ("created_at", "updated_at")
    if kind == "zvideo":
        excerpt = text = str(obj.get("description") or "")
    else:
        excerpt = plain(str(obj.get("excerpt") or ""))
        text = html_to_text(str(obj.get("content") or ""))
    return ZhihuContentItem(
        content_id=content_id,
        content_type=kind,
        question_id=question_id,
        title=title,
        excerpt=excerpt,
        content_text=text,
        content_url=url,
        created_time=_get(obj, times[0], int),
        updated_time=_get(obj, times[1], int),
        voteup_count=_get(obj, "voteup_count", int),
        comment_count=_get(obj, "comment_count", int),
        author=author_of(obj, ctx.privacy),
        source=ctx.source,
        crawled_at=ctx.crawled_at,
    )


def comment_item(
    obj: Mapping[str, Any], content_type: ContentType, content_id: str, ctx: Context
) -> ZhihuCommentItem:
    """A comment_v5 comment (root or child) of one content."""
    parent = str(obj.get("reply_comment_id") or "0")
    tags = obj.get("comment_tag") or []
    place = next(
        (t.get("text") for t in tags if isinstance(t, Mapping) and t.get("type") == "ip_info"),
        None,
    )
    return ZhihuCommentItem(
        comment_id=_id(obj),
        parent_comment_id=None if parent == "0" else parent,
        content_id=content_id,
        content_type=content_type,
        content=html_to_text(_get(obj, "content", str)),
        created_time=_get(obj, "created_time", int),
        like_count=_get(obj, "like_count", int),
        dislike_count=int(obj.get("dislike_count") or 0),
        sub_comment_count=int(obj.get("child_comment_count") or 0),
        ip_location=ip_location(place),
        author=author_of(obj, ctx.privacy),
        source=ctx.source,
        crawled_at=ctx.crawled_at,
    )


def creator_item(obj: Mapping[str, Any], ctx: Context) -> ZhihuCreatorItem:
    """A member profile (``/api/v4/members/{url_token}``)."""
    return ZhihuCreatorItem(
        url_token=_get(obj, "url_token", str),
        name=ctx.privacy.name(_get(obj, "name", str)),
        headline=str(obj.get("headline") or ""),
        follower_count=_get(obj, "follower_count", int),
        following_count=_get(obj, "following_count", int),
        answer_count=_get(obj, "answer_count", int),
        article_count=_get(obj, "articles_count", int),
        question_count=_get(obj, "question_count", int),
        voteup_count=_get(obj, "voteup_count", int),
        ip_location=ip_location(obj.get("ip_info")),
        source=ctx.source,
        crawled_at=ctx.crawled_at,
    )


@dataclass(frozen=True, slots=True)
class ListPage:
    data: list[JSON]
    next_url: str | None  # None: the last page


def list_page(body: Mapping[str, Any], current_url: str) -> ListPage:
    """``{"paging": {...}, "data": [...]}``: follow ``next`` until ``is_end``, empty ``data``,
    an empty or a repeated next URL."""
    data = [entry for entry in _get(body, "data", list) if isinstance(entry, dict)]
    paging = body.get("paging") or {}
    next_url = str(paging.get("next") or "")
    last = bool(paging.get("is_end")) or not data or not next_url or next_url == current_url
    return ListPage(data, None if last else next_url)


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
