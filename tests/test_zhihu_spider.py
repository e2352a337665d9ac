"""The zhihu spider's parse step on hand-made responses: counts drive child pages, lists go past
``is_end`` while short, unusable payloads become ``zhihu_unparsed`` (dead-lettered) items."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
import pytest
from scrapy import Request
from scrapy.http import Response, TextResponse
from scrapy.utils.test import get_crawler
from twisted.internet.error import ConnectionLost
from twisted.python.failure import Failure

from crawler.frontier.seeds import InvalidSeed
from crawler.middlewares.refused import RefusedRequest
from crawler.spiders.zhihu import ZhihuSpider
from crawler.zhihu.items import ZhihuCommentItem, ZhihuListItem, ZhihuUnparsedItem
from crawler.zhihu.middleware import ZhihuApiMiddleware
from crawler.zhihu.parsers import UNPARSED_MAX_CHARS
from tests.base_values import base_values

API = "http://zhihu.test/api/v4"


def spider(**settings: Any) -> ZhihuSpider:
    values = base_values()
    values |= {
        **settings,
        "REDIS_URL": "",
        "ZHIHU_PRIVACY": False,
        "ZHIHU_CREATORS": False,
        "ZHIHU_WWW_URL": "http://zhihu.test",
        "ZHIHU_ZHUANLAN_URL": "http://zhihu.test",
        "ZHIHU_API_URL": API,
    }
    crawler = get_crawler(ZhihuSpider, values)
    found = ZhihuSpider.from_crawler(crawler)
    crawler.spider = found
    return found


def parse(zhihu: ZhihuSpider, url: str, body: Any, **meta: Any) -> list[Any]:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    request = Request(url, meta={"zhihu_source": "seed", **meta})
    return list(zhihu.parse(TextResponse(url, body=raw, request=request, encoding="utf-8")))


def comment(cid: str, children: int = 0, previews: list[Any] | None = None) -> dict[str, Any]:
    return {
        "id": cid,
        "type": "comment",
        "content": f"<p>{cid}</p>",
        "created_time": 1_700_000_000,
        "like_count": 1,
        "dislike_count": 0,
        "reply_comment_id": "0" if previews is not None else "1",
        "child_comment_count": children,
        "child_comment_next_offset": None,
        "child_comments": previews or [],
        "author": {"id": "a", "url_token": "tok", "name": "n"},
    }


def page(data: list[Any], *, is_end: bool, totals: int, next_url: str) -> dict[str, Any]:
    return {"paging": {"is_end": is_end, "next": next_url, "totals": totals}, "data": data}


ROOTS = f"{API}/comment_v5/answers/9/root_comment?order=score&offset=&limit=20"
CONTENT = {"zhihu_endpoint": "root_comment", "zhihu_content": ["answer", "9"], "zhihu_owner": "9"}


def test_a_root_without_preview_nor_cursor_has_its_children_fetched_from_the_first() -> None:
    zhihu = spider()
    body = page([comment("1", children=3, previews=[])], is_end=True, totals=1, next_url="")
    out = parse(zhihu, ROOTS, body, **CONTENT)
    (child,) = [r for r in out if isinstance(r, Request)]
    assert "/comment/1/child_comment?order=sort&offset=&limit=20" in child.url
    assert (child.meta["zhihu_tally"], child.meta["zhihu_skip"]) == ([3, 0, 0], [])
    (record,) = [i for i in out if isinstance(i, ZhihuListItem)]  # the root list: complete
    assert (record.list, record.declared, record.collected, record.shortfall) == (
        "root_comment",
        1,
        1,
        0,
    )


def test_a_first_child_page_skips_the_previews_it_repeats() -> None:
    zhihu = spider()
    root = comment("1", children=3, previews=[comment("2")])
    out = parse(zhihu, ROOTS, page([root], is_end=True, totals=1, next_url=""), **CONTENT)
    (child,) = [r for r in out if isinstance(r, Request)]
    assert child.meta["zhihu_skip"] == ["2"]
    children = page([comment("2"), comment("3"), comment("4")], is_end=True, totals=3, next_url="")
    meta = {**child.meta, "zhihu_endpoint": "child_comment"}
    again = parse(zhihu, child.url, children, **meta)
    ids = [i.comment_id for i in again if isinstance(i, ZhihuCommentItem)]
    (record,) = [i for i in again if isinstance(i, ZhihuListItem)]
    assert ids == ["3", "4"]
    assert (record.owner_id, record.declared, record.collected, record.shortfall) == ("1", 3, 3, 0)


def test_a_list_short_of_its_total_goes_past_is_end_then_records_the_shortfall() -> None:
    zhihu = spider()
    following = ROOTS.replace("offset=", "offset=5_1_0")
    out = parse(
        zhihu,
        ROOTS,
        page([comment("1", previews=[])], is_end=True, totals=2, next_url=following),
        **CONTENT,
    )
    (more,) = [r for r in out if isinstance(r, Request)]
    assert more.meta["zhihu_tally"] == [2, 0, 1] and not any(
        isinstance(i, ZhihuListItem) for i in out
    )
    last = parse(zhihu, more.url, page([], is_end=True, totals=2, next_url=""), **more.meta)
    (record,) = [i for i in last if isinstance(i, ZhihuListItem)]
    assert (record.declared, record.collected, record.shortfall) == (2, 1, 1)
    stats = zhihu.crawler.stats
    assert stats is not None and stats.get_value("zhihu/shortfall/root_comment") == 1


def test_a_payload_that_is_no_json_is_dead_lettered_with_its_raw_body() -> None:
    zhihu = spider()
    raw = b"<html>" + b"x" * UNPARSED_MAX_CHARS + b"</html>"
    url = f"{API}/questions/1/answers?limit=20&offset=0"
    (item,) = parse(zhihu, url, raw, zhihu_endpoint="question_answers", zhihu_owner="1")
    assert isinstance(item, ZhihuUnparsedItem)
    assert (item.endpoint, item.url, item.truncated) == ("question_answers", url, True)
    assert item.body == raw.decode()[:UNPARSED_MAX_CHARS]
    stats = zhihu.crawler.stats
    assert stats is not None and stats.get_value("zhihu/unparsed/question_answers") == 1


def test_a_later_page_that_cannot_be_parsed_ends_its_list_short() -> None:
    """A 200 with an HTML "busy" page in the middle of a list: dead-lettered, and the list is
    recorded with what it had (it was never recorded: completeness said 100%)."""
    zhihu = spider()
    following = ROOTS.replace("offset=", "offset=5_1_0")
    meta = {**CONTENT, "zhihu_tally": [3, 0, 1], "zhihu_cursor": "5_1_0", "zhihu_count": 1}
    out = parse(zhihu, following, "<html><body>系统繁忙</body></html>".encode(), **meta)
    assert [type(i) for i in out] == [ZhihuUnparsedItem, ZhihuListItem]
    record = out[1]
    assert (record.list, record.owner_id, record.declared, record.collected, record.shortfall) == (
        "root_comment",
        "9",
        3,
        1,
        2,
    )
    stats = zhihu.crawler.stats
    assert stats is not None and stats.get_value("zhihu/short_lists/root_comment") == 1


SEARCH = f"{API}/search_v3?q=python&t=general&offset=0&limit=20"


def test_a_search_list_is_not_measured_even_when_it_declares_a_total() -> None:
    zhihu = spider()
    body = page([], is_end=True, totals=40, next_url=SEARCH.replace("offset=0", "offset=20"))
    out = parse(zhihu, SEARCH, body, zhihu_endpoint="search")
    assert out == []  # no zhihu_list item (its schema has no "search" list), nothing past is_end
    stats = zhihu.crawler.stats
    assert stats is not None and stats.get_value("zhihu/declared/search") is None


def test_an_api_error_without_a_path_of_its_own_is_counted_once_by_the_spider() -> None:
    zhihu = spider()
    url = f"{API}/questions/1/answers?limit=20&offset=0"
    request = Request(url, meta={"zhihu_source": "seed", "zhihu_endpoint": "question_answers"})
    body = orjson.dumps({"error": {"code": 4242, "message": "odd"}})
    response = TextResponse(url, status=400, body=body, request=request, encoding="utf-8")
    assert list(zhihu.parse(response)) == []
    stats = zhihu.crawler.stats
    assert stats is not None
    assert stats.get_value("zhihu/api_error/4242") is None  # the middleware counts that one
    assert stats.get_value("zhihu/other_error/question_answers") == 1


def test_a_search_seed_keeps_its_priority_and_counts_only_once_accepted() -> None:
    zhihu = spider()
    made = zhihu.make_request_from_data(orjson.dumps({"keyword": "python", "priority": 7}))
    assert made is not None and made.priority == 7
    stats = zhihu.crawler.stats
    assert stats is not None and stats.get_value("zhihu/seed/search") == 1
    refused = orjson.dumps({"keyword": "python", "meta": {"proxy": "http://p:1"}})
    with pytest.raises(InvalidSeed):
        zhihu.make_request_from_data(refused)
    assert stats.get_value("zhihu/seed/search") == 1


@pytest.mark.parametrize(
    "seed",
    [
        {"url": "https://www.zhihu.com/question/1", "meta": {"zhihu_tally": "x"}},
        {"url": "https://www.zhihu.com/question/1", "meta": {"zhihu_count": "abc"}},
        {"keyword": "python", "meta": {"zhihu_retries": 99}},
    ],
)
def test_a_seed_may_not_set_the_spiders_own_meta(seed: dict[str, object]) -> None:
    """The spider's ``zhihu_*`` meta keys hold its state (a list's tally, a page's count,
    the retries left): set by a seed, ``parse`` raised on them or gave up at once."""
    with pytest.raises(InvalidSeed, match="is the spider's own") as refused:
        spider().make_request_from_data(orjson.dumps(seed))
    assert refused.value.reason == "meta"


@pytest.mark.parametrize(
    "given",
    [{"headers": {"X-Audit": "1", "Cookie": "z_c0=mine"}}, {"method": "POST"}, {"body": "x"}],
)
def test_a_url_seed_with_request_fields_the_spider_does_not_take_is_refused(
    given: dict[str, object],
) -> None:
    """A JSON URL seed's headers were accepted (`crawler seed` said `new`) and dropped without
    a word (an audit), where method, body, callback and form fields were refused."""
    seed = {"url": "https://www.zhihu.com/question/1", **given}
    with pytest.raises(InvalidSeed, match="zhihu seeds take no method, body, callback, form"):
        spider().make_request_from_data(orjson.dumps(seed))


def test_a_blocked_redirect_is_handed_to_the_spider_and_a_users_own_status_list_survives() -> None:
    """A redirect to the soft-block page is not followed (meta ``handle_httpstatus_list``
    gets its status) and a retry of the request follows redirects again; the middleware took
    that meta key off every request it sent, so a list a user's subclass put in meta was lost."""
    zhihu = spider()
    middleware = ZhihuApiMiddleware(zhihu.crawler)
    page = "http://zhihu.test/question/1"
    blocked = Response(
        page,
        status=302,
        headers={"Location": "http://zhihu.test/account/unhappy?need_login=false"},
    )
    own = Request(page, meta={"handle_httpstatus_list": [404]})
    asyncio.run(middleware.process_request(own))
    assert own.meta["handle_httpstatus_list"] == [404]
    asyncio.run(middleware.process_response(own, blocked))
    assert own.meta["handle_httpstatus_list"] == [404, 302]
    retry = own.copy()
    asyncio.run(middleware.process_request(retry))
    assert retry.meta["handle_httpstatus_list"] == [404]

    plain = Request(page)
    asyncio.run(middleware.process_response(plain, blocked))
    assert plain.meta["handle_httpstatus_list"] == [302]
    retry = plain.copy()
    asyncio.run(middleware.process_request(retry))
    assert "handle_httpstatus_list" not in retry.meta


