"""Seed recognition (page URLs and JSON search seeds) and the URL templates of every endpoint.

Zhihu changes often: every base URL and template is a setting (``ZHIHU_*_URL``,
``ZHIHU_ENDPOINTS``). Templates use ``{www}``, ``{zhuanlan}``, ``{api}`` and per-endpoint fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import orjson

from crawler.frontier.seeds import InvalidSeed, Seed, decode_seed, parse_seed

TargetKind = Literal["question", "answer", "article", "people", "zvideo"]

_CONTENT_INCLUDE = (
    "data[*].content,excerpt,voteup_count,comment_count,created_time,updated_time,question,author"
)
_MEMBER_INCLUDE = (
    "follower_count,following_count,answer_count,articles_count,zvideo_count,columns_count,"
    "question_count,voteup_count,ip_info,headline,gender,avatar_url"
)
_QUESTION_INCLUDE = "detail,answer_count,follower_count,visit_count,comment_count,topics,author"
DEFAULT_ENDPOINTS: dict[str, str] = {
    "explore": "{www}/explore",
    "sign_in": "{www}/api/v3/oauth/sign_in",
    "answer_page": "{www}/answer/{aid}",
    "article_page": "{zhuanlan}/p/{id}",
    "zvideo_page": "{www}/zvideo/{id}",
    "question_answers": "{api}/questions/{qid}/answers?include="
    + _CONTENT_INCLUDE
    + "&limit={limit}&offset=0&sort_by={sort}&platform=desktop",
    "question": "{api}/questions/{qid}?include=" + _QUESTION_INCLUDE,
    "member": "{api}/members/{url_token}?include=" + _MEMBER_INCLUDE,
    "member_answers": "{api}/members/{url_token}/answers?include="
    + _CONTENT_INCLUDE
    + "&offset=0&limit={limit}&order_by=created",
    "member_articles": "{api}/members/{url_token}/articles?include="
    + _CONTENT_INCLUDE
    + "&offset=0&limit={limit}&order_by=created",
    "member_zvideos": "{api}/members/{url_token}/zvideos?offset=0&limit={limit}",
    "root_comment": "{api}/comment_v5/{kind}/{id}/root_comment?order={order}&offset=&limit={limit}",
    "child_comment": "{api}/comment_v5/comment/{root_id}/child_comment"
    "?order=sort&offset={cursor}&limit={limit}",
    "search": "{api}/search_v3?t=general&q={keyword}&correction=1&offset=0&limit={limit}"
    "&lc_idx=0&show_all_topics=0&search_source=Filter&time_interval={time_interval}"
    "&sort={sort}&vertical={vertical}",
    "answer_url": "{www}/question/{qid}/answer/{aid}",
    "article_url": "{zhuanlan}/p/{id}",
    "zvideo_url": "{www}/zvideo/{id}",
    "question_url": "{www}/question/{qid}",
    "people_url": "{www}/people/{url_token}",
}
# the fields each template must be formattable with (besides the base URLs)
ENDPOINT_FIELDS: dict[str, tuple[str, ...]] = {
    "explore": (),
    "sign_in": (),
    "answer_page": ("aid",),
    "article_page": ("id",),
    "zvideo_page": ("id",),
    "question_answers": ("qid", "limit", "sort"),
    "question": ("qid",),
    "member": ("url_token",),
    "member_answers": ("url_token", "limit"),
    "member_articles": ("url_token", "limit"),
    "member_zvideos": ("url_token", "limit"),
    "root_comment": ("kind", "id", "order", "limit"),
    "child_comment": ("root_id", "cursor", "limit"),
    "search": ("keyword", "limit", "time_interval", "sort", "vertical"),
    "answer_url": ("qid", "aid"),
    "article_url": ("id",),
    "zvideo_url": ("id",),
    "question_url": ("qid",),
    "people_url": ("url_token",),
}


@dataclass(frozen=True, slots=True)
class Endpoints:
    """Templates with the base URLs filled in; :meth:`url` fills the rest (URL-quoted)."""

    templates: Mapping[str, str]

    @classmethod
    def build(cls, templates: Mapping[str, Any], www: str, zhuanlan: str, api: str) -> Endpoints:
        filled: dict[str, str] = {}
        for name, template in templates.items():
            where = f"ZHIHU_ENDPOINTS[{name!r}]={template!r}"
            if name not in ENDPOINT_FIELDS:
                raise ValueError(f"{where}: unknown endpoint (known: {sorted(ENDPOINT_FIELDS)})")
            if not isinstance(template, str):
                raise ValueError(f"{where} must be a string")
            fields = {f: f"{{{f}}}" for f in ENDPOINT_FIELDS[name]}
            try:
                filled[name] = template.format(www=www, zhuanlan=zhuanlan, api=api, **fields)
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(f"{where} is not a valid template: {exc!r}") from None
        return cls(filled)

    def url(self, name: str, **fields: str | int) -> str:
        quoted = {key: quote(str(value), safe="") for key, value in fields.items()}
        return self.templates[name].format(**quoted)


@dataclass(frozen=True, slots=True)
class Target:
    """What a page URL seed names."""

    kind: TargetKind
    id: str  # question id, answer id, article id, zvideo id or url_token
    question_id: str | None = None  # of an answer URL that names it


_PATHS: tuple[tuple[re.Pattern[str], TargetKind], ...] = (
    (re.compile(r"/question/([0-9]{1,20})/answer/([0-9]{1,20})"), "answer"),
    (re.compile(r"/question/([0-9]{1,20})"), "question"),
    (re.compile(r"/answer/([0-9]{1,20})"), "answer"),
    (re.compile(r"/p/([0-9]{1,20})"), "article"),
    (re.compile(r"/people/([A-Za-z0-9_.-]{1,100})"), "people"),
    (re.compile(r"/zvideo/([0-9]{1,20})"), "zvideo"),
)


def recognize(url: str, hosts: frozenset[str]) -> Target:
    """The target of a Zhihu page URL (query string and fragment ignored), or InvalidSeed."""
    parts = urlsplit(url)
    if parts.netloc.lower() not in hosts:
        raise InvalidSeed("zhihu_host", f"seed url {url[:200]!r} is not on {sorted(hosts)}")
    path = parts.path.rstrip("/")
    for pattern, kind in _PATHS:
        match = pattern.fullmatch(path)
        if match is None:
            continue
        groups = match.groups()
        if len(groups) == 2:  # /question/{qid}/answer/{aid}
            return Target(kind, groups[1], question_id=groups[0])
        return Target(kind, groups[0])
    raise InvalidSeed(
        "zhihu_url",
        f"seed url {url[:200]!r} is no question, answer, article, people or zvideo page",
    )


SEARCH_SORTS = frozenset({"", "upvoted_count", "created_time"})
SEARCH_INTERVALS = frozenset(
    {"", "a_day", "a_week", "a_month", "three_months", "half_a_year", "a_year"}
)
SEARCH_VERTICALS = frozenset({"", "answer", "article", "zvideo"})
_SEARCH_FIELDS = frozenset(
    {"keyword", "type", "sort", "time_interval", "vertical", "priority", "meta"}
)


@dataclass(frozen=True, slots=True)
class SearchSeed:
    keyword: str
    sort: str = ""
    time_interval: str = ""
    vertical: str = ""
    priority: int = 0
    meta: Mapping[str, Any] = field(default_factory=dict)


def _choice(payload: Mapping[str, Any], name: str, allowed: frozenset[str]) -> str:
    value = payload.get(name, "")
    if not isinstance(value, str) or value not in allowed:
        raise InvalidSeed(
            "zhihu_search", f"search seed {name}={value!r} must be one of {sorted(allowed)}"
        )
    return value


def parse_search_seed(payload: Mapping[str, Any]) -> SearchSeed:
    """``{"keyword": ..., "type": "search", "sort"?, "time_interval"?, "vertical"?}``."""
    unknown = set(payload) - _SEARCH_FIELDS
    if unknown:
        raise InvalidSeed("zhihu_search", f"search seed has unknown fields {sorted(unknown)}")
    if payload.get("type", "search") != "search":
        raise InvalidSeed("zhihu_search", f"seed type {payload.get('type')!r} is not 'search'")
    keyword = payload.get("keyword")
    if not isinstance(keyword, str) or not keyword.strip() or len(keyword) > 200:
        raise InvalidSeed("zhihu_search", "search seed needs a keyword of 1-200 characters")
    priority, meta = payload.get("priority", 0), payload.get("meta") or {}
    if isinstance(priority, bool) or not isinstance(priority, int) or not isinstance(meta, dict):
        raise InvalidSeed("zhihu_search", "search seed priority must be an int, meta an object")
    return SearchSeed(
        keyword=keyword.strip(),
        sort=_choice(payload, "sort", SEARCH_SORTS),
        time_interval=_choice(payload, "time_interval", SEARCH_INTERVALS),
        vertical=_choice(payload, "vertical", SEARCH_VERTICALS),
        priority=priority,
        meta=meta,
    )


def parse_zhihu_seed(
    raw: bytes | str, *, max_bytes: int, encoding: str = "utf-8"
) -> Seed | SearchSeed:
    """A JSON object without ``url`` but with ``keyword`` or ``type`` is a search seed;
    anything else is a common seed (``crawler.frontier.seeds.parse_seed``)."""
    text = decode_seed(raw, max_bytes=max_bytes, encoding=encoding)
    if text.startswith("{"):
        try:
            payload = orjson.loads(text.encode("utf-8", "surrogatepass"))
        except orjson.JSONDecodeError:
            payload = None  # parse_seed names the JSON error
        if (
            isinstance(payload, dict)
            and "url" not in payload
            and ("keyword" in payload or "type" in payload)
        ):
            return parse_search_seed(payload)
    return parse_seed(text, max_bytes=max_bytes)
