"""How the zhihu spider follows Zhihu's lists: contents, creators, comments, completeness.

The request building and list chains of :class:`crawler.spiders.zhihu.ZhihuSpider` (its
base class): each list page is its own request, carrying the chain's state in meta (all
JSON: requests live in the Redis frontier). Counts drive the crawl: a list is asked for when
its owner declares items (or does not say), children whenever a root declares more than it
embeds, pages past ``is_end`` while a declared total is not reached. See docs/zhihu.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from twisted.python.failure import Failure

from crawler.frontier.inspect import FAILURE_RETRIED_META, FAILURES_BEFORE_META
from crawler.spiders.base import RedisSpider
from crawler.zhihu.completeness import TALLY, Completeness, Tally, stat_deltas
from crawler.zhihu.items import ZhihuItem, ZhihuListItem, ZhihuUnparsedItem
from crawler.zhihu.parsers import (
    Context,
    content_item,
    creator_item,
    search_page,
    unparsed_item,
)
from crawler.zhihu.payloads import JSON, ListPage, ParseError, list_page
from crawler.zhihu.privacy import Privacy
from crawler.zhihu.settings import ZhihuSettings

logger = logging.getLogger(__name__)

Output = ZhihuItem | Request
# request meta keys (all JSON values)
SOURCE = "zhihu_source"  # the seed URL or search keyword, copied into items
ENDPOINT = "zhihu_endpoint"  # name of the endpoint template the request was built from
COUNT = "zhihu_count"  # items of this list chain so far (for ZHIHU_MAX_*)
CURSOR = "zhihu_cursor"  # offset / cursor of this page ("" for the first)
CONTENT = "zhihu_content"  # [content_type, content_id] of a comment request
OWNER = "zhihu_owner"  # id of what a list belongs to: question, url_token, content, root
SKIP = "zhihu_skip"  # comment ids a child list's first page repeats (the root's previews)
PEOPLE_SEED = "zhihu_people_seed"  # a people seed's profile: also list their content
RETRIES = "zhihu_retries"  # re-enqueues after a challenge or 40362
# the tally of a list chain recorded short when its page failed for good, carried by the chain
# once `crawler failed retry` sent that page again: its end records only what it adds
RECORDED = "zhihu_recorded"
OWN_META = ("zhihu_",)  # the prefix of the spider's meta keys (its state): no seed sets them
COMMENT_KINDS: dict[str, str] = {"answer": "answers", "article": "articles", "zvideo": "zvideos"}
CONTENT_LISTS = (
    "question_answers",
    "member_answers",
    "member_articles",
    "member_zvideos",
    "search",
)
# every error status reaches parse (a list page that fails must end its list); redirects are
# followed, but those to sign in or to the soft-block page (ZhihuApiMiddleware lets them in)
ERROR_STATUSES = tuple(range(400, 600))
MEMBER_LISTS = (  # creator mode: list endpoint, the profile's count of it
    ("member_answers", "answer_count"),
    ("member_articles", "article_count"),
    ("member_zvideos", "zvideo_count"),
)


# failure reasons of a page whose list was not recorded short when it failed: its callback
# raised, it could not be rebuilt, it never reached the downloader (a redirect refused when
# scheduled, a backlog record); at every other failure its errback or parse ended the list
UNRECORDED_FAILURES = ("spider_exception/", "decode/", "redirect/", "spill/", "refill/")


def recorded_before(meta: Mapping[str, Any], endpoint: str) -> Any:
    """The tally the ``endpoint`` list of a page sent again from its failure records (``crawler
    failed retry``) was recorded short with, when one of its failures recorded it: the chain's
    end records only what it adds to that. None for any other page, or list (a root's child
    list, recorded on its root comment's page)."""
    if meta.get(ENDPOINT) != endpoint:
        return None
    if RECORDED in meta:
        return meta[RECORDED]
    before = meta.get(FAILURES_BEFORE_META)
    reasons = [*(before if isinstance(before, list) else []), meta.get(FAILURE_RETRIED_META)]
    recorded = any(
        isinstance(reason, str) and reason and not reason.startswith(UNRECORDED_FAILURES)
        for reason in reasons
    )
    return meta[TALLY] if recorded and TALLY in meta else None


class ZhihuChains(RedisSpider):
    handle_httpstatus_list = ERROR_STATUSES
    config: ZhihuSettings
    privacy: Privacy
    creators_requested: set[str]  # url_tokens this node asked for (the frontier dedups too)
    completeness: Completeness

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
            errback=self.not_fetched,
            meta={**meta, ENDPOINT: endpoint},
            priority=priority,
            dont_filter=dont_filter,
        )

    def not_fetched(self, failure: Failure) -> Iterator[Output]:
        """Every request's errback: a list page that was not fetched (its download failed for
        good, a middleware dropped it: no usable session, robots.txt) ends its list there, as
        a page that failed for good does (its failure record, in cluster mode, is the
        frontier's)."""
        request: Request = failure.request  # type: ignore[attr-defined]  # Scrapy sets it
        endpoint = str(request.meta.get(ENDPOINT, ""))
        self._stat(f"not_fetched/{endpoint}")
        dropped = isinstance(failure.value, IgnoreRequest)  # its middleware said why
        logger.log(
            logging.INFO if dropped else logging.ERROR,
            "Not fetched: %s (%s): %s",
            request.url,
            endpoint,
            failure.value,
        )
        yield from self._cut_short(request.meta, endpoint)

    def _cut_short(self, meta: Mapping[str, Any], endpoint: str) -> Iterator[Output]:
        """A list page that failed for good (not fetched, an error answer, a payload that
        cannot be parsed) ends its list there: recorded with what it had collected, so its
        shortfall shows (a list that declared no total, or no list, has nothing to show)."""
        owner = str(meta.get(OWNER, ""))
        yield from self._recorded(endpoint, owner, Tally.of(meta), meta)

    def _follow(self, response: Response, url: str, endpoint: str, **meta: Any) -> Request:
        carried = {
            key: response.meta[key] for key in (SOURCE, CONTENT, OWNER) if key in response.meta
        }
        return self._request(url, endpoint, {**carried, **meta})

    def _content(self, obj: JSON, ctx: Context, *, highlighted: bool = False) -> Iterator[Output]:
        item = content_item(obj, ctx, highlighted=highlighted)
        self._stat(f"items/{item.content_type}")
        yield item
        # counts drive the crawl: an unknown count is asked for too
        if self.config.comments and item.comment_count != 0:
            url = self.config.endpoints.url(
                "root_comment",
                kind=COMMENT_KINDS[item.content_type],
                id=item.content_id,
                order=self.config.comment_order,
                limit=self.config.comment_page_size,
            )
            meta = {
                SOURCE: ctx.source,
                CONTENT: [item.content_type, item.content_id],
                OWNER: item.content_id,
            }
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
        tally = Tally.of(response.meta)
        if endpoint != "search":  # searches are not measured (no zhihu_list of them)
            tally = tally.declare(page.totals)
        entries = page.data
        if endpoint == "search":
            found = search_page(page.data)
            for kind in found.skipped:
                self._stat(f"search/skipped/{kind}")
            for kind in found.unwrapped:
                self._stat(f"search/unwrapped/{kind}")
            for url_token in found.people:
                yield from self._creator(url_token, ctx.source)
            entries = found.contents
        elif endpoint == "question_answers" and CURSOR not in response.meta:
            url = self.config.endpoints.url("question", qid=str(response.meta[OWNER]))
            yield self._follow(response, url, "question")
        count = int(response.meta.get(COUNT, 0))
        limit = self.config.max_answers
        if limit:
            entries = entries[: max(0, limit - count)]
        for entry in entries:
            try:
                yield from self._content(entry, ctx, highlighted=endpoint == "search")
            except ParseError as exc:
                yield self._entry_unparsed(response, endpoint, entry, exc, ctx)
                continue
            tally = tally.add(1)
        count += len(entries)
        yield from self._go_on(
            response, endpoint, page, tally, limited=bool(limit) and count >= limit, count=count
        )

    def _go_on(
        self,
        response: Response,
        endpoint: str,
        page: ListPage,
        tally: Tally,
        *,
        limited: bool,
        count: int,
        **meta: Any,
    ) -> Iterator[Output]:
        """The next page of a list chain, or its end. A list that declared more than it gave
        goes on past ``is_end`` while a next page is offered; a limit ends it unrecorded."""
        if not limited and page.next_url is not None and (not page.is_end or tally.wants_more()):
            yield self._next_page(response, page.next_url, endpoint, count, tally, **meta)
            return
        self._stat(f"list_end/{endpoint}")
        if not limited:
            owner = str(response.meta.get(OWNER, ""))
            yield from self._recorded(endpoint, owner, tally, response.meta)

    def _recorded(
        self, endpoint: str, owner: str, tally: Tally, meta: Mapping[str, Any]
    ) -> Iterator[ZhihuListItem]:
        """A finished list that declared items: its stats and ``zhihu_list`` item."""
        if not tally.declared:
            return
        deltas = self.completeness.record(endpoint, owner, tally)
        if (recorded := recorded_before(meta, endpoint)) is not None:
            before = stat_deltas(endpoint, Tally.of({TALLY: recorded}))
            deltas = {event: value - before.get(event, 0) for event, value in deltas.items()}
        for event, value in deltas.items():
            self._stat(event, value)
        yield tally.item(endpoint, owner, str(meta.get(SOURCE, "")))

    def _next_page(
        self,
        response: Response,
        next_url: str,
        endpoint: str,
        count: int,
        tally: Tally,
        **meta: Any,
    ) -> Request:
        """``paging.next`` on the configured API base (Zhihu sometimes answers http://...)."""
        api, found = urlsplit(self.config.api_url), urlsplit(next_url)
        url = found._replace(scheme=api.scheme, netloc=api.netloc).geturl()
        cursor = parse_qs(found.query).get("offset", [""])[0]
        more = {COUNT: count, CURSOR: cursor, **tally.meta(), **meta}
        if (recorded := recorded_before(response.meta, endpoint)) is not None:
            more[RECORDED] = recorded
        return self._follow(response, url, endpoint, **more)

    def _member(self, response: Response, body: JSON, ctx: Context) -> Iterator[Output]:
        item = creator_item(body, ctx)
        self._stat("items/creator")
        yield item
        if not (response.meta.get(PEOPLE_SEED) and self.config.creator_content):
            return
        for endpoint, field in MEMBER_LISTS:
            declared = getattr(item, field)
            if declared == 0:
                continue
            url = self.config.endpoints.url(
                endpoint, url_token=item.url_token, limit=self.config.page_size
            )
            meta = {OWNER: item.url_token, **Tally(declared).meta()}
            yield self._follow(response, url, endpoint, **meta)

    def _unparsed(
        self, response: Response, endpoint: str, raw: str, error: Exception, ctx: Context
    ) -> ZhihuUnparsedItem:
        """A payload or entry no item could be made of, for the dead-letter topic."""
        self._stat(f"unparsed/{endpoint}")
        return unparsed_item(endpoint, response.url, raw, error, ctx)

    def _entry_unparsed(
        self, response: Response, endpoint: str, entry: JSON, exc: ParseError, ctx: Context
    ) -> ZhihuUnparsedItem:
        logger.error("Cannot parse an entry of %s (%s): %s", response.url, endpoint, exc)
        raw = orjson.dumps(entry).decode()
        return self._unparsed(response, endpoint, raw, exc, ctx)

    def _missing(self, item: str, field: str) -> None:
        self._stat(f"missing_field/{item}/{field}")

    def _stat(self, event: str, count: int = 1) -> None:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(f"zhihu/{event}", count)
