"""Shared sessions: both stores, encryption, cookie imports, one login for all, Chromium, CLI."""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import threading
import time
import types
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

import orjson
import pytest
import redis
import scrapy
from cryptography.fernet import Fernet
from redis.asyncio import Redis

import crawler.sessions.store as store_module
from crawler.cli import sessions as sessions_cli
from crawler.sessions import (
    KEY_ENV,
    Cookie,
    CookieCipher,
    CookieFormatError,
    Health,
    MemoryLoginLease,
    MemorySessionStore,
    RedisLoginLease,
    RedisSessionStore,
    ReloginTimeout,
    Session,
    SessionError,
    SessionKeyError,
    SessionKeys,
    SessionSettings,
    SessionStore,
    SessionUnavailable,
    ensure_fresh_session,
    parse_browser_json,
    parse_cookie_header,
    parse_netscape,
)
from crawler.sessions.providers import (
    CHROMIUM,
    BrowserConfig,
    Credentials,
    FormLoginConfig,
    PlaywrightFormLogin,
    PlaywrightQrLogin,
    QrChallenge,
    QrLoginConfig,
    print_qr,
)
from tests.login_site import LoginSite
from tests.services import unavailable

SECRET = "s3cr3t-VALUE-42"  # noqa: S105 - a cookie value the tests hunt for
T0 = time.time() // 60 * 60 + 5  # five seconds into the current Unix minute


def cookies(value: str = SECRET) -> tuple[Cookie, ...]:
    return (Cookie("z_c0", value, domain=".example.com", http_only=True), Cookie("lang", "en"))


@asynccontextmanager
async def open_store(
    kind: str, redis_url: str, settings: SessionSettings, cipher: CookieCipher | None = None
) -> AsyncIterator[SessionStore]:
    if kind == "memory":
        yield MemorySessionStore(settings)
        return
    client = Redis.from_url(redis_url)
    try:
        yield RedisSessionStore(client, settings, cipher or CookieCipher(None))
    finally:
        await client.aclose()


BACKENDS = pytest.mark.parametrize("kind", ["memory", "redis"])


@BACKENDS
def test_round_trip_and_ttl(kind: str, redis_url: str) -> None:
    async def body() -> None:
        async with open_store(kind, redis_url, SessionSettings()) as store:
            stored = await store.put(
                Session("zhihu", "alice", cookies(), proxy="http://u:pw@p:8"), 0.3
            )
            got = await store.get("zhihu", "alice")
            assert got == stored
            assert got.cookie_dict() == {"z_c0": SECRET, "lang": "en"}
            assert got.generation == got.version == 1
            assert got.expires_at is not None and got.expires_at <= time.time() + 0.3
            assert [s.account for s in await store.list("zhihu")] == ["alice"]
            await asyncio.sleep(0.4)
            assert await store.get("zhihu", "alice") is None
            assert await store.acquire("zhihu") is None

    asyncio.run(body())


async def put_accounts(store: SessionStore, *accounts: str) -> None:
    for account in accounts:
        await store.put(Session("zhihu", account, cookies(account)), 600)


@BACKENDS
def test_lru_rotation_and_per_minute_limit(kind: str, redis_url: str) -> None:
    async def body() -> None:
        async with open_store(kind, redis_url, SessionSettings(max_per_minute=2)) as store:
            await put_accounts(store, "a", "b", "c")
            order = [await store.acquire("zhihu", now=T0 + i) for i in range(7)]
            assert [s.account if s else None for s in order] == ["a", "b", "c", "a", "b", "c", None]
            assert order[3] is not None and order[3].requests_in_minute(T0 + 3) == 2
            nxt = await store.acquire("zhihu", now=T0 + 60)  # a new minute
            assert nxt is not None and nxt.account == "a"

    asyncio.run(body())


@BACKENDS
def test_cooldown_after_risky(kind: str, redis_url: str) -> None:
    async def body() -> None:
        async with open_store(kind, redis_url, SessionSettings()) as store:
            await put_accounts(store, "a", "b")
            assert (
                await store.mark("zhihu", "a", Health.RISKY, "captcha", 100, now=T0) is Health.RISKY
            )
            for i in range(1, 3):
                got = await store.acquire("zhihu", now=T0 + i)
                assert got is not None and got.account == "b"
            back = await store.acquire("zhihu", now=T0 + 101)
            assert back is not None and back.account == "a"
            assert (back.health, back.strikes) == (Health.HEALTHY, 1)

    asyncio.run(body())


