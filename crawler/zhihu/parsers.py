"""Pure parsers: API v4 and ``js-initialData`` objects -> items; search pages -> what to crawl.

Parsers raise :class:`~crawler.zhihu.payloads.ParseError` when a field the item cannot do
without (an id, a type, a time, a text) is missing; counts and other optional fields become
``None`` and are reported through ``Context.missing``. Extra fields are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from crawler.zhihu.items import (
    Author,
    ContentType,
    ZhihuCommentItem,
    ZhihuContentItem,
    ZhihuCreatorItem,
    ZhihuQuestionItem,
    ZhihuUnparsedItem,
)
from crawler.zhihu.payloads import (
    JSON,
    Fields,
    MissingField,
    ParseError,
    html_to_text,
    ip_location,
    object_id,
    required,
    unhighlight,
)
from crawler.zhihu.privacy import Privacy
from crawler.zhihu.urls import Endpoints

CONTENT_TYPES: tuple[ContentType, ...] = ("answer", "article", "zvideo")
UNPARSED_MAX_CHARS = 65_536  # of a raw payload in a dead-lettered zhihu_unparsed item
SEARCH_ENTRIES = ("search_result", "zvideo")  # entry types that carry a result object
WRAPPERS = ("target", "object")  # keys under which a wrapper object holds the result


@dataclass(frozen=True, slots=True)
class Context:
    """What every item of one response shares."""

    source: str
    crawled_at: datetime
    privacy: Privacy
    endpoints: Endpoints
    missing: MissingField  # (item, field) of a field a payload did not give


def author_of(obj: Mapping[str, Any], ctx: Context) -> Author:
    author = obj.get("author") or {}
    if not isinstance(author, Mapping):
        raise ParseError(f"author is {author!r}")
    token = str(author.get("url_token") or "")
    return ctx.privacy.author(
        Author(
            id=str(author.get("id") or ""),
            url_token=token,
            name=str(author.get("name") or ""),
            link=ctx.endpoints.url("people_url", url_token=token) if token else "",
            avatar_url=str(author.get("avatar_url") or ""),
        )
    )


def content_item(
    obj: Mapping[str, Any], ctx: Context, *, highlighted: bool = False
) -> ZhihuContentItem:
    """An answer, article or zvideo object (API, search result, or a page entity).

    ``highlighted``: search results carry ``<em>`` markup (HTML-escaped) in titles and excerpts.
    """
    kind = required(obj, "type", str)
    if kind not in CONTENT_TYPES:
        raise ParseError(f"type {kind!r} is no content type")

    def plain(text: str) -> str:
        return unhighlight(text) if highlighted else text

    content_id = object_id(obj)
    question_id = None
    if kind == "answer":
        question = required(obj, "question", Mapping)
        question_id = object_id(question)
        title = plain(str(question.get("title") or question.get("name") or ""))
        url = ctx.endpoints.url("answer_url", qid=question_id, aid=content_id)
        times = ("created_time", "updated_time")
    elif kind == "article":
        title = plain(required(obj, "title", str))
        url = ctx.endpoints.url("article_url", id=content_id)
        times = ("created", "updated")
    else:
        title = plain(required(obj, "title", str))
        url = ctx.endpoints.url("zvideo_url", id=content_id)
        times = ("created_at", "updated_at")
    fields = Fields(obj, "content", ctx.missing)
    if kind == "zvideo":
        excerpt = text = fields.text("description")
    else:
        excerpt = plain(fields.text("excerpt"))
        text = html_to_text(fields.text("content"))
    return ZhihuContentItem(
        content_id=content_id,
        content_type=kind,
        question_id=question_id,
        title=title,
        excerpt=excerpt,
        content_text=text,
        content_url=url,
        created_time=required(obj, times[0], int),
        updated_time=required(obj, times[1], int),
        voteup_count=fields.count("voteup_count"),
        comment_count=fields.count("comment_count"),
        author=author_of(obj, ctx),
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
    fields = Fields(obj, "comment", ctx.missing)
    return ZhihuCommentItem(
        comment_id=object_id(obj),
        parent_comment_id=None if parent == "0" else parent,
        content_id=content_id,
        content_type=content_type,
        content=html_to_text(required(obj, "content", str)),
        created_time=required(obj, "created_time", int),
        like_count=fields.count("like_count"),
        dislike_count=fields.count("dislike_count"),
        sub_comment_count=fields.count("child_comment_count"),
        ip_location=ip_location(place),
        author=author_of(obj, ctx),
        source=ctx.source,
        crawled_at=ctx.crawled_at,
    )


def creator_item(obj: Mapping[str, Any], ctx: Context) -> ZhihuCreatorItem:
    """A member profile (``/api/v4/members/{url_token}``)."""
    token = required(obj, "url_token", str)
    fields = Fields(obj, "creator", ctx.missing)
    gender = obj.get("gender")
    return ZhihuCreatorItem(
        url_token=token,
        id=ctx.privacy.author_id(str(obj.get("id") or "")),
        name=ctx.privacy.name(required(obj, "name", str)),
        link=ctx.endpoints.url("people_url", url_token=token),
        avatar_url=ctx.privacy.avatar(fields.text("avatar_url")),
        gender=gender if isinstance(gender, int) and not isinstance(gender, bool) else None,
        headline=fields.text("headline"),
        follower_count=fields.count("follower_count"),
        following_count=fields.count("following_count"),
        answer_count=fields.count("answer_count"),
        article_count=fields.count("articles_count"),
        zvideo_count=fields.count("zvideo_count"),
        column_count=fields.count("columns_count"),
        question_count=fields.count("question_count"),
        voteup_count=fields.count("voteup_count"),
        ip_location=ip_location(fields.text("ip_info")),
        source=ctx.source,
        crawled_at=ctx.crawled_at,
    )


def question_item(obj: Mapping[str, Any], ctx: Context) -> ZhihuQuestionItem:
    """A question (``/api/v4/questions/{qid}``): title, detail, counts, topics."""
    question_id = object_id(obj)
    fields = Fields(obj, "question", ctx.missing)
    topics = obj.get("topics")
    return ZhihuQuestionItem(
        question_id=question_id,
        title=required(obj, "title", str),
        detail=html_to_text(fields.text("detail")),
        question_url=ctx.endpoints.url("question_url", qid=question_id),
        created_time=fields.count("created"),
        updated_time=fields.count("updated_time"),
        answer_count=fields.count("answer_count"),
        follower_count=fields.count("follower_count"),
        visit_count=fields.count("visit_count"),
        comment_count=fields.count("comment_count"),
        topics=[
            str(t["name"])
            for t in (topics if isinstance(topics, list) else [])
            if isinstance(t, Mapping) and t.get("name")
        ],
        author=author_of(obj, ctx),
        source=ctx.source,
        crawled_at=ctx.crawled_at,
    )


def excused_comments(body: Mapping[str, Any]) -> int:
    """Comments a comment_v5 list counts but does not serve: ``counts.collapsed_counts`` +
    ``counts.reviewing_counts``."""
    counts = body.get("counts")
    if not isinstance(counts, Mapping):
        return 0
    values = (counts.get(key) for key in ("collapsed_counts", "reviewing_counts"))
    return sum(v for v in values if isinstance(v, int) and not isinstance(v, bool))


def unparsed_item(
    endpoint: str, url: str, raw: str, error: Exception, ctx: Context
) -> ZhihuUnparsedItem:
    """A payload (or entry) no item could be made of, its raw text bounded."""
    return ZhihuUnparsedItem(
        endpoint=endpoint,
        url=url,
        error=str(error)[:1000],
        body=raw[:UNPARSED_MAX_CHARS],
        truncated=len(raw) > UNPARSED_MAX_CHARS,
        source=ctx.source,
        crawled_at=ctx.crawled_at,
    )


@dataclass(slots=True)
class SearchPage:
    """What one search_v3 page leads to."""

    contents: list[JSON] = field(default_factory=list)  # answer/article/zvideo objects
    people: list[str] = field(default_factory=list)  # url_tokens
    skipped: list[str] = field(default_factory=list)  # entry or object types left out
    unwrapped: list[str] = field(default_factory=list)  # wrapper types a result came out of


def _result(found: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """The result object of an entry, out of one wrapper object if it sits in one."""
    if found.get("type") in (*CONTENT_TYPES, "people"):
        return found, None
    for key in WRAPPERS:
        inner = found.get(key)
        if isinstance(inner, Mapping) and inner.get("type") in (*CONTENT_TYPES, "people"):
            return inner, str(found.get("type"))
    return found, None


def search_page(data: Sequence[Mapping[str, Any]]) -> SearchPage:
    """Contents and people of ``search_result`` (and ``zvideo``) entries; ads, boxes, question
    results and unknown types are skipped, naming their type."""
    page = SearchPage()
    for entry in data:
        found = entry.get("object")
        if entry.get("type") not in SEARCH_ENTRIES or not isinstance(found, Mapping):
            page.skipped.append(str(entry.get("type")))
            continue
        result, wrapper = _result(found)
        if wrapper is not None:
            page.unwrapped.append(wrapper)
        kind = result.get("type")
        if kind in CONTENT_TYPES:
            page.contents.append(dict(result))
        elif kind == "people" and result.get("url_token"):
            page.people.append(str(result["url_token"]))
        else:
            page.skipped.append(str(kind))
    return page
