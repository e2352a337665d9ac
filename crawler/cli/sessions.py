"""``crawler sessions list|import|login|invalidate``: the shared login sessions in Redis.

Cookie values are never printed; ``list`` shows health, use and expiry only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from crawler.cli import numbers
from crawler.cli.config import add_redis_option, async_redis_client, project_settings
from crawler.redis_connection import AsyncRedis
from crawler.sessions import (
    Cookie,
    Health,
    RedisLoginLease,
    RedisSessionStore,
    Session,
    SessionError,
    SessionSettings,
    login_now,
    parse_browser_json,
    parse_cookie_header,
    parse_netscape,
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("sessions", help="shared login sessions of a platform")
    actions = parser.add_subparsers(dest="action", required=True)

    listing = actions.add_parser("list", help="accounts with health, last use and expiry")
    listing.add_argument("platform")
    listing.set_defaults(run=_command(_list))

    importing = actions.add_parser("import", help="store cookies exported from a browser")
    importing.add_argument("platform")
    importing.add_argument("account")
    source = importing.add_mutually_exclusive_group(required=True)
    source.add_argument("--cookie-header", metavar="S", help="'a=1; b=2' ('-' = read stdin)")
    source.add_argument("--netscape", type=Path, metavar="FILE", help="a cookies.txt")
    source.add_argument(
        "--browser-json", type=Path, metavar="FILE", help="a browser-export JSON (EditThisCookie)"
    )
    importing.add_argument("--domain", default="", help="domain of --cookie-header cookies")
    importing.add_argument("--proxy", default=None, help="proxy URL bound to the account")
    importing.add_argument(
        "--ttl", type=numbers.seconds, default=None, help="seconds (SESSIONS_TTL)"
    )
    importing.add_argument(
        "--login-cookie",
        metavar="NAME",
        default=None,
        help="the cookie that holds the login (e.g. z_c0): refused when missing or expired; "
        "the session lasts as long as it does",
    )
    importing.set_defaults(run=_command(_import))

    login = actions.add_parser("login", help="log in with Chromium now and store the cookies")
    login.add_argument("platform")
    login.add_argument("account")
    login.add_argument("--url", required=True, help="the login page")
    login.add_argument("--success-cookie", required=True, help="cookie a login sets, e.g. z_c0")
    login.add_argument("--qr", action="store_true", help="QR-code login instead of a form")
    login.add_argument("--username", default=None, help="form login: user name")
    login.add_argument("--password-env", metavar="VAR", help="form login: env var with password")
    login.add_argument("--username-selector", default="input[name=username]")
    login.add_argument("--password-selector", default="input[type=password]")
    login.add_argument("--submit-selector", default="[type=submit]")
    login.add_argument("--qr-selector", default="#qr")
    login.add_argument("--png", type=Path, default=Path("qr-login.png"), help="QR screenshot")
    login.add_argument(
        "--timeout", type=numbers.seconds, default=180.0, help="seconds for the login"
    )
    login.add_argument("--headed", action="store_true", help="show the browser window")
    login.set_defaults(run=_command(_login))

    invalidate = actions.add_parser("invalidate", help="forget an account's session")
    invalidate.add_argument("platform")
    invalidate.add_argument("account")
    invalidate.set_defaults(run=_command(_invalidate))

    for action in (listing, importing, login, invalidate):
        add_redis_option(action)
        action.add_argument(
            "--json",
            action="store_true",
            help="JSON for scripts (list: one object per account)",
        )


Action = Callable[[argparse.Namespace, RedisSessionStore], Awaitable[int]]


def _command(action: Action) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return asyncio.run(_with_store(args, action))
        except (SessionError, ValueError, OSError) as exc:
            print(f"crawler sessions {args.action}: {exc}", file=sys.stderr)
            return 1

    return run


@asynccontextmanager
async def _client(args: argparse.Namespace) -> AsyncIterator[AsyncRedis]:
    client = await async_redis_client(args)
    try:
        yield client
    finally:
        await client.aclose()


async def _with_store(args: argparse.Namespace, action: Action) -> int:
    settings = SessionSettings.from_mapping(project_settings())
    async with _client(args) as client:
        return await action(args, RedisSessionStore(client, settings))


def _row(summary: dict[str, Any]) -> str:
    cells = [f"{summary['account']:<20}", f"{summary['health']:<8}"]
    for name in ("strikes", "requests_this_minute", "last_used", "expires_at", "cooldown_until"):
        cells.append(f"{name}={summary[name] if summary[name] is not None else '-'}")
    if summary.get("error"):  # sealed: the key that opens its cookies is not given
        cells.append(f"cookies=? ({summary['error']})")
        return "  ".join(cells)
    cells.append("cookies=" + ",".join(str(c) for c in summary["cookies"]))
    if summary["expired_cookies"]:  # still stored, no longer sent
        cells.append("expired=" + ",".join(str(c) for c in summary["expired_cookies"]))
    return "  ".join(cells)


async def _list(args: argparse.Namespace, store: RedisSessionStore) -> int:
    now = time.time()
    unreadable: dict[str, str] = {}
    sessions = await store.list(args.platform, unreadable)
    for session in sessions:
        summary = session.summary(now)
        if (sealed := unreadable.pop(session.account, None)) is not None:
            summary |= {"cookies": None, "expired_cookies": [], "error": sealed}
        print(orjson.dumps(summary).decode() if args.json else _row(summary))
    for account, error in unreadable.items():  # a field written by hand, damaged
        if args.json:
            print(
                orjson.dumps({"account": account, "health": "unreadable", "error": error}).decode()
            )
        else:
            print(f"{account:<20}  unreadable  {error}")
    if not sessions and not unreadable and not args.json:
        print(f"no sessions for {args.platform}")
    return 0


def _imported_cookies(args: argparse.Namespace) -> list[Cookie]:
    if args.netscape is not None:
        return parse_netscape(args.netscape.read_text(encoding="utf-8"))
    if args.browser_json is not None:
        return parse_browser_json(args.browser_json.read_bytes())
    header = sys.stdin.read() if args.cookie_header == "-" else args.cookie_header
    return parse_cookie_header(header, domain=args.domain)


def _at(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")  # as `list`


def _unexpired(cookies: Sequence[Cookie], login_cookie: str | None, now: float) -> list[Cookie]:
    """The cookies of an import that have not expired (the others are named on stderr).
    Refuses an import whose every cookie, or whose login cookie (``--login-cookie``), expired."""
    kept = [cookie for cookie in cookies if not cookie.expired(now)]
    expired = [cookie for cookie in cookies if cookie.expired(now)]
    named = ", ".join(f"{cookie.name} (at {_at(cookie.expires or 0.0)})" for cookie in expired)
    again = "log in again in the browser and export its cookies again"
    if login_cookie is not None and not any(cookie.name == login_cookie for cookie in kept):
        ended = [cookie.expires or 0.0 for cookie in expired if cookie.name == login_cookie]
        if ended:
            raise SessionError(
                f"the login cookie {login_cookie} (--login-cookie) expired at "
                f"{_at(max(ended))}: {again}"
            )
        raise SessionError(f"the import has no {login_cookie} cookie (--login-cookie)")
    if not kept:
        raise SessionError(f"every cookie of the import has expired: {named}: {again}")
    if expired:
        print(
            f"crawler sessions import: left out cookies already expired: {named}", file=sys.stderr
        )
    return kept


def _end(cookies: Iterable[Cookie], login_cookie: str | None) -> tuple[float, str] | None:
    """When the session ends and the cookie that ends it: the login cookie's expiry (None:
    no login cookie named, or it lasts the browser session). Not the first cookie to expire:
    a browser's export holds short-lived cookies (tracking, load balancing) a login outlives."""
    ends = [
        (cookie.expires, cookie.name)
        for cookie in cookies
        if cookie.expires is not None and cookie.name == login_cookie
    ]
    return min(ends, default=None)


