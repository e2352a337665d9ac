"""Items of the zhihu spider; each has a JSON Schema ``crawler/schemas/<item_type>.json``.

Ids are strings, times epoch seconds, counts ints, ``crawled_at`` a UTC datetime.
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


@dataclass(slots=True)
class ZhihuContentItem:
    item_type: ClassVar[str] = "zhihu_content"
    schema_version: ClassVar[int] = 1

    content_id: str
    content_type: ContentType
    question_id: str | None  # answers only
    title: str  # the question title for answers
    excerpt: str
    content_text: str  # HTML stripped, paragraphs joined with "\n"
    content_url: str
    created_time: int
    updated_time: int
    voteup_count: int
    comment_count: int
    author: Author
    source: str  # the seed URL, or the search keyword
    crawled_at: datetime


@dataclass(slots=True)
class ZhihuCommentItem:
    item_type: ClassVar[str] = "zhihu_comment"
    schema_version: ClassVar[int] = 1

    comment_id: str
    parent_comment_id: str | None  # the comment replied to; None for a root comment
    content_id: str
    content_type: ContentType
    content: str  # plain text
    created_time: int
    like_count: int
    dislike_count: int
    sub_comment_count: int
    ip_location: str | None
    author: Author
    source: str
    crawled_at: datetime


@dataclass(slots=True)
class ZhihuCreatorItem:
    item_type: ClassVar[str] = "zhihu_creator"
    schema_version: ClassVar[int] = 1

    url_token: str
    name: str  # masked with ZHIHU_PRIVACY
    headline: str
    follower_count: int
    following_count: int
    answer_count: int
    article_count: int
    question_count: int
    voteup_count: int
    ip_location: str | None
    source: str
    crawled_at: datetime
