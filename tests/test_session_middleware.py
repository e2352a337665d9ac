"""SharedSessionMiddleware with Scrapy's own components around it: which of a shared
session's cookies a request carries and how a site's Set-Cookie headers change them (as a
browser, and Scrapy's own cookie jar, would), and how long an account rests after a 429."""

from __future__ import annotations

import asyncio
import logging
import time
from types import SimpleNamespace
from typing import Any

import pytest
import scrapy
from scrapy import Request, signals
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from crawler.middlewares.refused import NotFetchedAtStop, RefusedRequest, failure_reason
from crawler.middlewares.session_http import set_cookies
from crawler.middlewares.sessions import SharedSessionMiddleware
from crawler.sessions import Cookie, Health, Session
from crawler.sessions.cookies import parse_set_cookie
from crawler.sessions.models import merge_cookie_lists

NOW = time.time()


def sent(session: Session, url: str) -> dict[str, str]:
    header = session.cookie_header_for(url, NOW)
    return dict(pair.split("=", 1) for pair in header.split("; ")) if header else {}


def test_a_cookie_goes_only_where_its_domain_path_and_secure_flag_allow() -> None:
    session = Session(
        "p",
        "a",
        (
            Cookie("host", "1", domain="shop.test"),
            Cookie("wide", "2", domain=".shop.test"),
            Cookie("plain", "3", domain="shop.test", path="/account"),
            Cookie("tls", "4", domain="shop.test", secure=True),
            Cookie("old", "5", domain="shop.test", expires=NOW - 1),
            Cookie("anywhere", "6"),  # imported without a domain: every host of the platform
        ),
    )
    assert sent(session, "https://shop.test/account/orders") == {
        "host": "1",
        "wide": "2",
        "plain": "3",
        "tls": "4",
        "anywhere": "6",
    }
    assert sent(session, "http://shop.test/accounts") == {"host": "1", "wide": "2", "anywhere": "6"}
    assert sent(session, "http://www.shop.test/") == {"host": "1", "wide": "2", "anywhere": "6"}
    assert sent(session, "http://other.test/") == {"anywhere": "6"}
    assert sent(session, "http://evilshop.test/") == {"anywhere": "6"}


def test_set_cookie_skips_what_browsers_refuse_and_never_raises() -> None:
    parsed = parse_set_cookie(
        [
            "a=1; Max-Age=--5",
            "b=2; Max-Age=\u00b2",
            "c=3; Domain=other.test",  # not the host's: refused
            "d=4; Path=admin",
            "e=5; Max-Age=" + "9" * 400,
            "f=6; Domain=Shop.Test",
        ],
        "www.shop.test",
    )
    assert [(c.name, c.domain, c.path, c.expires) for c in parsed] == [
        ("a", "www.shop.test", "/", None),
        ("b", "www.shop.test", "/", None),
        ("d", "www.shop.test", "/", None),
        ("e", "www.shop.test", "/", None),
        ("f", ".shop.test", "/", None),
    ]


def test_set_cookie_reads_what_browsers_read_and_deletes_what_they_delete() -> None:
    parsed = parse_set_cookie(
        [
            'pref={"a":1}; Path=/',
            "chip=1; Path=/; Secure; Partitioned",
            "prio=1; Path=/; Priority=High; SameSite=Lax",
            "gone=; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/",
            "dashed=d; Expires=Thu, 01-Jan-1970 00:00:01 GMT",
            "unreadable=u; Expires=someday",
            "negative=x; Max-Age=-1",
            "zero=x; Max-Age=0",
            "later=y; Max-Age=60; Domain=.shop.test; HttpOnly",
            "spaced=a b c",
        ],
        "shop.test",
    )
    by_name = {cookie.name: cookie for cookie in parsed}
    assert {name: cookie.value for name, cookie in by_name.items()} == {
        "pref": '{"a":1}',
        "chip": "1",
        "prio": "1",
        "gone": "",
        "negative": "x",
        "zero": "x",
        "later": "y",
        "spaced": "a b c",
        "dashed": "d",
        "unreadable": "u",
    }
    assert by_name["chip"].secure
    assert all(by_name[name].expired(NOW) for name in ("gone", "dashed", "negative", "zero"))
    assert by_name["unreadable"].expires is None  # a session cookie, as browsers take it
    later = by_name["later"]
    assert (later.domain, later.http_only, later.expired(NOW + 30)) == (".shop.test", True, False)
    assert by_name["pref"].domain == "shop.test"  # host-only: the host that set it
    current = (Cookie("gone", "v", domain="shop.test"), Cookie("keep", "k", domain="shop.test"))
    merged = merge_cookie_lists(current, parsed, NOW)
    assert "gone" not in {cookie.name for cookie in merged}
    assert "keep" in {cookie.name for cookie in merged}