@BACKENDS
def test_a_rest_the_site_asked_for_counts_no_strike(kind: str, redis_url: str) -> None:
    async def body() -> None:
        async with open_store(kind, redis_url, SessionSettings(max_strikes=2)) as store:
            await store.put(Session("zhihu", "alice", cookies()), 600)
            for _ in range(3):
                health = await store.mark("zhihu", "alice", Health.RISKY, "429", 2, strike=False)
                assert health is Health.RISKY
            session = await store.get("zhihu", "alice")
            assert session is not None and session.strikes == 0
            assert session.cooldown_until - time.time() <= 2

    asyncio.run(body())


@BACKENDS
def test_retired_after_repeated_bans(kind: str, redis_url: str) -> None:
    async def body() -> None:
        async with open_store(kind, redis_url, SessionSettings(max_strikes=3)) as store:
            await put_accounts(store, "a")
            marks = [await store.mark("zhihu", "a", Health.BANNED, "403", 0) for _ in range(3)]
            assert marks == [Health.BANNED, Health.BANNED, Health.RETIRED]
            assert await store.acquire("zhihu") is None
            assert await store.mark("zhihu", "a", Health.HEALTHY, "operator") is Health.RETIRED
            assert await store.mark("zhihu", "nobody", Health.BANNED, "403") is None
            with pytest.raises(SessionUnavailable, match="retired"):
                await ensure_fresh_session(
                    store, MemoryLoginLease(), "zhihu", "a", CountingLogin(None)
                )

    asyncio.run(body())


@BACKENDS
def test_one_burst_is_one_strike(kind: str, redis_url: str) -> None:
    """Three requests in flight answered 'slow down' in the same second counted three
    strikes and retired the account: a mark while the account rests counts none."""

    async def body() -> None:
        async with open_store(kind, redis_url, SessionSettings(max_strikes=3)) as store:
            await put_accounts(store, "a")
            marks = [
                await store.mark("zhihu", "a", Health.RISKY, "403", 100, now=T0 + i / 10)
                for i in range(3)
            ]
            assert marks == [Health.RISKY, Health.RISKY, Health.RISKY]
            session = await store.get("zhihu", "a")
            assert session is not None and session.strikes == 1
            assert session.cooldown_until == pytest.approx(T0 + 100.2)  # the latest rest
            later = await store.mark("zhihu", "a", Health.BANNED, "403", 100, now=T0 + 101)
            assert later is Health.BANNED  # a new event after the rest: a second strike
            session = await store.get("zhihu", "a")
            assert session is not None and session.strikes == 2

    asyncio.run(body())


@BACKENDS
def test_merge_cookies_and_generation_guard(kind: str, redis_url: str) -> None:
    async def body() -> None:
        async with open_store(kind, redis_url, SessionSettings()) as store:
            first = await store.put(Session("zhihu", "a", cookies()), 600)
            same = await store.merge_cookies("zhihu", "a", [Cookie("lang", "en")])
            assert same is not None and same.version == first.version  # nothing new: no write
            merged = await store.merge_cookies(
                "zhihu",
                "a",
                [
                    Cookie("lang", "", expires=1.0),
                    Cookie("d_c0", "new"),
                    Cookie("lang", "x", "b.com"),
                ],
            )
            assert merged is not None and merged.version == first.version + 1
            got = await store.get("zhihu", "a")
            assert got is not None and got.cookie_dict() == {
                "z_c0": SECRET,
                "d_c0": "new",
                "lang": "x",
            }
            assert await store.merge_cookies("zhihu", "nobody", [Cookie("x", "1")]) is None
            # A mark about the cookies of an older login is dropped.
            second = await store.put(Session("zhihu", "a", cookies("fresh")), 600)
            stale = await store.mark(
                "zhihu", "a", Health.EXPIRED, "401", generation=first.generation
            )
            assert stale is Health.HEALTHY and second.generation == first.generation + 1
            assert await store.invalidate("zhihu", "a")
            assert not await store.invalidate("zhihu", "a")
            assert await store.list("zhihu") == []

    asyncio.run(body())


