"""The shared cookie jars in a real Redis: what a node writes another reads back exactly, the
versions rise, a jar sealed with a key needs it, and purge deletes the jars. (Two nodes
logging in for each other: ``tests/test_user_code_cases.py``.)"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from http.cookiejar import Cookie
from typing import TypeVar

import pytest
import redis
from cryptography.fernet import Fernet
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.http.cookies import CookieJar
from scrapy.utils.test import get_crawler

from crawler.cookies.jar_store import (
    JarChanges,
    JarStore,
    cookie_field,
    cookie_from_json,
    cookie_json,
    jar_key,
    jar_label,
)
from crawler.frontier.purge import present_keys
from crawler.lua import text
from crawler.middlewares.cookie_domains import site_domains
from crawler.middlewares.shared_cookies import SharedCookiesMiddleware
from crawler.redis_connection import AsyncRedis, async_client
from crawler.redis_outage import OutageGuard
from crawler.sessions.crypto import CookieCipher, SessionKeyError

T = TypeVar("T")


def cookies_set_by(headers: list[str]) -> list[Cookie]:
    """The cookies Scrapy's jar takes from a response with these Set-Cookie headers."""
    request = Request("https://shop.test/login")
    response = HtmlResponse(request.url, headers={"Set-Cookie": headers}, request=request)
    jar = CookieJar()
    jar.extract_cookies(response, request)
    return list(jar)


def test_a_cookie_is_read_back_as_it_was_written(redis_url: str) -> None:
    written = cookies_set_by(
        [
            "sid=abc; Path=/; HttpOnly; Secure; SameSite=Lax",
            "pref=dark; Domain=shop.test; Path=/app; Max-Age=3600",
        ]
    )

    async def scenario() -> tuple[tuple[int, int], tuple[int, int], int, list[Cookie]]:
        client = async_client(redis_url)
        try:
            store = JarStore(client, "jars", CookieCipher(None))
            label = jar_label(None)
            first = await store.write(label, {cookie_field(c): cookie_json(c) for c in written}, [])
            second = await store.write(label, {}, [cookie_field(written[1])])
            version, cookies = await store.read(label)
            return first, second, version, cookies
        finally:
            await client.aclose()

    first, second, version, cookies = asyncio.run(scenario())
    assert first[0] == 0 and second == (first[1], version) and version > first[1]
    assert [cookie_json(c) for c in cookies] == [cookie_json(written[0])]
    (sid,) = cookies
    assert (sid.secure, sid.has_nonstandard_attr("HttpOnly"), sid.value) == (True, True, "abc")
    assert cookie_json(written[1]) != cookie_json(written[0])  # expires and domain kept apart


def test_jars_are_apart_by_their_cookiejar_key_and_sealed_with_the_session_key(
    redis_url: str, redis_client: redis.Redis
) -> None:
    (cookie,) = cookies_set_by(["sid=secret-value; Path=/"])
    key = Fernet.generate_key()

    async def scenario() -> tuple[list[Cookie], list[Cookie]]:
        client = async_client(redis_url)
        try:
            sealed = JarStore(client, "jars", CookieCipher(key))
            await sealed.write(jar_label("alice"), {cookie_field(cookie): cookie_json(cookie)}, [])
            _, alice = await sealed.read(jar_label("alice"))
            _, default = await sealed.read(jar_label(None))
            with pytest.raises(SessionKeyError, match="CRAWLER_SESSION_KEY"):
                await JarStore(client, "jars", CookieCipher(None)).read(jar_label("alice"))
            return alice, default
        finally:
            await client.aclose()

    alice, default = asyncio.run(scenario())
    assert [c.value for c in alice] == ["secret-value"] and default == []
    stored = redis_client.hgetall(jar_key("jars", '"alice"'))
    assert not any(b"secret-value" in value for value in stored.values())  # sealed at rest
    assert jar_key("jars", '"alice"') in present_keys(redis_client, "jars", keep_seeds=False)


