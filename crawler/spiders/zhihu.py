"""``zhihu``: answers, articles, videos, comments and creators of Zhihu seeds.

Seeds (``zhihu:start_urls``): question, answer, article, people and zvideo page URLs, and JSON
search seeds ``{"keyword": ..., "type": "search"}``. Every list page is its own request in the
shared frontier (seed and cursor in meta), so a killed node's page is re-run elsewhere.
Requests carry a shared session (``session_platform = "zhihu"``) and are signed by
:class:`crawler.zhihu.middleware.ZhihuApiMiddleware`. See docs/zhihu.md.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.settings import BaseSettings

from crawler.frontier.seeds import InvalidSeed, Seed
from crawler.sessions import Health
from crawler.spiders.base import RedisSpider
from crawler.spiders.seed_rules import check_seed_meta
from crawler.zhihu.errors import ApiError, Problem, classify
from crawler.zhihu.items import ZhihuCommentItem, ZhihuContentItem, ZhihuCreatorItem
from crawler.zhihu.login import PasswordLogin
from crawler.zhihu.parsers import (
    JSON,
    Context,
    ParseError,
    comment_item,
    content_item,
    creator_item,
    list_page,
    page_entities,
)
from crawler.zhihu.privacy import Privacy, shared_privacy_key
from crawler.zhihu.settings import ZhihuSettings
from crawler.zhihu.urls import SearchSeed, Target, parse_zhihu_seed, recognize

logger = logging.getLogger(__name__)

Output = ZhihuContentItem | ZhihuCommentItem | ZhihuCreatorItem | Request
# request meta keys (all JSON values: requests live in the Redis frontier)
SOURCE = "zhihu_source"  # the seed URL or search keyword, copied into items
ENDPOINT = "zhihu_endpoint"  # name of the endpoint template the request was built from
COUNT = "zhihu_count"  # items of this list chain so far (for ZHIHU_MAX_*)
CURSOR = "zhihu_cursor"  # offset / cursor of this page ("" for the first)
CONTENT = "zhihu_content"  # [content_type, content_id] of a comment request
PEOPLE_SEED = "zhihu_people_seed"  # a people seed's profile: also list their content
RETRIES = "zhihu_retries"  # re-enqueues after a challenge or 40362
CARRIED = (SOURCE, ENDPOINT, COUNT, CURSOR, CONTENT, PEOPLE_SEED)
COMMENT_KINDS: dict[str, str] = {"answer": "answers", "article": "articles", "zvideo": "zvideos"}
PAGE_KINDS: dict[str, tuple[str, str]] = {  # page endpoint -> (entities key, content type)
    "answer_page": ("answers", "answer"),
    "article_page": ("articles", "article"),
    "zvideo_page": ("zvideos", "zvideo"),
}
CONTENT_LISTS = ("question_answers", "member_answers", "member_articles", "search")
RETRIED = (Problem.CHALLENGE, Problem.RATE_LIMITED)
API_MIDDLEWARE = "crawler.zhihu.middleware.ZhihuApiMiddleware"
API_MIDDLEWARE_ORDER = 730  # after SharedSessionMiddleware (720): signs the session's d_c0


class ZhihuSpider(RedisSpider):
    name = "zhihu"
    session_platform: str | None = "zhihu"
    custom_settings: dict[str, Any] | None = {  # noqa: RUF012 - Scrapy's own attribute
        "KAFKA_TOPIC_TEMPLATE": "spider-{spider}-{item_type}",
    }
    config: ZhihuSettings
    privacy: Privacy
    session_accounts: tuple[str, ...] = ()
    creators_requested: set[str]  # url_tokens this node asked for (the frontier dedups too)

    @classmethod
    def update_settings(cls, settings: BaseSettings) -> None:
        """Adds ``ZhihuApiMiddleware`` after the session middleware (720) to the project's
        downloader middlewares (a dict in ``custom_settings`` would replace them all)."""
        super().update_settings(settings)
        middlewares = settings.getdict("DOWNLOADER_MIDDLEWARES")
        middlewares.setdefault(API_MIDDLEWARE, API_MIDDLEWARE_ORDER)
        priority = settings.getpriority("DOWNLOADER_MIDDLEWARES") or 0
        settings.set("DOWNLOADER_MIDDLEWARES", middlewares, priority=max(priority, 30))

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> ZhihuSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        assert isinstance(spider, ZhihuSpider)
        spider.config = ZhihuSettings.from_settings(crawler.settings)
        key = spider.config.privacy_key.encode()
        if spider.config.privacy and not key:
            key = shared_privacy_key(spider.seed_settings.redis_url)
        spider.privacy = Privacy(spider.config.privacy, key)
        spider.session_accounts = spider.config.accounts
        if not spider.config.sessions:
            spider.session_platform = None
        spider.creators_requested = set()
        return spider

    # Sessions ------------------------------------------------------------------------------

    def session_login(self) -> PasswordLogin | None:
        if not self.config.accounts:
            return None
        endpoints = self.config.endpoints
        return PasswordLogin(
            endpoints.url("explore"),
            endpoints.url("sign_in"),
            self.config.password_env,
            self.config.user_agent,
        )

    def session_state(self, response: Response) -> Health | None:
        """100/101: the session expired; 40362: risky (the account rests, the request is
        retried with another one). Anything else is not the session's fault."""
        error = classify(response.status, response.body)
        if error is None:
            return None
        if error.problem is Problem.LOGIN:
            return Health.EXPIRED
        return Health.RISKY if error.problem is Problem.RATE_LIMITED else None

    # Seeds ---------------------------------------------------------------------------------

    def make_request_from_data(self, data: bytes) -> Request:
        config = self.seed_settings
        seed = parse_zhihu_seed(data, max_bytes=config.max_bytes, encoding=config.encoding)
        if isinstance(seed, SearchSeed):
            self._stat("seed/search")
            url = self.config.endpoints.url(
                "search",
                keyword=seed.keyword,
                limit=self.config.page_size,
                time_interval=seed.time_interval,
                sort=seed.sort,
                vertical=seed.vertical,
            )
            check_seed_meta(seed.meta, config.allowed_meta)
            meta = {**seed.meta, SOURCE: seed.keyword}
            return self._request(url, "search", meta, dont_filter=self.seed_dont_filter(None))
        return self.request_from_seed(seed)

    def request_from_seed(self, seed: Seed) -> Request:
        if seed.method != "GET" or seed.body or seed.callback or seed.formdata:
            raise InvalidSeed(
                "zhihu_seed", "zhihu seeds take no method, body, callback or form fields"
            )
        check_seed_meta(seed.meta, self.seed_settings.allowed_meta)
        target = recognize(seed.url, self.config.seed_hosts)
        self._stat(f"seed/{target.kind}")
        endpoint, fields = self._first_endpoint(target)
        meta = {**seed.meta, SOURCE: seed.url, PEOPLE_SEED: target.kind == "people"}
        url = self.config.endpoints.url(endpoint, **fields)
        dont_filter = self.seed_dont_filter(seed.dont_filter)
        return self._request(url, endpoint, meta, priority=seed.priority, dont_filter=dont_filter)

    def _first_endpoint(self, target: Target) -> tuple[str, dict[str, str | int]]:
        if target.kind == "question":
            return "question_answers", {
                "qid": target.id,
                "limit": self.config.page_size,
                "sort": self.config.answer_sort,
            }
        if target.kind == "people":
            return "member", {"url_token": target.id}
        if target.kind == "answer":
            return "answer_page", {"aid": target.id}
        return f"{target.kind}_page", {"id": target.id}

    def _request(
        self,
        url: str,
        endpoint: str,
        meta: Mapping[str, Any],
        *,
        priority: int = 0,
        dont_filter: bool = False,
    ) -> Request:
        """Seeds follow SEEDS_DONT_FILTER (pushing a seed again crawls it again); retries
        are never filtered."""
        return Request(
            url,
            callback=self.parse,
            meta={**meta, ENDPOINT: endpoint, "handle_httpstatus_all": True},
            priority=priority,
            dont_filter=dont_filter,
        )

    def _follow(self, response: Response, url: str, endpoint: str, **meta: Any) -> Request:
        carried = {key: response.meta[key] for key in (SOURCE, CONTENT) if key in response.meta}
        return self._request(url, endpoint, {**carried, **meta})

    # Responses -----------------------------------------------------------------------------

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Output]:
        endpoint = str(response.meta.get(ENDPOINT, ""))
        error = classify(response.status, response.body)
        if error is not None:
            yield from self._failed(response, endpoint, error)
            return
        ctx = Context(
            source=str(response.meta.get(SOURCE, "")),
            crawled_at=datetime.now(UTC),
            privacy=self.privacy,
            endpoints=self.config.endpoints,
        )
        try:
            if endpoint in PAGE_KINDS:
                yield from self._page(response, endpoint, ctx)
                return
            body = orjson.loads(response.body)
            if not isinstance(body, dict):
                raise ParseError("the answer is not a JSON object")
            if endpoint in CONTENT_LISTS:
                yield from self._content_list(response, endpoint, body, ctx)
            elif endpoint == "member":
                yield from self._member(response, body, ctx)
            elif endpoint in ("root_comment", "child_comment"):
                yield from self._comments(response, endpoint, body, ctx)
            else:
                raise ParseError(f"no handler for endpoint {endpoint!r}")
        except (ParseError, orjson.JSONDecodeError) as exc:
            self._stat(f"parse_error/{endpoint}")
            logger.error("Cannot parse %s (%s): %s", response.url, endpoint, exc)

    def _failed(self, response: Response, endpoint: str, error: ApiError) -> Iterator[Request]:
        self._stat(
            f"{error.problem.value}/{endpoint}"
            if error.problem is not Problem.OTHER
            else f"api_error/{error.code}"
        )
        if error.problem not in RETRIED:
            logger.error(
                "%s answered %s (%s %s): not retried",
                response.url,
                error.problem.value,
                error.code,
                error.message[:200],
            )
            return
        tries = int(response.meta.get(RETRIES, 0)) + 1
        if tries > self.config.max_retries:
            self._stat(f"gave_up/{error.problem.value}")
            logger.error("%s: %s %d times, giving up", response.url, error.problem.value, tries)
            return
        self._stat(f"retry/{error.problem.value}")
        meta = {key: response.meta[key] for key in CARRIED if key in response.meta}
        retry = self._request(response.url, endpoint, {**meta, RETRIES: tries}, dont_filter=True)
        retry.priority = response.request.priority - 1 if response.request else -1
        yield retry

    def _page(self, response: Response, endpoint: str, ctx: Context) -> Iterator[Output]:
        kind, content_type = PAGE_KINDS[endpoint]
        wanted = urlsplit(response.url).path.rstrip("/").rsplit("/", 1)[-1]
        found = page_entities(response.text).get(kind, {}).get(wanted)
        if found is None:
            raise ParseError(f"the page has no {content_type} {wanted}")
        yield from self._content(found, ctx)

    def _content(self, obj: JSON, ctx: Context, *, highlighted: bool = False) -> Iterator[Output]:
        item = content_item(obj, ctx, highlighted=highlighted)
        self._stat(f"items/{item.content_type}")
        yield item
        if self.config.comments and item.comment_count > 0:
            url = self.config.endpoints.url(
                "root_comment",
                kind=COMMENT_KINDS[item.content_type],
                id=item.content_id,
                order=self.config.comment_order,
                limit=self.config.comment_page_size,
            )
            meta = {SOURCE: ctx.source, CONTENT: [item.content_type, item.content_id]}
            yield self._request(url, "root_comment", meta)
        yield from self._creator(item.author["url_token"], ctx.source)

    def _creator(self, url_token: str, source: str) -> Iterator[Request]:
        if not self.config.creators or not url_token or url_token in self.creators_requested:
            return
        self.creators_requested.add(url_token)
        url = self.config.endpoints.url("member", url_token=url_token)
        yield self._request(url, "member", {SOURCE: source})

    def _content_list(
        self, response: Response, endpoint: str, body: JSON, ctx: Context
    ) -> Iterator[Output]:
        page = list_page(body, response.url)
        entries = page.data
        if endpoint == "search":
            entries = yield from self._search_entries(page.data, ctx)
        count = int(response.meta.get(COUNT, 0))
        limit = self.config.max_answers
        if limit:
            entries = entries[: max(0, limit - count)]
        for entry in entries:
            yield from self._content(entry, ctx, highlighted=endpoint == "search")
        count += len(entries)
        if page.next_url is None or (limit and count >= limit):
            self._stat(f"list_end/{endpoint}")
            return
        yield self._next_page(response, page.next_url, endpoint, count)

    def _next_page(self, response: Response, next_url: str, endpoint: str, count: int) -> Request:
        """``paging.next`` on the configured API base (Zhihu sometimes answers http://...)."""
        api, found = urlsplit(self.config.api_url), urlsplit(next_url)
        url = found._replace(scheme=api.scheme, netloc=api.netloc).geturl()
        cursor = parse_qs(found.query).get("offset", [""])[0]
        return self._follow(response, url, endpoint, **{COUNT: count, CURSOR: cursor})

    def _search_entries(
        self, data: list[JSON], ctx: Context
    ) -> Generator[Request, None, list[JSON]]:
        """Yields creator requests for people results; returns the contents to parse."""
        contents: list[JSON] = []
        for entry in data:
            found = entry.get("object")
            kind = found.get("type") if isinstance(found, dict) else None
            if entry.get("type") != "search_result" or not isinstance(found, dict):
                self._stat(f"search/skipped/{entry.get('type')}")
            elif kind in COMMENT_KINDS:
                contents.append(found)
            elif kind == "people":
                yield from self._creator(str(found.get("url_token") or ""), ctx.source)
            else:
                self._stat(f"search/skipped/{kind}")
        return contents

    def _member(self, response: Response, body: JSON, ctx: Context) -> Iterator[Output]:
        item = creator_item(body, ctx)
        self._stat("items/creator")
        yield item
        if not (response.meta.get(PEOPLE_SEED) and self.config.creator_content):
            return
        for endpoint in ("member_answers", "member_articles"):
            url = self.config.endpoints.url(
                endpoint, url_token=item.url_token, limit=self.config.page_size
            )
            yield self._follow(response, url, endpoint)

    def _comments(
        self, response: Response, endpoint: str, body: JSON, ctx: Context
    ) -> Iterator[Output]:
        content_type, content_id = response.meta[CONTENT]
        page = list_page(body, response.url)
        count, limit = int(response.meta.get(COUNT, 0)), self.config.max_comments
        for obj in page.data:
            if limit and count >= limit:
                break
            previews = obj.get("child_comments") or [] if endpoint == "root_comment" else []
            for comment in (obj, *previews):
                item = comment_item(comment, content_type, content_id, ctx)
                self._stat("items/comment")
                count += 1
                yield item
                yield from self._creator(item.author["url_token"], ctx.source)
            cursor = obj.get("child_comment_next_offset")
            if cursor and (not limit or count < limit):
                yield self._child_comments(response, str(obj["id"]), str(cursor), len(previews))
        if page.next_url is None or (limit and count >= limit):
            self._stat(f"list_end/{endpoint}")
            return
        yield self._next_page(response, page.next_url, endpoint, count)

    def _child_comments(self, response: Response, root_id: str, cursor: str, seen: int) -> Request:
        url = self.config.endpoints.url(
            "child_comment", root_id=root_id, cursor=cursor, limit=self.config.comment_page_size
        )
        meta = {CONTENT: response.meta[CONTENT], COUNT: seen, CURSOR: cursor}
        return self._follow(response, url, "child_comment", **meta)

    def _stat(self, event: str) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(f"zhihu/{event}")
