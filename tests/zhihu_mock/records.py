"""The records of the mock's content, and :class:`MockData` listing which exist.

Ids are strings of digits (19 for recent objects, fewer for old ones), times epoch seconds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

ContentType = Literal["answer", "article", "zvideo"]
EntryKind = Literal["search_result", "koc_box", "knowledge_ad", "relevant_query"]

ROOT = "0"  # reply_comment_id / reply_root_comment_id of a root comment
ANONYMOUS = ""  # author url_token of an anonymous answer


@dataclass(frozen=True)
class Person:
    id: str  # 32 hex characters
    url_token: str
    name: str
    headline: str
    gender: int  # -1 unknown, 0 female, 1 male
    avatar_url: str
    is_org: bool
    follower_count: int
    following_count: int
    voteup_count: int
    ip_location: str


@dataclass(frozen=True)
class Topic:
    id: str
    name: str


@dataclass(frozen=True)
class Question:
    id: str
    title: str
    detail: str  # HTML
    author: str  # url_token
    created: int
    updated_time: int
    follower_count: int
    visit_count: int
    topics: tuple[Topic, ...]
    answer_ids: tuple[str, ...]  # default order


@dataclass(frozen=True)
class Answer:
    id: str
    question_id: str
    author: str  # url_token, or ANONYMOUS
    content: str  # HTML
    created_time: int
    updated_time: int
    voteup_count: int
    thanks_count: int
    ip_info: str
    is_collapsed: bool


@dataclass(frozen=True)
class Article:
    id: str
    title: str
    author: str
    content: str
    created: int
    updated: int
    voteup_count: int
    image_url: str
    ip_info: str


@dataclass(frozen=True)
class Zvideo:
    id: str
    title: str
    description: str
    author: str
    created_at: int
    updated_at: int
    duration: int  # seconds
    play_count: int
    voteup_count: int
    image_url: str


@dataclass(frozen=True)
class Comment:
    id: str
    content_type: ContentType
    content_id: str
    root_id: str  # ROOT for a root comment
    reply_id: str  # the comment replied to; ROOT for a root comment
    author: str
    reply_to_author: str  # url_token of the replied comment's author, "" for a root
    content: str
    created_time: int
    like_count: int
    dislike_count: int
    score: int
    ip_info: str

    @property
    def is_root(self) -> bool:
        return self.root_id == ROOT


@dataclass(frozen=True)
class SearchEntry:
    kind: EntryKind  # only "search_result" entries are content; crawlers skip the others
    id: str
    object_type: str  # answer, article, question, zvideo, people; "" for ads
    object_id: str  # an id, or a url_token for people; "" for ads


@dataclass
class MockData:
    """Which objects exist; tests compare crawled items with these field by field."""

    people: dict[str, Person]  # by url_token
    questions: dict[str, Question]
    answers: dict[str, Answer]
    articles: dict[str, Article]
    zvideos: dict[str, Zvideo]
    comments: dict[str, Comment]
    search: dict[str, tuple[SearchEntry, ...]]  # by keyword, in result order
    _by_content: dict[tuple[str, str], list[Comment]] = field(init=False, repr=False)
    _children: dict[str, list[Comment]] = field(init=False, repr=False)
    _by_author: dict[tuple[str, str], list[str]] = field(init=False, repr=False)
    _answer_index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._by_content = defaultdict(list)
        self._children = defaultdict(list)
        self._by_author = defaultdict(list)
        self._answer_index = {
            aid: i for q in self.questions.values() for i, aid in enumerate(q.answer_ids)
        }
        for comment in self.comments.values():
            self._by_content[comment.content_type, comment.content_id].append(comment)
            if not comment.is_root:
                self._children[comment.root_id].append(comment)
        for children in self._children.values():
            children.sort(key=lambda c: (c.created_time, c.id))
        authored: list[tuple[str, str, str]] = [
            *(("answer", a.author, a.id) for a in self.answers.values()),
            *(("article", a.author, a.id) for a in self.articles.values()),
            *(("zvideo", z.author, z.id) for z in self.zvideos.values()),
            *(("question", q.author, q.id) for q in self.questions.values()),
        ]
        for kind, author, object_id in authored:
            self._by_author[kind, author].append(object_id)

    def answer_index(self, answer_id: str) -> int:
        """Position of an answer in its question's default order."""
        return self._answer_index[answer_id]

    def comments_of(self, content_type: str, content_id: str) -> list[Comment]:
        """Root and child comments of one answer, article or zvideo."""
        return list(self._by_content.get((content_type, content_id), ()))

    def roots_of(self, content_type: str, content_id: str) -> list[Comment]:
        return [c for c in self._by_content.get((content_type, content_id), ()) if c.is_root]

    def children_of(self, root_id: str) -> list[Comment]:
        """Child comments of a root, oldest first (the order of ``order=sort``)."""
        return list(self._children.get(root_id, ()))

    def authored_by(self, kind: str, url_token: str) -> list[str]:
        """Ids of the answers/articles/zvideos/questions of one person, newest first."""
        ids = self._by_author.get((kind, url_token), [])
        return sorted(ids, key=lambda i: (-self._created(kind, i), i))

    def _created(self, kind: str, object_id: str) -> int:
        if kind == "answer":
            return self.answers[object_id].created_time
        if kind == "article":
            return self.articles[object_id].created
        if kind == "zvideo":
            return self.zvideos[object_id].created_at
        return self.questions[object_id].created

    def content_author(self, content_type: str, content_id: str) -> str:
        if content_type == "answer":
            return self.answers[content_id].author
        if content_type == "article":
            return self.articles[content_id].author
        return self.zvideos[content_id].author