class PlatformSpider(scrapy.Spider):
    name = "cookie_platform"
    session_platform = "cookie_platform"


def session_middleware(
    **overrides: Any,
) -> tuple[SharedSessionMiddleware, CookiesMiddleware]:
    settings = {"SESSIONS_ENABLED": True, "SESSIONS_MAX_TRIES": 2, "SESSIONS_WAIT": 1.0}
    settings.update(overrides)
    crawler = get_crawler(PlatformSpider, settings_dict=settings)
    crawler.spider = PlatformSpider.from_crawler(crawler)
    return SharedSessionMiddleware.from_crawler(crawler), CookiesMiddleware.from_crawler(crawler)


def through(
    middlewares: tuple[SharedSessionMiddleware, CookiesMiddleware], request: Request
) -> Request:
    """The request as the downloader gets it: Scrapy's CookiesMiddleware (700), then ours (720)."""
    shared, cookies = middlewares

    async def run() -> None:
        await shared.store.put(
            Session(
                "cookie_platform",
                "a",
                (Cookie("sid", "secret", domain="shop.test"), Cookie("lang", "en")),
            ),
            600,
        )
        outcome: Any = cookies.process_request(request)
        if asyncio.iscoroutine(outcome):
            await outcome
        await shared.process_request(request)

    asyncio.run(run())
    return request


def cookie_pairs(request: Request) -> set[str]:
    header = (request.headers.get(b"Cookie") or b"").decode()
    return set(header.split("; ")) if header else set()


def test_the_session_is_not_sent_to_other_hosts() -> None:
    request = through(session_middleware(), Request("http://other.test/page"))
    assert cookie_pairs(request) == {"lang=en"}


def test_the_users_own_cookies_go_with_the_sessions() -> None:
    request = Request("http://shop.test/page", cookies={"mine": "v1", "lang": "fr"})
    assert cookie_pairs(through(session_middleware(), request)) == {
        "mine=v1",
        "sid=secret",
        "lang=en",  # the session's value wins over the request's own
    }


def test_set_cookies_of_a_response_keep_every_header_line() -> None:
    response = Response(
        "http://shop.test/",
        headers=[(b"Set-Cookie", b"a=1; Path=/"), (b"Set-Cookie", b'b={"x": 1}')],
    )
    assert [(c.name, c.value) for c in set_cookies(response)] == [("a", "1"), ("b", '{"x": 1}')]


def test_an_account_answered_429_rests_as_long_as_retry_after_says() -> None:
    shared, _ = session_middleware()
    request = through(
        (shared, CookiesMiddleware.from_crawler(shared.crawler)), Request("http://shop.test/")
    )
    response = Response("http://shop.test/", status=429, headers={"Retry-After": "3"})

    async def rest() -> float:
        await shared.process_response(request, response)
        (session,) = await shared.store.list("cookie_platform")
        return session.cooldown_until - time.time()

    left = asyncio.run(rest())
    assert 1 < left <= 3  # not SESSIONS_COOLDOWN's 600 s: the site said when to come back

    async def three_more() -> Session:
        for _ in range(3):  # SESSIONS_MAX_STRIKES is 3: strikes would retire the account
            await shared.process_response(request, response)
        (session,) = await shared.store.list("cookie_platform")
        return session

    session = asyncio.run(three_more())
    assert (session.health.value, session.strikes) == ("risky", 0)