def test_a_cookie_replaced_on_one_node_is_not_sent_by_another_for_requests_queued_before(
    redis_url: str,
) -> None:
    """A request carried the jar version its node knew when it was scheduled, and a node read
    the jar only for a newer one: after a logout and a new login on node A, node B sent the
    dead session for every page queued before (an audit: 14 of 30 pages). A node looks at the
    jar's version before a request (at most every COOKIES_SHARED_REFRESH s) and reads it anew."""
    settings = {"COOKIES_ENABLED": True, "COOKIES_SHARED_REFRESH": 0.0}

    async def scenario() -> list[str]:
        client = async_client(redis_url)
        try:
            nodes = [
                SharedCookiesMiddleware(
                    get_crawler(Spider, settings),
                    (
                        JarStore(client, "jars", CookieCipher(None)),
                        OutageGuard("cookies", lambda _reason: None),
                    ),
                )
                for _ in range(2)
            ]
            a, b = nodes
            login = Request("http://shop.test/login")
            await a.process_response(login, response(login, "sess=u1; Path=/"))
            page = Request("http://shop.test/p/1")
            a._stamp(page)  # scheduled on A after the login: leased by B
            queued = Request("http://shop.test/p/2", meta=dict(page.meta))  # before the logout
            await b.process_request(page)
            sent = [(page.headers.get("Cookie") or b"").decode()]
            logout = Request("http://shop.test/logout")
            await a.process_response(logout, response(logout, "sess=; Max-Age=0; Path=/"))
            relogin = Request("http://shop.test/login")
            await a.process_response(relogin, response(relogin, "sess=u2; Path=/"))
            await b.process_request(queued)
            sent.append((queued.headers.get("Cookie") or b"").decode())
            return sent
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == ["sess=u1", "sess=u2"]


def test_a_jar_a_node_never_met_is_read_before_its_first_request(redis_url: str) -> None:
    """Node A logged in in jar b; on node B a page of jar a yielded a request of jar b,
    which B, knowing no jar b, sent with an empty jar ("Please log in", an audit)."""
    settings = {"COOKIES_ENABLED": True}

    async def scenario() -> str:
        client = async_client(redis_url)
        try:
            a, b = (
                SharedCookiesMiddleware(
                    get_crawler(Spider, settings),
                    (
                        JarStore(client, "jars", CookieCipher(None)),
                        OutageGuard("cookies", lambda _reason: None),
                    ),
                )
                for _ in range(2)
            )
            login = Request("http://shop.test/login", meta={"cookiejar": "b"})
            await a.process_response(login, response(login, "sess=b1; Path=/"))
            page = Request("http://shop.test/p/2", meta={"cookiejar": "b"})
            b._stamp(page)  # scheduled on B, which knows no jar b
            await b.process_request(page)
            return (page.headers.get("Cookie") or b"").decode()
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == "sess=b1"


def response(request: Request, set_cookie: str) -> HtmlResponse:
    return HtmlResponse(request.url, headers={"Set-Cookie": set_cookie}, request=request)


def two_nodes(client: AsyncRedis, settings: dict[str, object]) -> list[SharedCookiesMiddleware]:
    return [
        SharedCookiesMiddleware(
            get_crawler(Spider, settings),
            (JarStore(client, "jars", CookieCipher(None)), OutageGuard("cookies", lambda _: None)),
        )
        for _ in range(2)
    ]


EVERY_REQUEST: dict[str, object] = {"COOKIES_ENABLED": True, "COOKIES_SHARED_REFRESH": 0.0}


def on_two_nodes(
    redis_url: str,
    scenario: Callable[[SharedCookiesMiddleware, SharedCookiesMiddleware], Awaitable[T]],
) -> T:
    """Run ``scenario`` with two nodes' middlewares on one Redis, each looking at a jar's
    version before every request."""

    async def run() -> T:
        client = async_client(redis_url)
        try:
            return await scenario(*two_nodes(client, EVERY_REQUEST))
        finally:
            await client.aclose()

    return asyncio.run(run())


async def set_on(node: SharedCookiesMiddleware, url: str, set_cookie: str) -> None:
    """A response of ``url`` with ``Set-Cookie: set_cookie`` goes through ``node``."""
    page = Request(url)
    await node.process_response(page, response(page, set_cookie))


