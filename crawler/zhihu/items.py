"""Items of the zhihu spider; each has a JSON Schema ``crawler/schemas/<item_type>.json``.

Ids are strings, times epoch seconds, counts ints, ``crawled_at`` a UTC datetime. A count the
payload did not give (absent, null, not a number) is ``None``, and the spider counts it in
``zhihu/missing_field/<item>/<field>``. docs/zhihu.md lists every field and schema version.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Literal, TypedDict

ContentType = Literal["answer", "article", "zvideo"]


class Author(TypedDict):
    id: str  # HMAC-SHA256 hex with ZHIHU_PRIVACY; "0" for anonymous without it
    url_token: str  # "" for anonymous
    name: str  # masked with ZHIHU_PRIVACY
    link: str  # the profile page, {www}/people/{url_token}; "" for anonymous
    avatar_url: str  # "" with ZHIHU_PRIVACY or when not given


@dataclass(slots=True)
class ZhihuContentItem:
    item_type: ClassVar[str] = "zhihu_content"
    schema_version: ClassVar[int] = 2

    content_id: str
    content_type: ContentType
    question_id: str | None  # answers only
    title: str  # the question title for answers
    excerpt: str
    content_text: str  # HTML stripped, paragraphs joined with "\n"
    content_url: str
    created_time: int
    updated_time: int
    voteup_count: int | None
    comment_count: int | None
    author: Author
    source: str  # the seed URL, or the search keyword
    crawled_at: datetime


@dataclass(slots=True)
class ZhihuCommentItem:
    item_type: ClassVar[str] = "zhihu_comment"
    schema_version: ClassVar[int] = 2

    comment_id: str
    parent_comment_id: str | None  # the comment replied to; None for a root comment
    content_id: str
    content_type: ContentType
    content: str  # plain text
    created_time: int
    like_count: int | None
    dislike_count: int | None
    sub_comment_count: int | None
    ip_location: str | None
    author: Author
    source: str
    crawled_at: datetime


@dataclass(slots=True)
class ZhihuCreatorItem:
    item_type: ClassVar[str] = "zhihu_creator"
    schema_version: ClassVar[int] = 2

    url_token: str
    id: str  # hashed like Author.id with ZHIHU_PRIVACY
    name: str  # masked with ZHIHU_PRIVACY
    link: str
    avatar_url: str  # "" with ZHIHU_PRIVACY
    gender: int | None  # 1 male, 0 female, -1 unknown
    headline: str
    follower_count: int | None
    following_count: int | None
    answer_count: int | None
    article_count: int | None
    zvideo_count: int | None
    column_count: int | None
    question_count: int | None
    voteup_count: int | None
    ip_location: str | None
    source: str
    crawled_at: datetime


@dataclass(slots=True)
class ZhihuQuestionItem:
    item_type: ClassVar[str] = "zhihu_question"
    schema_version: ClassVar[int] = 1

    question_id: str
    title: str
    detail: str  # HTML stripped
    question_url: str
    created_time: int | None
    updated_time: int | None
    answer_count: int | None
    follower_count: int | None
    visit_count: int | None
    comment_count: int | None
    topics: list[str]  # topic names
    author: Author
    source: str
    crawled_at: datetime


@dataclass(slots=True)
class ZhihuListItem:
    """What one list declared and what the crawl collected of it (crawler/zhihu/completeness.py):
    one per list chain, at its end; consumers keep the latest ``crawled_at`` per ``(list,
    owner_id)`` (a page that ran twice, or a list retried after it was recorded short, records
    it again)."""

    item_type: ClassVar[str] = "zhihu_list"
    schema_version: ClassVar[int] = 1

    list: str  # question_answers, member_answers/articles/zvideos, root_comment, child_comment
    owner_id: str  # question id, url_token, content id or root comment id
    declared: int  # paging.totals or the owner's count
    excused: int  # counted but never served (collapsed, under review)
    collected: int
    shortfall: int  # max(0, declared - excused - collected)
    source: str
    crawled_at: datetime


@dataclass(slots=True)
class ZhihuUnparsedItem:
    """A payload or entry no item could be made of. Its schema accepts nothing: the Kafka
    pipeline dead-letters it (``<topic>.dlq``) with the raw body, never drops it."""

    item_type: ClassVar[str] = "zhihu_unparsed"
    schema_version: ClassVar[int] = 1

    endpoint: str
    url: str
    error: str
    body: str  # the raw payload or entry, at most UNPARSED_MAX_CHARS characters
    truncated: bool
    source: str
    crawled_at: datetime


ZhihuItem = (
    ZhihuContentItem
    | ZhihuCommentItem
    | ZhihuCreatorItem
    | ZhihuQuestionItem
    | ZhihuListItem
    | ZhihuUnparsedItem
)