def test_a_retry_keeps_the_users_cookies_and_only_the_sessions_current_ones() -> None:
    """Scrapy's retry copies the request with its header and meta (dont_merge_cookies set):
    the user's cookies stay, a cookie the session no longer has is not sent again."""
    middlewares = session_middleware()
    first = through(middlewares, Request("http://shop.test/p", cookies={"mine": "v1"}))
    retry = first.copy()
    shared = middlewares[0]

    async def drop_sid_then_retry() -> None:
        await shared.store.put(Session("cookie_platform", "a", (Cookie("lang", "de"),)), 600)
        await shared.process_request(retry)

    asyncio.run(drop_sid_then_retry())
    assert cookie_pairs(retry) == {"mine=v1", "lang=de"}


def test_a_redirect_to_another_host_carries_none_of_the_first_hosts_own_cookies() -> None:
    """Scrapy's redirect drops the Cookie header on a host change and its jar gives the new
    host its own cookies; meta (with the first host's saved cookies) goes with the redirect."""
    middlewares = session_middleware()
    first = through(middlewares, Request("http://shop.test/r", cookies={"mine": "v1"}))
    redirected = first.replace(url="http://other.test/landing", cookies=None)
    redirected.headers.pop(b"Cookie", None)  # as RedirectMiddleware does on a host change
    asyncio.run(middlewares[0].process_request(redirected))
    assert cookie_pairs(redirected) == {"lang=en"}  # the session's cookie for every host
    back = redirected.replace(url="http://shop.test/again")  # and a redirect back again:
    back.headers.pop(b"Cookie", None)  # the first host's own cookies, as Scrapy's jar has them
    asyncio.run(middlewares[0].process_request(back))
    assert cookie_pairs(back) == {"mine=v1", "sid=secret", "lang=en"}


def test_a_site_cannot_set_a_cookie_for_a_public_suffix_or_another_ip() -> None:
    """As browsers and Scrapy's jar: a Domain that is a public suffix is refused (kept for
    the host alone when it is the host), an IP host's cookie is the host's alone."""
    assert parse_set_cookie(["x=1; Domain=com"], "a.com") == []
    assert parse_set_cookie(["x=1; Domain=co.uk"], "shop.example.co.uk") == []
    assert parse_set_cookie(["x=1; Domain=1"], "127.0.0.1") == []
    assert parse_set_cookie(["x=1; Domain=0.0.1"], "127.0.0.1") == []
    (own_ip,) = parse_set_cookie(["x=1; Domain=127.0.0.1"], "127.0.0.1")
    assert own_ip.domain == "127.0.0.1"  # host-only: never sent to 1.127.0.0.1
    (suffix_host,) = parse_set_cookie(["x=1; Domain=github.io"], "github.io")
    assert suffix_host.domain == "github.io"
    (parent,) = parse_set_cookie(["x=1; Domain=example.co.uk"], "shop.example.co.uk")
    assert parent.domain == ".example.co.uk"
    session = Session("p", "a", (*parse_set_cookie(["w=1; Domain=1"], "127.0.0.1"),))
    assert sent(session, "http://127.0.1.1/") == {}


