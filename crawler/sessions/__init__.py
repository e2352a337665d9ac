"""Shared sessions: one store of logged-in accounts for every node (no Scrapy imports).

The downloader middleware needs only what is exported here plus a login provider
from :mod:`crawler.sessions.providers` (imported separately: it loads Playwright).
"""

from __future__ import annotations

from crawler.sessions.cookies import (
    CookieFormatError,
    load_cookie_file,
    parse_browser_json,
    parse_cookie_header,
    parse_netscape,
)
from crawler.sessions.crypto import KEY_ENV, CookieCipher, SessionKeyError
from crawler.sessions.keys import SessionKeys
from crawler.sessions.memory import MemorySessionStore
from crawler.sessions.models import (
    OWN_COOKIES_META,
    Cookie,
    Health,
    LoginFailed,
    Session,
    SessionDecodeError,
    SessionError,
)
from crawler.sessions.relogin import (
    LoginInProgress,
    LoginLease,
    MemoryLoginLease,
    RedisLoginLease,
    ReloginTimeout,
    SessionUnavailable,
    ensure_fresh_session,
    login_now,
)
from crawler.sessions.settings import SessionSettings
from crawler.sessions.store import RedisSessionStore, SessionStore

__all__ = [
    "KEY_ENV",
    "OWN_COOKIES_META",
    "Cookie",
    "CookieCipher",
    "CookieFormatError",
    "Health",
    "LoginFailed",
    "LoginInProgress",
    "LoginLease",
    "MemoryLoginLease",
    "MemorySessionStore",
    "RedisLoginLease",
    "RedisSessionStore",
    "ReloginTimeout",
    "Session",
    "SessionDecodeError",
    "SessionError",
    "SessionKeyError",
    "SessionKeys",
    "SessionSettings",
    "SessionStore",
    "SessionUnavailable",
    "ensure_fresh_session",
    "load_cookie_file",
    "login_now",
    "parse_browser_json",
    "parse_cookie_header",
    "parse_netscape",
]
