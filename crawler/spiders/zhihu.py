"""``zhihu``: answers, articles, videos, comments and creators of Zhihu seeds.

Seeds (``zhihu:start_urls``): question, answer, article, people and zvideo page URLs, and JSON
search seeds ``{"keyword": ..., "type": "search"}``. Every list page is its own request in the
shared frontier (seed and cursor in meta), so a killed node's page is re-run elsewhere.
Requests carry a shared session (``session_platform = "zhihu"``) and are signed by
:class:`crawler.zhihu.middleware.ZhihuApiMiddleware`. See docs/zhihu.md.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import orjson
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.settings import BaseSettings

from crawler.frontier.inspect import FAILURE_RETRIED_META
from crawler.frontier.seeds import InvalidSeed, Seed
from crawler.middlewares.lease_output import fail_page
from crawler.middlewares.session_http import default_state
from crawler.sessions import Health
from crawler.spiders.seed_rules import check_seed_meta
from crawler.spiders.zhihu_chains import (
    CONTENT,
    CONTENT_LISTS,
    COUNT,
    CURSOR,
    ENDPOINT,
    OWN_META,
    OWNER,
    PEOPLE_SEED,
    RECORDED,
    RETRIES,
    SKIP,
    SOURCE,
    Output,
    recorded_before,
)
from crawler.spiders.zhihu_comments import ZhihuComments
from crawler.zhihu.completeness import TALLY, Completeness
from crawler.zhihu.errors import ApiError, Problem
from crawler.zhihu.login import PasswordLogin, account_password
from crawler.zhihu.middleware import response_error
from crawler.zhihu.parsers import Context, question_item
from crawler.zhihu.payloads import ParseError, page_entities
from crawler.zhihu.privacy import Privacy, shared_privacy_key
from crawler.zhihu.settings import ZhihuSettings
from crawler.zhihu.urls import SearchSeed, Target, parse_zhihu_seed, recognize

logger = logging.getLogger(__name__)

# meta a retried request keeps (the keys are in crawler.spiders.zhihu_chains)
CARRIED = (SOURCE, ENDPOINT, COUNT, CURSOR, CONTENT, PEOPLE_SEED, OWNER, SKIP, TALLY, RECORDED)
PAGE_KINDS: dict[str, tuple[str, str]] = {  # page endpoint -> (entities key, content type)
    "answer_page": ("answers", "answer"),
    "article_page": ("articles", "article"),
    "zvideo_page": ("zvideos", "zvideo"),
}
RETRIED = (Problem.CHALLENGE, Problem.RATE_LIMITED, Problem.BLOCKED)
RISKY = (Problem.RATE_LIMITED, Problem.BLOCKED)
API_MIDDLEWARE = "crawler.zhihu.middleware.ZhihuApiMiddleware"
API_MIDDLEWARE_ORDER = 730  # after SharedSessionMiddleware (720): signs the session's d_c0


class ZhihuSpider(ZhihuComments):
    name = "zhihu"
    session_platform: str | None = "zhihu"
    custom_settings: dict[str, Any] | None = {  # noqa: RUF012 - Scrapy's own attribute
        "KAFKA_TOPIC_TEMPLATE": "spider-{spider}-{item_type}",
    }
    session_accounts: tuple[str, ...] = ()

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
        spider._say_missing_passwords()
        spider.creators_requested = set()
        spider.completeness = Completeness()
        return spider

    def closed(self, reason: str) -> None:
        assert self.crawler.stats is not None
        summary = self.completeness.summary(self.crawler.stats.get_stats())
        logger.info("Zhihu completeness on this node: %s", summary)

    # Sessions ------------------------------------------------------------------------------

    def _say_missing_passwords(self) -> None:
        """An account without its password is noticed at start, not at its first re-login."""
        if self.session_platform is None:
            return
        for account in self.config.accounts:
            variable, password = account_password(self.config.password_env, account)
            if not password:
                logger.warning(
                    "No password for zhihu account %r in $%s: its session cannot be renewed "
                    "when it expires (its requests then fail as sessions/unavailable); set the "
                    "variable, or import its sessions again (crawler sessions import)",
                    account,
                    variable,
                )

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
        """100/101, a bare 401, a redirect to sign in: the session expired; 40362, a redirect
        to the soft-block page: risky (the account rests, the request is retried with another
        one). Anything else goes by the default rule (``default_state``: a 429 is risky)."""
        error = response_error(response)
        if error is not None and error.problem is Problem.LOGIN:
            return Health.EXPIRED
        if error is not None and error.problem in RISKY:
            return Health.RISKY
        return default_state(response)

    # Seeds ---------------------------------------------------------------------------------

    def make_request_from_data(self, data: bytes) -> Request:
        config = self.seed_settings
        seed = parse_zhihu_seed(data, max_bytes=config.max_bytes, encoding=config.encoding)
        if isinstance(seed, SearchSeed):
            check_seed_meta(seed.meta, config.allowed_meta, OWN_META)
            self._stat("seed/search")
            url = self.config.endpoints.url(
                "search",
                keyword=seed.keyword,
                limit=self.config.page_size,
                time_interval=seed.time_interval,
                sort=seed.sort,
                vertical=seed.vertical,
            )
            meta = {**seed.meta, SOURCE: seed.keyword}
            return self._request(
                url,
                "search",
                meta,
                priority=seed.priority,
                dont_filter=self.seed_dont_filter(None),
            )
        return self.request_from_seed(seed)

    def request_from_seed(self, seed: Seed) -> Request:
        if seed.method != "GET" or seed.body or seed.callback or seed.formdata or seed.headers:
            raise InvalidSeed(
                "zhihu_seed",
                "zhihu seeds take no method, body, callback, form fields or headers (the spider "
                "signs and sends its own; a login goes through the shared sessions)",
            )
        check_seed_meta(seed.meta, self.seed_settings.allowed_meta, OWN_META)
        target = recognize(seed.url, self.config.seed_hosts)
        self._stat(f"seed/{target.kind}")
        endpoint, fields = self._first_endpoint(target)
        meta = {
            **seed.meta,
            SOURCE: seed.url,
            PEOPLE_SEED: target.kind == "people",
            OWNER: target.id,
        }
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

    # Responses -----------------------------------------------------------------------------

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Output]:
        endpoint = str(response.meta.get(ENDPOINT, ""))
        error = response_error(response)
        if error is not None:
            yield from self._failed(response, endpoint, error)
            return
        ctx = Context(
            source=str(response.meta.get(SOURCE, "")),
            crawled_at=datetime.now(UTC),
            privacy=self.privacy,
            endpoints=self.config.endpoints,
            missing=self._missing,
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
            elif endpoint == "question":
                self._stat("items/question")
                yield question_item(body, ctx)
            elif endpoint in ("root_comment", "child_comment"):
                yield from self._comments(response, endpoint, body, ctx)
            else:
                raise ParseError(f"no handler for endpoint {endpoint!r}")
        except (ParseError, orjson.JSONDecodeError) as exc:
            self._stat(f"parse_error/{endpoint}")
            logger.error("Cannot parse %s (%s): %s", response.url, endpoint, exc)
            yield self._unparsed(response, endpoint, response.text, exc, ctx)
            yield from self._cut_short(response.meta, endpoint)

    def _failed(self, response: Response, endpoint: str, error: ApiError) -> Iterator[Output]:
        # ZhihuApiMiddleware counts every answer's code (zhihu/api_error/<code>)
        self._stat(f"{error.problem.value}/{endpoint}")
        if error.problem not in RETRIED:
            logger.error(
                "%s answered %s (%s %s): not retried",
                response.url,
                error.problem.value,
                error.code,
                error.message[:200],
            )
            if error.problem is not Problem.NOT_FOUND:  # deleted content: nothing to retry
                self._failed_for_good(response, error)
            yield from self._cut_short(response.meta, endpoint)
            return
        # a failure record sent again starts its retries over
        tries = (
            1 if FAILURE_RETRIED_META in response.meta else int(response.meta.get(RETRIES, 0)) + 1
        )
        if tries > self.config.max_retries:
            self._stat(f"gave_up/{error.problem.value}")
            logger.error("%s: %s %d times, giving up", response.url, error.problem.value, tries)
            self._failed_for_good(response, error)
            yield from self._cut_short(response.meta, endpoint)
            return
        self._stat(f"retry/{error.problem.value}")
        meta = {key: response.meta[key] for key in CARRIED if key in response.meta}
        if (recorded := recorded_before(response.meta, endpoint)) is not None:
            meta[RECORDED] = recorded  # sent again from a failure record: still so
        retry = self._request(response.url, endpoint, {**meta, RETRIES: tries}, dont_filter=True)
        retry.priority = response.request.priority - 1 if response.request else -1
        yield retry

    def _failed_for_good(self, response: Response, error: ApiError) -> None:
        """In cluster mode the page's lease fails (``zhihu/<problem>``): a failure record
        ``crawler failed zhihu retry`` sends again once sessions or limits are mended."""
        detail = f"{error.code} {error.message[:200]}"
        fail_page(self.crawler, response, f"zhihu/{error.problem.value}", detail)

    def _page(self, response: Response, endpoint: str, ctx: Context) -> Iterator[Output]:
        kind, content_type = PAGE_KINDS[endpoint]
        wanted = urlsplit(response.url).path.rstrip("/").rsplit("/", 1)[-1]
        found = page_entities(response.text).get(kind, {}).get(wanted)
        if found is None:
            raise ParseError(f"the page has no {content_type} {wanted}")
        yield from self._content(found, ctx)