def test_a_response_looks_at_the_cookies_of_its_own_site_only(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each response that set a cookie turned the node's whole jar into JSON twice: 89 ms a
    response with 3,000 cookies, 60 ms with 2,000 sites of one cookie each (Scrapy looks up
    the request's own domains: 0.19 ms), a broad crawl slowing down site after site (an
    audit). Only the cookies of the response's domains are compared now."""
    made: list[str] = []

    def counted(cookie: Cookie) -> bytes:
        made.append(cookie.domain)
        return cookie_json(cookie)

    monkeypatch.setattr("crawler.middlewares.cookie_domains.cookie_json", counted)

    async def scenario() -> list[str]:
        client = async_client(redis_url)
        try:
            node, _ = two_nodes(client, {"COOKIES_ENABLED": True})
            for site in range(300):
                page = Request(f"http://s{site}.shop.test/")
                await node.process_response(page, response(page, f"c{site}=x; Path=/"))
            made.clear()
            login = Request("http://www.s7.shop.test/login")
            await node.process_response(login, response(login, "sid=1; Domain=s7.shop.test"))
            _, shared = await JarStore(client, "jars", CookieCipher(None)).read(jar_label(None))
            assert len(shared) == 301
            return made
        finally:
            await client.aclose()

    # s7's cookie before and after, and the new one (Domain=s7.shop.test: ".s7.shop.test")
    assert sorted(asyncio.run(scenario())) == [".s7.shop.test", "s7.shop.test", "s7.shop.test"]


def test_expired_cookies_leave_the_shared_jar(redis_url: str, redis_client: redis.Redis) -> None:
    """Scrapy forgets expired cookies (every 10,000 requests a jar sends, and never sends one);
    the shared jar kept them for ever: 3,001 fields after 3,000 pages that each set a cookie
    living one second, and every node read them all back (an audit). A response's change now
    takes its sites' expired cookies out, and a node's sweep every 10,000 requests of a jar
    (Scrapy's ``check_expired_frequency``) the rest."""

    async def scenario() -> tuple[int, int, int]:
        client = async_client(redis_url)
        try:
            node, other = two_nodes(client, {"COOKIES_ENABLED": True})
            for site in range(20):
                page = Request(f"http://s{site}.shop.test/")
                await node.process_response(page, response(page, "c=x; Path=/; Max-Age=1"))
            keep = Request("http://keep.test/")
            await node.process_response(keep, response(keep, "sid=1; Path=/; Max-Age=3600"))
            await asyncio.sleep(1.2)
            again = Request("http://s0.shop.test/p")
            await node.process_response(again, response(again, "d=y; Path=/"))
            after_one = redis_client.hlen(jar_key("jars", jar_label(None))) - 1
            node.jars[None].check_expired_frequency = 5
            for number in range(5):
                await node.process_request(Request(f"http://keep.test/p/{number}"))
            after_sweep = redis_client.hlen(jar_key("jars", jar_label(None))) - 1
            page = Request("http://keep.test/p/9")
            other._stamp(page)
            page.meta["_cookies_version"] = node._states[jar_label(None)].known
            await other.process_request(page)
            return after_one, after_sweep, len(other.jars[None])
        finally:
            await client.aclose()

    # 20 expired + sid + d, less s0's expired one; then sid and d
    assert asyncio.run(scenario()) == (21, 2, 2)


def test_a_node_reads_what_changed_in_a_jar_since_it_read_it(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that needed a newer version of a jar read all of it: in a broad crawl with the
    cookies of 2,000 sites in one jar, each node read them all after every other node's write
    (an audit). It reads what changed since the version it read; the whole jar the first time,
    and when the changes do not tell (a node of an earlier version wrote the jar alone)."""
    decoded: list[str] = []

    def counted(value: bytes) -> Cookie:
        cookie = cookie_from_json(value)
        decoded.append(cookie.name)
        return cookie

    monkeypatch.setattr("crawler.cookies.jar_store.cookie_from_json", counted)
    settings: dict[str, object] = {"COOKIES_ENABLED": True, "COOKIES_SHARED_REFRESH": 0.0}

    async def scenario() -> list[object]:
        client = async_client(redis_url)
        try:
            a, b = two_nodes(client, settings)

            async def set_on_a(url: str, set_cookie: str) -> None:
                page = Request(url)
                await a.process_response(page, response(page, set_cookie))

            async def sent_by_b(url: str) -> str:
                request = Request(url)
                a._stamp(request)  # scheduled on A, leased by B
                await b.process_request(request)
                return (request.headers.get("Cookie") or b"").decode()

            for site in range(50):
                await set_on_a(f"http://s{site}.shop.test/", f"c{site}=x; Path=/")
            seen: list[object] = [await sent_by_b("http://s3.shop.test/p"), len(decoded)]
            decoded.clear()
            await set_on_a("http://s3.shop.test/login", "c3=y; Path=/")
            await set_on_a("http://s4.shop.test/logout", "c4=; Max-Age=0; Path=/")
            seen += [await sent_by_b("http://s3.shop.test/p"), list(decoded)]
            seen.append(await sent_by_b("http://s4.shop.test/p"))
            # a node of an earlier version: the cookie and the version, no change recorded
            (old,) = cookies_set_by(["c5=z; Path=/"])
            old.domain = "s5.shop.test"
            key = jar_key("jars", jar_label(None))
            version = int(redis_client.hget(key, "") or 0) + 1
            redis_client.hset(key, cookie_field(old), b"plain\n" + cookie_json(old))
            redis_client.hset(key, "", version)
            seen.append(await sent_by_b("http://s5.shop.test/p"))
            stats = b.crawler.stats
            assert stats is not None
            seen.append(stats.get_value("cookies/shared/read_whole"))
            return seen
        finally:
            await client.aclose()

    # the whole jar first (50 cookies); then c3 alone, c4 gone; the old node's write whole
    assert asyncio.run(scenario()) == ["c3=x", 50, "c3=y", ["c3"], "", "c5=z", 2]


def test_a_jar_made_again_is_read_whole(redis_url: str, redis_client: redis.Redis) -> None:
    """A jar purged (or lost with Redis's data) and written again: a node that read the old one
    must not keep its cookies, as it would reading only what changed since."""

    async def scenario(a: SharedCookiesMiddleware, b: SharedCookiesMiddleware) -> str:
        await set_on(a, "http://shop.test/login", "old=1; Path=/")
        page = Request("http://shop.test/p/1")
        await b.process_request(page)
        assert page.headers.get("Cookie") == b"old=1"
        redis_client.delete(*redis_client.keys("{jars}:cookies:*"))  # crawler purge
        await set_on(a, "http://shop.test/login", "new=2; Path=/")
        later = Request("http://shop.test/p/2")
        await b.process_request(later)
        return (later.headers.get("Cookie") or b"").decode()

    assert on_two_nodes(redis_url, scenario) == "new=2"


def test_a_cookie_another_node_renewed_is_not_deleted_as_expired(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A node whose copy of a cookie expired took it out of the shared jar at its next write of
    the site, also when another node had renewed it meanwhile (a review): the renewed login
    was gone for every node. An expired cookie is deleted only if no node changed it after the
    version the deleting node read."""
    settings: dict[str, object] = {"COOKIES_ENABLED": True}

    async def scenario() -> tuple[list[str], str]:
        client = async_client(redis_url)
        try:
            a, b = two_nodes(client, settings)
            await set_on(a, "http://shop.test/login", "sid=1; Path=/; Max-Age=1")
            page = Request("http://shop.test/p/1")
            a._stamp(page)
            await b.process_request(page)  # B reads the jar
            await asyncio.sleep(1.2)  # both copies expired
            await set_on(b, "http://shop.test/login", "sid=2; Path=/; Max-Age=3600")
            await set_on(a, "http://shop.test/p/2", "seen=1; Path=/")  # A has not read B's write
            stored = redis_client.hgetall(jar_key("jars", jar_label(None)))
            later = Request("http://shop.test/p/3")
            b._stamp(later)
            await a.process_request(later)
            names = sorted(text(name).split("\t")[-1] for name in stored if name)
            return names, (later.headers.get("Cookie") or b"").decode()
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == (["seen", "sid"], "seen=1; sid=2")


@pytest.mark.parametrize(
    ("url", "set_cookie"),
    [
        ("http://[::1]:8080/p", "a=1; Path=/"),  # filed under [::1].local (a review)
        ("http://localhost:9/p", "a=1; Path=/"),  # under localhost.local
        ("http://127.0.0.1:5/", "a=1; Path=/"),
        ("http://www.a.shop.test/", "a=1; Domain=a.shop.test; Path=/"),
        ("http://www.a.shop.test/", "a=1; Path=/"),
    ],
)
def test_a_response_s_cookies_are_filed_under_its_site_s_domains(url: str, set_cookie: str) -> None:
    """A write compares the cookies of the site's domains only: every key Scrapy's jar files a
    response's cookie under must be one of them, or its later changes are never shared."""
    request = Request(url)
    jar = CookieJar()
    jar.extract_cookies(response(request, set_cookie), request)
    assert list(jar._cookies) and set(jar._cookies) <= set(site_domains(url))


def test_a_node_that_found_no_jar_looks_again(redis_url: str) -> None:
    """A node whose first look found no jar never looked again: its requests scheduled before
    another node's login (start()'s, unstamped) went without the login's cookie for 7 s, where
    standalone Scrapy sends it from the login on (an audit)."""
    settings: dict[str, object] = {"COOKIES_ENABLED": True, "COOKIES_SHARED_REFRESH": 0.0}

    async def scenario() -> list[str]:
        client = async_client(redis_url)
        try:
            a, b = two_nodes(client, settings)
            sent = []
            for step in range(2):
                request = Request(f"http://shop.test/pre/{step}")  # scheduled before the login
                await b.process_request(request)
                sent.append((request.headers.get("Cookie") or b"").decode())
                if not step:
                    await set_on(a, "http://shop.test/login", "sid=alice; Path=/")
            return sent
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == ["", "sid=alice"]


@pytest.mark.parametrize(
    ("on_a", "expected"), [("sid=alice; Path=/", "sid=alice"), ("sid=x; Path=/; Max-Age=0", "")]
)
def test_the_last_set_cookie_wins_also_when_the_node_held_it_already(
    on_a: str, expected: str, redis_url: str
) -> None:
    """Node A held sid=alice; node B logged in as bob; then A's page answered Set-Cookie
    sid=alice (a login again) or deleted sid (a logout). A's own jar saw no change, wrote
    nothing, and the cluster went on as bob, where standalone Scrapy goes on as the last
    answer says (an audit)."""

    async def scenario(a: SharedCookiesMiddleware, b: SharedCookiesMiddleware) -> str:
        await set_on(a, "http://shop.test/login1", "sid=alice; Path=/")
        if "Max-Age=0" in on_a:  # A holds no sid: it was never told of one
            a.jars[None].clear()
        await set_on(b, "http://shop.test/loginB", "sid=bob; Path=/")
        await set_on(a, "http://shop.test/loginA", on_a)  # A has not read B's write
        check = Request("http://shop.test/check")
        await b.process_request(check)
        return (check.headers.get("Cookie") or b"").decode()

    assert on_two_nodes(redis_url, scenario) == expected


def test_jar_keys_equal_in_python_are_one_shared_jar() -> None:
    """Scrapy keys its jars by meta['cookiejar'] in a dict, where 1, 1.0 and True are one key;
    the shared jars were three (an audit: 8 of 24 requests sent another jar's cookie)."""
    assert jar_label(1) == jar_label(1.0) == jar_label(True) == "1"
    assert jar_label(0) == jar_label(False) == "0"
    assert jar_label(1.5) == "1.5" and jar_label("1") == '"1"' and jar_label(None) == "null"


def test_the_same_set_cookie_again_changes_no_version(redis_url: str) -> None:
    """Every answer's Set-Cookie is written (the node's copy may be out of date), but one the
    shared jar already holds raises no version: the other nodes read nothing again."""

    async def scenario() -> tuple[int, int, object]:
        client = async_client(redis_url)
        try:
            a, _ = two_nodes(client, {"COOKIES_ENABLED": True})
            store = JarStore(client, "jars", CookieCipher(None))
            await set_on(a, "http://shop.test/p/1", "sid=1; Path=/")
            first = await store.version(jar_label(None))
            await set_on(a, "http://shop.test/p/2", "sid=1; Path=/")
            return (
                first,
                await store.version(jar_label(None)),
                a._stats.get_value("cookies/shared/written"),
            )
        finally:
            await client.aclose()

    first, second, written = asyncio.run(scenario())
    assert first == second and written == 1


def test_a_write_of_an_earlier_version_between_two_makes_the_next_read_whole(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A node of an earlier version writes the jar and records no change; a node of this
    version that read before it and reads after a later write of this version got that
    write's change only, and sent pages without the older node's cookies (an audit of a
    rolling upgrade: 11-33 of 100 pages)."""
    (older,) = cookies_set_by(["b=2; Path=/"])
    (newer,) = cookies_set_by(["c=3; Path=/"])

    async def scenario() -> JarChanges | None:
        client = async_client(redis_url)
        try:
            store = JarStore(client, "jars", CookieCipher(None))
            label = jar_label(None)
            (first,) = cookies_set_by(["a=1; Path=/"])
            _, read = await store.write(label, {cookie_field(first): cookie_json(first)}, [])
            key = jar_key("jars", label)  # as 317eb68's jar_write.lua writes: no change kept
            redis_client.hset(key, cookie_field(older), b"plain\n" + cookie_json(older))
            redis_client.hset(key, "", read + 1000)
            await store.write(label, {cookie_field(newer): cookie_json(newer)}, [])
            return await store.changes(label, read)
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) is None  # read whole


def test_a_cookie_an_older_node_renewed_is_not_deleted_as_expired(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A node of an earlier version renews a cookie without recording the change; a node of
    this version whose copy expired deleted it (a review: its change record was older than the
    version the node read)."""
    (cookie,) = cookies_set_by(["sid=1; Path=/"])
    field = cookie_field(cookie)

    async def scenario() -> bool:
        client = async_client(redis_url)
        try:
            store = JarStore(client, "jars", CookieCipher(None))
            label = jar_label(None)
            _, read = await store.write(label, {field: cookie_json(cookie)}, [])
            key = jar_key("jars", label)  # renewed the 317eb68 way: no change recorded
            redis_client.hset(key, field, b"plain\n" + cookie_json(cookie).replace(b"1", b"2"))
            redis_client.hset(key, "", read + 1000)
            await store.write(label, {}, [], expired=[field], read=read)
            return bool(redis_client.hexists(key, field))
        finally:
            await client.aclose()

    assert asyncio.run(scenario())


def test_a_sealed_jar_s_same_value_changes_no_version(redis_url: str) -> None:
    """Sealed values differ each time (Fernet): the Lua script's comparison never matched, and
    every answer that set a cookie again raised the version for every node (a review)."""
    (cookie,) = cookies_set_by(["sid=1; Path=/"])
    changed = {cookie_field(cookie): cookie_json(cookie)}

    async def scenario() -> tuple[tuple[int, int], tuple[int, int]]:
        client = async_client(redis_url)
        try:
            store = JarStore(client, "jars", CookieCipher(Fernet.generate_key()))
            return await store.write("null", changed, []), await store.write("null", changed, [])
        finally:
            await client.aclose()

    first, again = asyncio.run(scenario())
    assert again == (first[1], first[1])


def test_requests_that_come_while_a_jar_is_first_looked_at_wait_for_it(redis_url: str) -> None:
    """The first request of a jar looks at its version; the others that came meanwhile did not
    wait for that look and went without the login another node had made (a review)."""

    async def scenario() -> list[str]:
        client = async_client(redis_url)
        try:
            a, b = two_nodes(client, {"COOKIES_ENABLED": True, "COOKIES_SHARED_REFRESH": 0.5})
            await set_on(a, "http://shop.test/login", "sid=alice; Path=/")
            requests = [Request(f"http://shop.test/p/{n}") for n in range(3)]
            await asyncio.gather(*(b.process_request(request) for request in requests))
            return [(request.headers.get("Cookie") or b"").decode() for request in requests]
        finally:
            await client.aclose()

    assert asyncio.run(scenario()) == ["sid=alice"] * 3