async def _import(args: argparse.Namespace, store: RedisSessionStore) -> int:
    parsed = _imported_cookies(args)
    now = time.time()
    cookies = tuple(_unexpired(parsed, args.login_cookie, now))
    previous = await store.get(args.platform, args.account)
    ttl: float = args.ttl or store.settings.ttl
    end = _end(cookies, args.login_cookie)
    ending = end if end is not None and end[0] - now < ttl else None
    if ending is not None:
        ttl = ending[0] - now  # the session, and its key, end with that cookie
    session = Session(
        args.platform,
        args.account,
        cookies,
        health=Health.HEALTHY,
        reason="import",
        proxy=args.proxy or (previous.proxy if previous else None),
        last_used=previous.last_used if previous else 0.0,
    )
    stored = await store.put(session, ttl)
    summary = stored.summary(time.time())
    left_out = sorted({cookie.name for cookie in parsed if cookie.expired(now)})
    if args.json:
        print(orjson.dumps({"imported": len(cookies), "left_out": left_out, **summary}).decode())
        return 0
    names = ", ".join(sorted({cookie.name for cookie in cookies}))
    print(f"imported {len(cookies)} cookies ({names}) for {args.platform}/{args.account}")
    why = f" (when its cookie {ending[1]} expires)" if ending is not None else ""
    print(f"expires at {summary['expires_at']}{why}")
    return 0


async def _login(args: argparse.Namespace, store: RedisSessionStore) -> int:
    from crawler.sessions import providers  # noqa: PLC0415 - loads Playwright only here

    browser = providers.BrowserConfig(timeout=args.timeout, headless=not args.headed)
    provider: providers.LoginProvider
    if args.qr:
        provider = providers.PlaywrightQrLogin(
            providers.QrLoginConfig(
                args.url, args.success_cookie, args.qr_selector, png_path=args.png, browser=browser
            )
        )
    else:
        if not args.username or not args.password_env:
            raise ValueError("a form login needs --username and --password-env (or give --qr)")
        password = os.environ.get(args.password_env)
        if not password:
            raise ValueError(f"--password-env {args.password_env}: that variable is not set")
        credentials = providers.Credentials(args.username, password)
        provider = providers.PlaywrightFormLogin(
            providers.FormLoginConfig(
                args.url,
                args.success_cookie,
                args.username_selector,
                args.password_selector,
                args.submit_selector,
                browser,
            ),
            lambda _account: credentials,
        )
    lease = RedisLoginLease(store.redis, store.settings)
    session = await login_now(
        store, lease, args.platform, args.account, provider, settings=store.settings
    )
    if args.json:
        print(orjson.dumps(session.summary(time.time())).decode())
        return 0
    names = ", ".join(sorted({cookie.name for cookie in session.cookies}))
    print(f"logged in {args.platform}/{args.account}: {len(session.cookies)} cookies ({names})")
    return 0


async def _invalidate(args: argparse.Namespace, store: RedisSessionStore) -> int:
    invalidated = await store.invalidate(args.platform, args.account)
    if args.json:
        shown = {"platform": args.platform, "account": args.account, "invalidated": invalidated}
        print(orjson.dumps(shown).decode())
    elif invalidated:
        print(f"invalidated {args.platform}/{args.account}")
    if not invalidated:
        print(f"no session for {args.platform}/{args.account}", file=sys.stderr)
    return 0 if invalidated else 1