def test_cookie_values_stay_secret(caplog: pytest.LogCaptureFixture) -> None:
    session = Session("zhihu", "alice", cookies(), proxy="http://user:pw123@proxy:8080")
    for text in (repr(session), str(session), orjson.dumps(session.summary(T0)).decode()):
        assert SECRET not in text and "pw123" not in text
    assert session.summary(T0)["proxy"] == "http://proxy:8080"
    assert session.summary(T0)["cookies"] == ["lang", "z_c0"]
    caplog.set_level(logging.DEBUG)

    async def body() -> None:
        store = MemorySessionStore()
        await store.put(session, 60)
        await store.mark("zhihu", "alice", Health.RISKY, "captcha")

    asyncio.run(body())
    assert SECRET not in caplog.text


def test_encryption_at_rest(redis_url: str, redis_client: redis.Redis) -> None:
    key = Fernet.generate_key()

    async def body() -> None:
        settings = SessionSettings()
        async with open_store("redis", redis_url, settings, CookieCipher(key)) as store:
            await store.put(Session("zhihu", "alice", cookies()), 600)
            got = await store.get("zhihu", "alice")
            assert got is not None and got.cookie_dict()["z_c0"] == SECRET
        async with open_store(
            "redis", redis_url, settings, CookieCipher(Fernet.generate_key())
        ) as wrong:
            with pytest.raises(
                SessionKeyError, match="CRAWLER_SESSION_KEY does not decrypt"
            ) as caught:
                await wrong.get("zhihu", "alice")
            assert SECRET not in str(caught.value)
        async with open_store("redis", redis_url, settings, CookieCipher(None)) as keyless:
            with pytest.raises(SessionKeyError, match="encrypted: set CRAWLER_SESSION_KEY"):
                await keyless.list("zhihu")

    asyncio.run(body())
    raw = redis_client.hgetall("sessions:{zhihu}:session:alice")
    assert raw[b"enc"] == b"fernet"
    assert all(SECRET.encode() not in value for value in raw.values())
    with pytest.raises(SessionKeyError, match="CRAWLER_SESSION_KEY is not a Fernet key"):
        CookieCipher.from_env({"CRAWLER_SESSION_KEY": "not-a-key"})


def test_settings_errors_name_the_setting() -> None:
    assert SessionSettings.from_mapping({"SESSIONS_MAX_STRIKES": "5"}).max_strikes == 5
    with pytest.raises(ValueError, match="SESSIONS_MAX_STRIKES=0 must be >= 1"):
        SessionSettings.from_mapping({"SESSIONS_MAX_STRIKES": 0})
    with pytest.raises(ValueError, match="SESSIONS_TTL='soon' is not a number"):
        SessionSettings.from_mapping({"SESSIONS_TTL": "soon"})
    # whole numbers however written, as every integer setting; a fraction or a bool was read
    # as another number without a word, and "3.0" failed the start (an audit)
    assert SessionSettings.from_mapping({"SESSIONS_MAX_STRIKES": "3.0"}).max_strikes == 3
    for given in (2.7, True):
        with pytest.raises(
            ValueError, match=f"SESSIONS_MAX_PER_MINUTE={given!r} is not an integer"
        ):
            SessionSettings.from_mapping({"SESSIONS_MAX_PER_MINUTE": given})
    with pytest.raises(ValueError, match="SESSIONS_COOLDOWN='inf' is not a finite number"):
        SessionSettings.from_mapping({"SESSIONS_COOLDOWN": "inf"})
    with pytest.raises(ValueError, match="platform='a b'"):
        MemorySessionStore()._live("a b", "x")


def test_cookie_header_parser() -> None:
    parsed = parse_cookie_header(f"Cookie: z_c0={SECRET}; lang=en; empty=", domain=".zhihu.com")
    assert [(c.name, c.value, c.domain) for c in parsed] == [
        ("z_c0", SECRET, ".zhihu.com"),
        ("lang", "en", ".zhihu.com"),
        ("empty", "", ".zhihu.com"),
    ]
    for bad, message in ((f"a=1; {SECRET}", "entry 2: expected name=value"), ("", "no name=value")):
        with pytest.raises(CookieFormatError, match=message) as caught:
            parse_cookie_header(bad)
        assert SECRET not in str(caught.value)