def test_an_account_without_its_password_is_said_at_start(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ZHIHU_ACCOUNTS=tester`` without ``ZHIHU_PASSWORD_TESTER``: said only at the first
    re-login, its requests then failing as sessions/unavailable (an audit)."""
    monkeypatch.delenv("ZHIHU_PASSWORD_TESTER", raising=False)
    monkeypatch.setenv("ZHIHU_PASSWORD_OTHER", "secret")
    with caplog.at_level(logging.WARNING):
        spider(ZHIHU_ACCOUNTS="tester,other")
    said = [r.getMessage() for r in caplog.records if "No password" in r.getMessage()]
    assert said == [
        "No password for zhihu account 'tester' in $ZHIHU_PASSWORD_TESTER: its session cannot be "
        "renewed when it expires (its requests then fail as sessions/unavailable); set the "
        "variable, or import its sessions again (crawler sessions import)"
    ]


def list_stats(zhihu: ZhihuSpider, name: str) -> tuple[Any, ...]:
    """The node's declared, collected, shortfall and short lists of list ``name``."""
    assert zhihu.crawler.stats is not None
    events = ("declared", "collected", "shortfall", "short_lists")
    return tuple(zhihu.crawler.stats.get_value(f"zhihu/{event}/{name}") for event in events)


def rate_limited(zhihu: ZhihuSpider, url: str, **meta: Any) -> list[Any]:
    body = orjson.dumps({"error": {"code": 40362, "message": "too fast"}})
    request = Request(url, meta={"zhihu_source": "seed", **meta})
    response = TextResponse(url, status=403, body=body, request=request, encoding="utf-8")
    return list(zhihu.parse(response))


def test_a_list_page_sent_again_from_its_failure_record_completes_its_list_once() -> None:
    """A list page whose retries ran out is recorded short and is a failure record; `crawler
    failed retry` sent it with its retries spent, so it gave up at its first limit, and a chain
    it finished would have counted its list twice (a review)."""
    zhihu = spider(ZHIHU_MAX_RETRIES=1)
    following = ROOTS.replace("offset=", "offset=5_1_0")
    first = page([comment("1", previews=[])], is_end=False, totals=3, next_url=following)
    (more,) = [r for r in parse(zhihu, ROOTS, first, **CONTENT) if isinstance(r, Request)]
    spent = {**more.meta, "zhihu_retries": 1}
    (short,) = [i for i in rate_limited(zhihu, more.url, **spent) if isinstance(i, ZhihuListItem)]
    assert (short.declared, short.collected, short.shortfall) == (3, 1, 2)

    again = {**spent, "failure_retried": "zhihu/rate_limited"}  # as `crawler failed retry` sends it
    (retry,) = [r for r in rate_limited(zhihu, more.url, **again) if isinstance(r, Request)]
    assert retry.meta["zhihu_retries"] == 1  # its retries start over
    rest = page(
        [comment("2", previews=[]), comment("3", previews=[])], is_end=True, totals=3, next_url=""
    )
    (done,) = [
        i for i in parse(zhihu, retry.url, rest, **retry.meta) if isinstance(i, ZhihuListItem)
    ]
    assert (done.declared, done.collected, done.shortfall) == (3, 3, 0)
    assert list_stats(zhihu, "root_comment") == (3, 3, 0, 0)


REST_OF_THREE = page(
    [comment("2", previews=[]), comment("3", previews=[])], is_end=True, totals=3, next_url=""
)


def second_of_three(zhihu: ZhihuSpider) -> Request:
    """The request of the second page of a root comment list declaring 3 (one on the first)."""
    following = ROOTS.replace("offset=", "offset=5_1_0")
    first = page([comment("1", previews=[])], is_end=False, totals=3, next_url=following)
    (more,) = [r for r in parse(zhihu, ROOTS, first, **CONTENT) if isinstance(r, Request)]
    return more


def not_fetched(zhihu: ZhihuSpider, request: Request, error: Exception) -> list[Any]:
    """What the request's errback gives for ``error``, as Scrapy calls it."""
    failure = Failure(error)  # type: ignore[no-untyped-call]
    failure.request = request  # type: ignore[attr-defined]  # Scrapy sets it
    assert request.errback is not None
    return list(request.errback(failure))


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ConnectionLost("closed"), "download/ConnectionLost"),
        (RefusedRequest("sessions/unavailable", "no session"), "sessions/unavailable"),
    ],
)
def test_a_list_page_that_cannot_be_fetched_ends_its_list_short(
    error: Exception, reason: str
) -> None:
    """A page of a list whose download failed for good (retries spent) or that a middleware
    dropped (no usable session) never reached parse: its list was never recorded, and
    completeness said 100% with 20 of 30 answers (an audit). Sent again from its failure
    record, the chain's end counts the list once."""
    zhihu = spider()
    more = second_of_three(zhihu)
    (short,) = not_fetched(zhihu, more, error)
    assert isinstance(short, ZhihuListItem)
    assert (short.list, short.declared, short.collected, short.shortfall) == (
        "root_comment",
        3,
        1,
        2,
    )
    stats = zhihu.crawler.stats
    assert stats is not None
    assert stats.get_value("zhihu/not_fetched/root_comment") == 1

    again = {**more.meta, "failure_retried": reason}  # as `crawler failed retry` sends it
    (done,) = [
        i for i in parse(zhihu, more.url, REST_OF_THREE, **again) if isinstance(i, ZhihuListItem)
    ]
    assert (done.declared, done.collected, done.shortfall) == (3, 3, 0)
    assert list_stats(zhihu, "root_comment") == (3, 3, 0, 0)