def test_a_burst_of_refusals_in_flight_is_one_strike_and_the_log_says_what_happened(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three requests already in flight answered 429 in the same second retired the only
    account (three strikes) while the log said each was retried with another session."""
    shared, _ = session_middleware()
    in_flight = [Request(f"http://shop.test/{n}") for n in range(3)]
    caplog.set_level(logging.WARNING, "crawler.middlewares.sessions")

    async def burst() -> Session:
        await shared.store.put(Session("cookie_platform", "a", (Cookie("sid", "s"),)), 600)
        for request in in_flight:  # all three sent before the first answer
            await shared.process_request(request)
        for request in in_flight:
            await shared.process_response(request, Response(request.url, status=429))
        (session,) = await shared.store.list("cookie_platform")
        return session

    session = asyncio.run(burst())
    assert (session.health.value, session.strikes) == ("risky", 1)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 3
    assert all("another session" not in message for message in messages)
    assert "marked risky" in messages[0]

    caplog.clear()
    shared, _ = session_middleware(SESSIONS_MAX_STRIKES=1)
    last = Request("http://shop.test/last")

    async def retire() -> None:
        await shared.store.put(Session("cookie_platform", "a", (Cookie("sid", "s"),)), 600)
        await shared.process_request(last)
        await shared.process_response(last, Response(last.url, status=429))

    asyncio.run(retire())
    (message,) = [record.getMessage() for record in caplog.records]
    assert "retired (SESSIONS_MAX_STRIKES=1 strikes)" in message


def test_a_request_with_no_usable_session_is_refused_with_a_reason_and_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Pages dropped for lack of a session left no log line, and their failure reason was
    download/IgnoreRequest."""
    shared, _ = session_middleware(SESSIONS_WAIT=0.05)
    caplog.set_level(logging.WARNING, "crawler.middlewares.sessions")

    async def drop(url: str, **meta: Any) -> RefusedRequest:
        with pytest.raises(RefusedRequest) as refused:
            await shared.process_request(Request(url, meta=meta))
        return refused.value

    first = asyncio.run(drop("http://shop.test/1"))
    assert (first.reason, failure_reason(first)) == ("sessions/unavailable", "sessions/unavailable")
    assert "no usable cookie_platform session within SESSIONS_WAIT=0.05 s" in str(first)
    pinned = asyncio.run(drop("http://shop.test/2", session_pin="gone"))
    assert "account gone (meta session_pin)" in str(pinned)
    assert shared.stats.get_value("sessions/unavailable") == 2
    said = [record.getMessage() for record in caplog.records]
    (message,) = [text for text in said if text.startswith("Dropped")]  # one a minute at most
    assert "Dropped 1 request(s) with no cookie_platform session" in message
    assert "http://shop.test/1" in message
    # why nothing comes: the spider cannot log in (said once), and what to do
    (cannot,) = [text for text in said if "cannot log in" in text]
    assert "crawler sessions import cookie_platform" in cannot
    caplog.clear()
    shared.crawler.signals.send_catch_log(signals.spider_closed, reason="finished")
    (message,) = [
        r.getMessage() for r in caplog.records if r.name == "crawler.middlewares.sessions"
    ]
    assert "Dropped 1 more request(s) with no session" in message


class HangingLogin:
    """A log-in that does not end (a site that never answers the form)."""

    async def login(self, account: str) -> list[Cookie]:
        await asyncio.sleep(3600)
        return []


class SlowLoginSpider(PlatformSpider):
    session_accounts = ("a",)

    def session_login(self) -> HangingLogin:
        return HangingLogin()


def test_a_request_waits_for_a_log_in_no_longer_than_sessions_wait() -> None:
    """The request waited for the log-in as long as SESSIONS_LOGIN_TIMEOUT (120 s), whatever
    SESSIONS_WAIT said, and kept a stopping node up as long."""
    settings = {"SESSIONS_ENABLED": True, "SESSIONS_WAIT": 0.3, "SESSIONS_LOGIN_TIMEOUT": 60}
    crawler = get_crawler(SlowLoginSpider, settings_dict=settings)
    crawler.spider = SlowLoginSpider.from_crawler(crawler)
    shared = SharedSessionMiddleware.from_crawler(crawler)

    async def drop() -> float:
        began = time.monotonic()
        with pytest.raises(RefusedRequest, match=r"SESSIONS_WAIT=0\.3"):
            await asyncio.wait_for(shared.process_request(Request("http://shop.test/1")), 10)
        return time.monotonic() - began

    assert asyncio.run(drop()) < 2


def test_a_stopping_node_ends_a_request_s_wait_for_a_session() -> None:
    """A request waiting for a log-in round is not fetched once the node stops: its lease goes
    back to the queue (``sessions/stopped``) instead of holding the stop for SESSIONS_WAIT."""
    settings = {"SESSIONS_ENABLED": True, "SESSIONS_WAIT": 60, "SESSIONS_LOGIN_TIMEOUT": 60}
    crawler = get_crawler(SlowLoginSpider, settings_dict=settings)
    crawler.spider = SlowLoginSpider.from_crawler(crawler)
    shared = SharedSessionMiddleware.from_crawler(crawler)
    engine = SimpleNamespace(_stopping=False, _slot=SimpleNamespace(closing=None))
    crawler.engine = engine  # type: ignore[assignment]

    async def stopped() -> tuple[NotFetchedAtStop, float]:
        waiting = asyncio.ensure_future(shared.process_request(Request("http://shop.test/1")))
        await asyncio.sleep(0.2)
        assert not waiting.done()  # waits for the log-in round
        began = time.monotonic()
        engine._stopping = True  # ExecutionEngine.stop_async
        with pytest.raises(NotFetchedAtStop) as raised:
            await asyncio.wait_for(waiting, 10)
        return raised.value, time.monotonic() - began

    exc, took = asyncio.run(stopped())
    assert exc.reason == "sessions/stopped"
    assert "while the request waits" in str(exc)  # standalone: past STANDALONE_STOP_WAIT
    assert "for a session" in str(exc)
    assert took < 2


def test_a_request_out_of_tries_is_refused_not_handed_to_the_spider(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After SESSIONS_MAX_TRIES the response that said the session was expired (a login page)
    went to the spider's callback as the page: items built from the login form (an audit: 6
    of 30), said only by the stat sessions/gave_up."""
    shared, _ = session_middleware(SESSIONS_MAX_TRIES=0)
    request = Request("http://shop.test/member")
    caplog.set_level(logging.WARNING, "crawler.middlewares.sessions")

    async def answered_expired() -> RefusedRequest:
        await shared.store.put(Session("cookie_platform", "a", (Cookie("sid", "s"),)), 600)
        await shared.process_request(request)
        with pytest.raises(RefusedRequest) as refused:
            await shared.process_response(request, Response(request.url, status=401))
        return refused.value

    refused = asyncio.run(answered_expired())
    assert (refused.reason, failure_reason(refused)) == ("sessions/gave_up", "sessions/gave_up")
    assert shared.stats.get_value("sessions/gave_up") == 1
    (message,) = [record.getMessage() for record in caplog.records]
    assert "Gave up http://shop.test/member after SESSIONS_MAX_TRIES=0" in message
    assert "cookie_platform account a answered as expired (HTTP 401)" in message


class JudgingSpider(PlatformSpider):
    """Judges the site's answers itself, and reads what it judged bad in its callbacks."""

    def session_state(self, response: Response) -> Health | None:
        return Health.RISKY if response.status == 403 else None


def test_a_spider_judging_answers_itself_gets_the_last_one_marked() -> None:
    settings = {"SESSIONS_ENABLED": True, "SESSIONS_MAX_TRIES": 0, "SESSIONS_WAIT": 1.0}
    crawler = get_crawler(JudgingSpider, settings_dict=settings)
    crawler.spider = JudgingSpider.from_crawler(crawler)
    shared = SharedSessionMiddleware.from_crawler(crawler)
    request = Request("http://shop.test/member")

    async def answered_risky() -> Any:
        await shared.store.put(Session("cookie_platform", "a", (Cookie("sid", "s"),)), 600)
        await shared.process_request(request)
        return await shared.process_response(request, Response(request.url, status=403))

    response = asyncio.run(answered_risky())
    assert isinstance(response, Response)
    assert request.meta["session_gave_up"] == "risky"
    assert shared.stats.get_value("sessions/gave_up") == 1


def test_an_answer_to_cookies_a_newer_log_in_replaced_costs_the_request_no_try() -> None:
    """A request waits for its site's turn after it took its cookies: the session another
    node logged in again meanwhile made its answer 'expired' though the account was fine, and
    each such answer used up one of the request's SESSIONS_MAX_TRIES (an audit: 45-94 such
    answers a run, pages given up). They are counted apart, against the same number."""
    shared, _ = session_middleware(SESSIONS_MAX_TRIES=1)
    request = Request("http://shop.test/member")

    async def log_in(generation_after: int) -> None:
        stored = await shared.store.put(
            Session("cookie_platform", "a", (Cookie("sid", f"s{generation_after}"),)), 600
        )
        assert stored.generation == generation_after

    async def answers() -> tuple[Any, Any, RefusedRequest]:
        await log_in(1)
        await shared.process_request(request)
        await log_in(2)  # another node's log-in while the request waited
        first = await shared.process_response(request, Response(request.url, status=401))
        assert isinstance(first, Request)
        await shared.process_request(first)  # generation 2: its answer is the account's
        second = await shared.process_response(first, Response(first.url, status=401))
        assert isinstance(second, Request)
        await log_in(3)
        await shared.process_request(second)
        await log_in(4)
        with pytest.raises(RefusedRequest) as stale_again:  # a second stale answer: over
            await shared.process_response(second, Response(second.url, status=401))
        return first.meta, second.meta, stale_again.value

    first, second, refused = asyncio.run(answers())
    assert (first.get("session_tries"), first.get("session_stale_tries")) == (None, 1)
    assert (second.get("session_tries"), second.get("session_stale_tries")) == (1, 1)
    assert "newer log-in" in str(refused)


class ProviderOf:
    """A spider's log-in provider: cookies per account, or what its log-in does wrong."""

    def __init__(self, outcomes: dict[str, Any]) -> None:
        self.outcomes = outcomes

    async def login(self, account: str) -> list[Cookie]:
        outcome = self.outcomes[account]
        if isinstance(outcome, Exception):
            raise outcome
        return list(outcome)


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        (RuntimeError("HTTP Error 429: Too Many Requests"), "RuntimeError: HTTP Error 429"),
        ((), "gave no cookies"),
    ],
)
def test_a_log_in_that_fails_its_own_way_is_said_and_the_next_account_logs_in(
    broken: Any, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A provider raising anything but SessionError (its own HTTP error) ended the log-in
    round without a word: the other accounts were never logged in, and the pages dropped
    said only 'no usable session'. One returning no cookies (a wrong password) was stored
    as a healthy session, sent without a cookie (an audit)."""

    class TwoAccounts(PlatformSpider):
        session_accounts = ("limited", "alice")

        def session_login(self) -> ProviderOf:
            return ProviderOf({"limited": broken, "alice": [Cookie("sid", "alice")]})

    settings = {"SESSIONS_ENABLED": True, "SESSIONS_WAIT": 5.0}
    crawler = get_crawler(TwoAccounts, settings_dict=settings)
    crawler.spider = TwoAccounts.from_crawler(crawler)
    shared = SharedSessionMiddleware.from_crawler(crawler)
    request = Request("http://shop.test/member")
    caplog.set_level(logging.ERROR, "crawler.middlewares.sessions")

    async def served() -> list[Session]:
        await asyncio.wait_for(shared.process_request(request), 10)
        return await shared.store.list("cookie_platform")

    stored = asyncio.run(served())
    assert request.meta["session_account"] == "alice"
    assert [session.account for session in stored] == ["alice"]
    assert shared.stats.get_value("sessions/relogin_failed") == 1
    (message,) = [record.getMessage() for record in caplog.records]
    assert "Log-in of cookie_platform account limited failed" in message
    assert said in message


def test_a_request_leaves_with_its_account_s_cookies_as_they_are_when_it_leaves() -> None:
    """Cookies were put on a request before it waited for its site's turn (2.4 s a request in
    an audit): another node's log-in meanwhile made them stale (the site saw 45-94 requests a
    run with a session it had replaced), and an account retired meanwhile still sent them."""
    shared, _ = session_middleware()
    request = Request("http://shop.test/member")
    other = Request("http://shop.test/other")

    async def leave() -> None:
        await shared.store.put(Session("cookie_platform", "a", (Cookie("sid", "one"),)), 600)
        await shared.process_request(request)
        await shared.restamp(request)  # nothing changed: as it was
        assert cookie_pairs(request) == {"sid=one"}
        await shared.store.put(Session("cookie_platform", "a", (Cookie("sid", "two"),)), 600)
        await shared.restamp(request)  # logged in again meanwhile
        assert cookie_pairs(request) == {"sid=two"}
        assert request.meta["session_generation"] == 2
        await shared.store.put(Session("cookie_platform", "b", (Cookie("sid", "bee"),)), 600)
        await shared.process_request(other)
        drawn = other.meta["session_account"]
        await shared.store.mark("cookie_platform", drawn, Health.RETIRED, "by hand")
        await shared.restamp(other)  # retired meanwhile: another account's
        expected = {"a": {"sid=bee"}, "b": {"sid=two"}}[drawn]
        assert other.meta["session_account"] != drawn
        assert cookie_pairs(other) == expected

    asyncio.run(leave())
    assert shared.stats.get_value("sessions/restamped") == 2
    assert shared.stats.get_value("sessions/used") == 2  # two requests, one drawn again