def test_netscape_parser() -> None:
    text = (
        "# Netscape HTTP Cookie File\n\n"
        f"#HttpOnly_.zhihu.com\tTRUE\t/\tTRUE\t1900000000\tz_c0\t{SECRET}\n"
        "www.zhihu.com\tFALSE\t/api\tFALSE\t0\tlang\ten\n"
    )
    z_c0, lang = parse_netscape(text)
    assert (z_c0.domain, z_c0.http_only, z_c0.secure, z_c0.expires) == (
        ".zhihu.com",
        True,
        True,
        1900000000.0,
    )
    assert (lang.domain, lang.path, lang.expires, lang.http_only) == (
        "www.zhihu.com",
        "/api",
        None,
        False,
    )
    for bad, message in (
        (f"ok\tTRUE\t/\tTRUE\t0\ta\t1\n.z.com TRUE / TRUE 0 z_c0 {SECRET}\n", "line 2: expected 7"),
        (f".z.com\tTRUE\t/\tTRUE\tnever\tz_c0\t{SECRET}", "line 1: field 5"),
        (f".z.com\tyes\t/\tTRUE\t0\tz_c0\t{SECRET}", "line 1: field 2"),
        ("# only comments\n", "no cookie lines"),
    ):
        with pytest.raises(CookieFormatError, match=message) as caught:
            parse_netscape(bad)
        assert SECRET not in str(caught.value)


def test_browser_json_parser() -> None:
    exported = [
        {
            "name": "z_c0",
            "value": SECRET,
            "domain": ".zhihu.com",
            "path": "/",
            "expirationDate": 1900000000.5,
            "httpOnly": True,
            "secure": True,
        },
        {"name": "sid", "value": "1", "domain": "zhihu.com", "expires": -1, "httpOnly": False},
    ]
    z_c0, sid = parse_browser_json(orjson.dumps(exported))
    assert (z_c0.value, z_c0.expires, z_c0.http_only) == (SECRET, 1900000000.5, True)
    assert (sid.expires, sid.path) == (None, "/")
    for bad, message in (
        (b"[{", "not valid JSON"),
        (b"{}", "non-empty list"),
        (orjson.dumps([exported[0], {"value": SECRET}]), "entry 2: 'name' is missing"),
        (
            orjson.dumps([{"name": "a", "value": SECRET, "expires": "soon"}]),
            "entry 1: 'expirationDate'",
        ),
        (orjson.dumps([5]), "entry 1: expected an object"),
    ):
        with pytest.raises(CookieFormatError, match=message) as caught:
            parse_browser_json(bad)
        assert SECRET not in str(caught.value)


class CountingLogin:
    """Logs in over plain HTTP (the form's POST), slowly enough for the others to queue up."""

    def __init__(self, site: LoginSite | None) -> None:
        self.site = site
        self.calls = 0

    async def login(self, account: str) -> Sequence[Cookie]:
        self.calls += 1
        assert self.site is not None
        await asyncio.sleep(0.3)
        status, _, value = await asyncio.to_thread(
            self.site.request, "POST", "/login", {"username": account, "password": "pw"}
        )
        assert status == 302
        return [Cookie("session", value, domain="127.0.0.1", http_only=True)]


def test_one_login_for_all_nodes(redis_url: str) -> None:
    with LoginSite({"alice": "pw"}) as site:
        provider = CountingLogin(site)
        settings = SessionSettings(login_lease=1.0, login_timeout=10)

        async def node(stale_generation: int) -> Session:
            client = Redis.from_url(redis_url)
            try:
                store = RedisSessionStore(client, settings, CookieCipher(None))
                lease = RedisLoginLease(client, settings)
                await store.mark(
                    "zhihu", "alice", Health.EXPIRED, "401", generation=stale_generation
                )
                return await ensure_fresh_session(
                    store, lease, "zhihu", "alice", provider, settings=settings
                )
            finally:
                await client.aclose()

        async def body() -> list[Session]:
            async with open_store("redis", redis_url, settings) as store:
                old = await store.put(Session("zhihu", "alice", (Cookie("session", "old"),)), 600)
            return list(await asyncio.gather(*(node(old.generation) for _ in range(3))))

        results = asyncio.run(body())
        assert site.logins == 1 and provider.calls == 1
        values = {s.cookie_dict()["session"] for s in results}
        assert len(values) == 1 and values != {"old"}
        assert {(s.health, s.generation) for s in results} == {(Health.HEALTHY, 2)}
        assert site.request("GET", "/me", cookie=values.pop())[:2] == (200, "alice")