def test_a_page_retried_after_its_callback_raised_records_its_list_in_full() -> None:
    """A callback that raised recorded nothing: its page sent again records the whole list."""
    zhihu = spider()
    more = second_of_three(zhihu)
    again = {**more.meta, "failure_retried": "spider_exception/KeyError"}
    parse(zhihu, more.url, REST_OF_THREE, **again)
    stats = zhihu.crawler.stats
    assert stats is not None
    assert stats.get_value("zhihu/declared/root_comment") == 3
    assert stats.get_value("zhihu/collected/root_comment") == 3


def test_a_list_counts_once_whatever_the_failures_of_its_page_retried_again() -> None:
    """A page not fetched (recorded short), retried, whose callback then raised and was retried
    again: `failure_retried` said only the last reason, and the list was counted twice (a
    review). A page that never reached the downloader (a refused redirect) records it whole."""
    zhihu = spider()
    more = second_of_three(zhihu)
    not_fetched(zhihu, more, ConnectionLost("closed"))
    again = {
        **more.meta,
        "failure_retried": "spider_exception/KeyError",
        "failure_retried_before": ["download/ConnectionLost"],
    }
    parse(zhihu, more.url, REST_OF_THREE, **again)
    stats = zhihu.crawler.stats
    assert stats is not None
    assert stats.get_value("zhihu/declared/root_comment") == 3

    refused = spider()
    second_of_three(refused)
    parse(refused, more.url, REST_OF_THREE, **{**more.meta, "failure_retried": "redirect/offsite"})
    assert refused.crawler.stats is not None
    assert refused.crawler.stats.get_value("zhihu/declared/root_comment") == 3


def test_a_root_page_sent_again_counts_its_roots_child_lists_as_theirs() -> None:
    """The root page of a list recorded short, sent again: a root with its 2 children embedded
    recorded its child list less the root list's tally (declared -28, shortfall -29: a
    review)."""
    zhihu = spider()
    following = ROOTS.replace("offset=", "offset=5_1_0")
    first = page([comment("1", previews=[])], is_end=False, totals=30, next_url=following)
    (more,) = [r for r in parse(zhihu, ROOTS, first, **CONTENT) if isinstance(r, Request)]
    not_fetched(zhihu, more, ConnectionLost("closed"))
    with_children = comment("2", children=2, previews=[comment("21"), comment("22")])
    rest = page([with_children], is_end=True, totals=30, next_url="")
    parse(zhihu, more.url, rest, **{**more.meta, "failure_retried": "download/ConnectionLost"})
    assert list_stats(zhihu, "child_comment") == (2, 2, 0, 0)