def test_lease_belongs_to_its_owner_and_waiters_time_out(redis_url: str) -> None:
    async def body() -> None:
        settings = SessionSettings(login_lease=5, login_timeout=0.3)
        async with open_store("redis", redis_url, settings) as store:
            assert isinstance(store, RedisSessionStore)
            lease = RedisLoginLease(store.redis, settings)
            token = await lease.acquire("zhihu", "alice")
            assert token is not None and await lease.acquire("zhihu", "alice") is None
            assert not await lease.release("zhihu", "alice", "not-the-token")
            assert await lease.renew("zhihu", "alice", token)
            started = time.monotonic()
            with pytest.raises(ReloginTimeout, match=r"zhihu/alice after 0\.3 s"):
                await ensure_fresh_session(
                    store, lease, "zhihu", "alice", CountingLogin(None), settings=settings
                )
            assert 0.3 <= time.monotonic() - started < 1.5
            assert await lease.release("zhihu", "alice", token)

    asyncio.run(body())


class WrongPassword:
    """A login that always fails, counting its tries."""

    def __init__(self) -> None:
        self.calls = 0

    async def login(self, account: str) -> Sequence[Cookie]:
        self.calls += 1
        raise SessionError(f"{account}: wrong password")


def test_a_failed_login_is_not_tried_again_before_its_lease_expires(redis_url: str) -> None:
    async def body() -> None:
        settings = SessionSettings(login_lease=1.0, login_timeout=0.3)
        async with open_store("redis", redis_url, settings) as store:
            assert isinstance(store, RedisSessionStore)
            lease, provider = RedisLoginLease(store.redis, settings), WrongPassword()

            async def fresh() -> Session:
                return await ensure_fresh_session(
                    store, lease, "zhihu", "bob", provider, settings=settings
                )

            with pytest.raises(SessionError, match="wrong password"):
                await fresh()
            with pytest.raises(ReloginTimeout):  # every caller, on any node, waits
                await fresh()
            assert provider.calls == 1
            await asyncio.sleep(1.0)  # the lease expired: one caller tries again
            with pytest.raises(SessionError, match="wrong password"):
                await fresh()
            assert provider.calls == 2

    asyncio.run(body())


def need_chromium() -> None:
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")


def test_playwright_form_login() -> None:
    need_chromium()
    with LoginSite({"alice": "pw"}) as site:
        config = FormLoginConfig(
            f"{site.base_url}/login", "session", browser=BrowserConfig(timeout=20)
        )
        provider = PlaywrightFormLogin(config, lambda account: Credentials(account, "pw"))
        harvested = asyncio.run(provider.login("alice"))
        (session,) = [c for c in harvested if c.name == "session"]
        assert session.http_only and site.logins == 1
        assert site.request("GET", "/me", cookie=session.value)[:2] == (200, "alice")


def test_playwright_qr_login(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    need_chromium()
    with LoginSite({}) as site:
        seen: list[QrChallenge] = []

        def scan_later(challenge: QrChallenge) -> None:
            seen.append(challenge)
            token = (challenge.data or "").rsplit("/", 1)[-1]
            threading.Timer(0.3, site.scan, args=(token,)).start()
            print_qr(challenge)

        config = QrLoginConfig(
            f"{site.base_url}/qr",
            "session",
            png_path=tmp_path / "qr.png",
            browser=BrowserConfig(timeout=20),
        )
        harvested = asyncio.run(PlaywrightQrLogin(config, scan_later).login("bob"))
        (session,) = [c for c in harvested if c.name == "session"]
        assert site.request("GET", "/me", cookie=session.value)[:2] == (200, "qr-user")
        assert seen[0].png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "Scan the QR code to log in bob" in capsys.readouterr().out


def test_a_qr_selector_not_on_the_page_fails_soon_and_says_so(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --qr-selector the page does not have waited the whole login timeout and was
    reported as "no 'session' cookie after 20.0 s"."""
    need_chromium()
    with LoginSite({}) as site:
        started = time.monotonic()
        argv = ("sessions", "login", "example", "bob", "--url", f"{site.base_url}/qr", "--qr")
        assert (
            cli(
                *argv,
                "--success-cookie",
                "session",
                "--qr-selector",
                "#nope",
                "--png",
                "/dev/null",
                "--timeout",
                "20",
                "--redis",
                redis_url,
            )
            == 1
        )
        assert time.monotonic() - started < 15
    err = capsys.readouterr().err
    assert "no visible element matches the QR selector '#nope' (--qr-selector)" in err


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="crawler")
    sessions_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)


def test_cli_import_list_invalidate(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header = f"z_c0={SECRET}; lang=en"
    assert (
        cli("sessions", "import", "zhihu", "alice", "--cookie-header", header, "--redis", redis_url)
        == 0
    )
    netscape = tmp_path / "cookies.txt"
    netscape.write_text(f".zhihu.com\tTRUE\t/\tTRUE\t0\tz_c0\t{SECRET}\n")
    assert (
        cli("sessions", "import", "zhihu", "bob", "--netscape", str(netscape), "--redis", redis_url)
        == 0
    )
    assert cli("sessions", "list", "zhihu", "--json", "--redis", redis_url) == 0
    out = capsys.readouterr().out
    rows = [orjson.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(r["account"], r["health"], r["cookies"]) for r in rows] == [
        ("alice", "healthy", ["lang", "z_c0"]),
        ("bob", "healthy", ["z_c0"]),
    ]
    assert cli("sessions", "list", "zhihu", "--redis", redis_url) == 0
    assert cli("sessions", "invalidate", "zhihu", "alice", "--redis", redis_url) == 0
    assert cli("sessions", "invalidate", "zhihu", "alice", "--redis", redis_url) == 1
    broken = tmp_path / "broken.json"
    broken.write_text(f'[{{"value": "{SECRET}"}}]')
    assert (
        cli(
            "sessions",
            "import",
            "zhihu",
            "carol",
            "--browser-json",
            str(broken),
            "--redis",
            redis_url,
        )
        == 1
    )
    captured = capsys.readouterr()
    assert "entry 1: 'name' is missing" in captured.err
    assert SECRET not in captured.out + captured.err
    assert cli("sessions", "list", "zhihu", "--json", "--redis", redis_url) == 0
    assert [orjson.loads(line)["account"] for line in capsys.readouterr().out.splitlines()] == [
        "bob"
    ]


def test_an_import_of_expired_cookies_is_refused_or_left_out(
    redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cookies.txt whose z_c0 expired an hour ago was imported as a healthy session that
    lived a day (requests carried no z_c0): refused now, or (with --login-cookie) the session
    ends with its login cookie; a short-lived other cookie does not end it."""
    now = int(time.time())
    netscape = tmp_path / "cookies.txt"
    netscape.write_text(f".zhihu.com\tTRUE\t/\tTRUE\t{now - 3600}\tz_c0\t{SECRET}\n")
    assert (
        cli("sessions", "import", "zhihu", "old", "--netscape", str(netscape), "--redis", redis_url)
        == 1
    )
    captured = capsys.readouterr()
    assert "every cookie of the import has expired: z_c0 (at " in captured.err
    assert SECRET not in captured.out + captured.err

    netscape.write_text(
        f".zhihu.com\tTRUE\t/\tTRUE\t{now - 3600}\tz_c0\t{SECRET}\n"
        f".zhihu.com\tTRUE\t/\tFALSE\t{now + 3600}\td_c0\tdevice\n"
        f".zhihu.com\tTRUE\t/\tFALSE\t0\tlang\ten\n"
    )
    login_cookie = ("--login-cookie", "z_c0")
    argv = ("sessions", "import", "zhihu", "bob", "--netscape", str(netscape), "--redis", redis_url)
    assert cli(*argv, *login_cookie) == 1
    assert "the login cookie z_c0 (--login-cookie) expired at " in capsys.readouterr().err
    assert cli(*argv, "--json") == 0
    captured = capsys.readouterr()
    assert "left out cookies already expired: z_c0 (at " in captured.err
    imported = orjson.loads(captured.out)
    assert (imported["imported"], imported["cookies"]) == (2, ["d_c0", "lang"])
    assert imported["left_out"] == ["z_c0"]
    expires_at = datetime.fromisoformat(imported["expires_at"]).timestamp()
    assert expires_at > now + 80_000  # SESSIONS_TTL, a day: not when d_c0 expires
    # d_c0 must still live when carol's import reads it: its expiry is taken from the clock
    # now, not at the test's start (the imports above may take seconds on a loaded machine)
    d_c0_expires = int(time.time()) + 3
    netscape.write_text(
        f".zhihu.com\tTRUE\t/\tTRUE\t{now + 7200}\tz_c0\t{SECRET}\n"
        f".zhihu.com\tTRUE\t/\tFALSE\t{d_c0_expires}\td_c0\tdevice\n"
    )
    assert cli(*argv[:3], "carol", *argv[4:], *login_cookie) == 0
    assert "(when its cookie z_c0 expires)" in capsys.readouterr().out
    time.sleep(max(0.0, d_c0_expires + 0.1 - time.time()))
    assert cli("sessions", "list", "zhihu", "--json", "--redis", redis_url) == 0
    rows = {row["account"]: row for row in map(orjson.loads, capsys.readouterr().out.splitlines())}
    assert (rows["bob"]["expired_cookies"], rows["carol"]["expired_cookies"]) == ([], ["d_c0"])
    assert cli("sessions", "list", "zhihu", "--redis", redis_url) == 0
    assert "expired=d_c0" in capsys.readouterr().out


def test_a_node_an_hour_behind_stores_sessions_every_node_gets(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lifetimes compared in Redis are computed from Redis time, not the node's clock."""
    real = time.time
    monkeypatch.setattr(store_module, "time", types.SimpleNamespace(time=lambda: real() - 3600))

    async def body() -> tuple[Session | None, Session]:
        async with open_store("redis", redis_url, SessionSettings()) as store:
            created = real() - 3600  # a login on this node, stamped by its clock
            stored = await store.put(Session("zhihu", "late", cookies(), created_at=created), 1800)
            return await store.acquire("zhihu"), stored

    acquired, stored = asyncio.run(body())
    assert acquired is not None and acquired.account == "late"
    assert stored.expires_at is not None
    assert abs(stored.expires_at - (real() + 1800)) < 5  # Redis time + TTL
    assert abs(stored.created_at - real()) < 5  # moved onto the Redis clock


def test_an_unreadable_session_is_retired_and_the_other_accounts_serve(
    redis_url: str, redis_client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    """A session hash damaged by hand (its cookies not JSON) failed every request that drew
    it, with a traceback, and `crawler sessions list` showed no account at all."""
    from scrapy.utils.test import get_crawler

    from crawler.middlewares.sessions import SharedSessionMiddleware
    from crawler.sessions.models import UnreadableSession

    class Spider(scrapy.Spider):
        name = "unreadable"
        session_platform = "zhihu"

    settings = {"SESSIONS_ENABLED": True, "SESSIONS_MAX_TRIES": 2, "SESSIONS_WAIT": 1.0}
    crawler = get_crawler(Spider, settings_dict=settings)
    crawler.spider = spider = Spider.from_crawler(crawler)
    middleware = SharedSessionMiddleware.from_crawler(crawler)
    keys = SessionKeys("zhihu", SessionSettings().key_prefix)

    async def body() -> None:
        async with open_store("redis", redis_url, SessionSettings()) as store:
            await put_accounts(store, "alice", "bob")
            redis_client.hset(keys.session("alice"), "cookies", b"not-json{")
            with pytest.raises(UnreadableSession, match="zhihu/alice retired"):
                await store.acquire("zhihu")
            middleware.supply.store = store
            drawn = [await middleware.supply.usable(spider, "zhihu") for _ in range(2)]
            assert [s.account if s else None for s in drawn] == ["bob", "bob"]
            health = redis_client.hmget(keys.session("alice"), "health", "reason")
            assert health == [b"retired", b"unreadable"]

    asyncio.run(body())
    assert cli("sessions", "list", "zhihu", "--json", "--redis", redis_url) == 0
    rows = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(row["account"], row["health"]) for row in rows] == [
        ("bob", "healthy"),
        ("alice", "unreadable"),
    ]
    assert "not valid cookie JSON" in rows[1]["error"]


def test_a_key_that_cannot_read_the_stored_sessions_stops_the_node(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A CRAWLER_SESSION_KEY other than the one the sessions were stored with failed every
    request with a traceback and the crawl ended 'finished' with no item (an audit): the
    node stops, saying so once (exit 1: sessions_key)."""
    from scrapy.utils.test import get_crawler

    from crawler.exit_status import REFUSED_FINISH_REASONS
    from crawler.middlewares.refused import RefusedRequest
    from crawler.middlewares.sessions import SharedSessionMiddleware

    class Spider(scrapy.Spider):
        name = "keyed"
        session_platform = "zhihu"

    settings = {"SESSIONS_ENABLED": True, "SESSIONS_MAX_TRIES": 2, "SESSIONS_WAIT": 1.0}
    crawler = get_crawler(Spider, settings_dict=settings)
    crawler.spider = Spider.from_crawler(crawler)
    closed: list[str] = []

    async def close_spider_async(*, reason: str) -> None:
        closed.append(reason)

    crawler.engine = types.SimpleNamespace(close_spider_async=close_spider_async)  # type: ignore[assignment]
    middleware = SharedSessionMiddleware.from_crawler(crawler)
    caplog.set_level(logging.ERROR, "crawler.middlewares.session_supply")

    async def body() -> list[str]:
        sealed = CookieCipher(Fernet.generate_key())
        async with open_store("redis", redis_url, SessionSettings(), sealed) as store:
            await put_accounts(store, "alice")
        other = CookieCipher(Fernet.generate_key())
        async with open_store("redis", redis_url, SessionSettings(), other) as store:
            middleware.supply.store = store
            reasons = []
            for n in range(2):
                with pytest.raises(RefusedRequest) as refused:
                    await middleware.process_request(scrapy.Request(f"http://shop.test/{n}"))
                reasons.append(refused.value.reason)
            await asyncio.sleep(0)
            return reasons

    assert asyncio.run(body()) == ["sessions/key", "sessions/key"]
    assert closed == ["sessions_key"]
    assert "sessions_key" in REFUSED_FINISH_REASONS
    (said,) = [r.getMessage() for r in caplog.records]
    assert "CRAWLER_SESSION_KEY does not decrypt the cookies of zhihu/alice" in said
    assert "the node stops" in said
    assert crawler.stats.get_value("sessions/key") == 2


@pytest.mark.parametrize("key_then", ["another", "none"])
def test_sessions_list_without_their_key_shows_every_other_field(
    key_then: str,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """docs/sessions.md: with CRAWLER_SESSION_KEY only the cookies are sealed, every other
    field stays readable for operators. Without the key (or with another) `crawler sessions
    list` printed no row at all and exited 1 (an audit)."""
    monkeypatch.setenv(KEY_ENV, Fernet.generate_key().decode())
    header = f"z_c0={SECRET}"
    imported = ("sessions", "import", "zhihu", "alice", "--cookie-header", header)
    assert cli(*imported, "--redis", redis_url) == 0
    if key_then == "none":
        monkeypatch.delenv(KEY_ENV)
    else:
        monkeypatch.setenv(KEY_ENV, Fernet.generate_key().decode())
    capsys.readouterr()
    assert cli("sessions", "list", "zhihu", "--json", "--redis", redis_url) == 0
    (row,) = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (row["account"], row["health"], row["cookies"]) == ("alice", "healthy", None)
    assert KEY_ENV in row["error"]
    assert cli("sessions", "list", "zhihu", "--redis", redis_url) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("alice") and "healthy" in line and "cookies=? (" in line
    assert SECRET not in line


class FixedLogin:
    async def login(self, account: str) -> Sequence[Cookie]:
        return [Cookie("z_c0", f"fresh-{account}")]


@BACKENDS
def test_a_log_in_keeps_the_rest_of_an_account_the_site_flagged(kind: str, redis_url: str) -> None:
    """Answered risky (a rest of SESSIONS_COOLDOWN), then expired, then logged in again: the
    expired mark and the log-in each ended the rest, and the account flagged a moment before
    was used at once (an audit: 10 minutes early). Its rest outlives both."""
    settings = SessionSettings(cooldown=600)

    async def body() -> tuple[Session | None, float]:
        async with open_store(kind, redis_url, settings) as store:
            await put_accounts(store, "tester")
            await store.mark("zhihu", "tester", Health.RISKY, "HTTP 302")
            await store.mark("zhihu", "tester", Health.EXPIRED, "HTTP 401")
            lease = MemoryLoginLease()
            fresh = await ensure_fresh_session(
                store, lease, "zhihu", "tester", FixedLogin(), settings=settings
            )
            return await store.acquire("zhihu"), fresh.cooldown_until - time.time()

    drawn, rest = asyncio.run(body())
    assert drawn is None  # still resting
    assert 590 < rest <= 600
