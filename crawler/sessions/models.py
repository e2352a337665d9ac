"""Sessions and cookies: frozen values with an orjson encoding.

Cookie values and proxy credentials are secrets: they are left out of every
``repr`` (and so of logs, stats and exception messages). Use
:meth:`Session.summary` for anything a human or a log line sees.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import orjson

# Request meta: the request's own Cookie header per host ({host: header}), as Scrapy's
# CookiesMiddleware built it the first time (crawler.middlewares.sessions): a retry or a
# redirect (meta copied, dont_merge_cookies set) starts again from its host's; a host it was not
# built for (a redirect elsewhere) has none. A request that has it never stores its Cookie
# header, which holds the session's cookies (crawler.frontier.request_store).
OWN_COOKIES_META = "session_own_cookies"


class SessionError(Exception):
    """Base class of the session layer's errors (messages never carry cookie values)."""


class LoginFailed(SessionError):
    """A login did not produce the session cookie (the message never carries secrets)."""


class SessionDecodeError(SessionError):
    """A stored session could not be read back."""


class UnreadableSession(SessionDecodeError):
    """``acquire`` drew an account whose stored session cannot be read (a field written by
    hand, damaged): it is retired (reason ``unreadable``) and the caller draws again."""

    def __init__(self, platform: str, account: str, error: str) -> None:
        super().__init__(
            f"{error}: account {platform}/{account} retired (import it again with `crawler "
            f"sessions import`, or remove it with `crawler sessions invalidate {platform} "
            f"{account}`)"
        )
        self.account = account


class Health(StrEnum):
    HEALTHY = "healthy"  # usable
    EXPIRED = "expired"  # the site wants a new login (ensure_fresh_session)
    RISKY = "risky"  # soft block / captcha: rests for a cooldown, counts a strike
    BANNED = "banned"  # the site refused the account: rests for a cooldown, counts a strike
    RETIRED = "retired"  # too many strikes (or an operator's decision): never handed out


@dataclass(frozen=True, slots=True)
class Cookie:
    name: str
    value: str = field(repr=False)
    domain: str = ""  # "" = any host of the platform; else it and its subdomains, dot or not
    path: str = "/"
    expires: float | None = None  # Unix seconds; None = a browser-session cookie
    secure: bool = False
    http_only: bool = False

    @property
    def key(self) -> tuple[str, str, str]:
        """Cookies are the same cookie when name, domain and path match."""
        return (self.name, self.domain.lower(), self.path)

    def expired(self, now: float) -> bool:
        return self.expires is not None and self.expires <= now

    def sent_to(self, host: str, path: str, secure: bool) -> bool:
        """Whether a browser sends this cookie with a request to ``host`` and ``path``
        (``secure``: over https): its domain or a subdomain of it (a cookie without a domain,
        imported so, goes to every host), a path under its path, https for a secure one."""
        domain = self.domain.lstrip(".").lower()
        if domain and host != domain and not host.endswith("." + domain):
            return False
        if self.secure and not secure:
            return False
        prefix = self.path or "/"
        return path == prefix or (
            path.startswith(prefix) and (prefix.endswith("/") or path[len(prefix)] == "/")
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "domain": self.domain,
            "path": self.path,
            "expires": self.expires,
            "secure": self.secure,
            "httpOnly": self.http_only,
        }


def encode_cookies(cookies: Iterable[Cookie]) -> bytes:
    return orjson.dumps([cookie.to_json() for cookie in cookies])


def decode_cookies(data: bytes, where: str) -> tuple[Cookie, ...]:
    """Inverse of :func:`encode_cookies`; ``where`` names the session in errors."""
    try:
        rows = orjson.loads(data)
        return tuple(
            Cookie(
                name=str(row["name"]),
                value=str(row["value"]),
                domain=str(row["domain"]),
                path=str(row["path"]),
                expires=None if row["expires"] is None else float(row["expires"]),
                secure=bool(row["secure"]),
                http_only=bool(row["httpOnly"]),
            )
            for row in rows
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        # The message names the exception type only: its text could quote a value.
        raise SessionDecodeError(
            f"cookies of {where} are not valid cookie JSON ({type(exc).__name__})"
        ) from None


def merge_cookie_lists(
    current: Iterable[Cookie], incoming: Iterable[Cookie], now: float
) -> tuple[Cookie, ...]:
    """``current`` updated by ``incoming``; an incoming cookie already expired deletes."""
    merged = {cookie.key: cookie for cookie in current}
    for cookie in incoming:
        if cookie.expired(now):
            merged.pop(cookie.key, None)
        else:
            merged[cookie.key] = cookie
    return tuple(merged.values())


def mask_proxy(proxy: str | None) -> str | None:
    """The proxy URL without user and password."""
    if not proxy:
        return proxy
    parts = urlsplit(proxy)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}" if parts.scheme else f"{host}{port}"


def _iso(moment: float | None) -> str | None:
    if moment is None or moment <= 0 or math.isinf(moment):
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class Session:
    """One logged-in account of a platform, as shared by every node.

    Times are Unix seconds. ``generation`` counts logins/imports (``put``);
    ``version`` counts every cookie change (``put`` and ``merge_cookies``).
    """

    platform: str
    account: str
    cookies: tuple[Cookie, ...] = ()
    created_at: float = 0.0
    expires_at: float | None = None
    health: Health = Health.HEALTHY
    strikes: int = 0
    reason: str = ""
    last_used: float = 0.0
    cooldown_until: float = 0.0
    minute: int = 0  # the Unix minute that ``used_in_minute`` counts
    used_in_minute: int = 0
    proxy: str | None = field(default=None, repr=False)  # may carry credentials
    generation: int = 0
    version: int = 0
    updated_at: float = 0.0

    def cookie_dict(self) -> dict[str, str]:
        """name -> value, for ``Request(cookies=...)`` or a ``Cookie:`` header."""
        return {cookie.name: cookie.value for cookie in self.cookies}

    def cookies_for(self, url: str, now: float) -> list[Cookie]:
        """The cookies a browser would send with a request to ``url``, longest path first."""
        parts = urlsplit(url)
        host, secure = (parts.hostname or "").lower(), parts.scheme in ("https", "wss")
        matching = [
            cookie
            for cookie in self.cookies
            if not cookie.expired(now) and cookie.sent_to(host, parts.path or "/", secure)
        ]
        return sorted(matching, key=lambda cookie: -len(cookie.path))

    def cookie_header_for(self, url: str, now: float) -> str:
        """The ``Cookie:`` header of a request to ``url`` ("" when no cookie goes there)."""
        return "; ".join(f"{c.name}={c.value}" for c in self.cookies_for(url, now))

    def usable(self, now: float) -> bool:
        """Whether ``acquire`` could hand it out at ``now`` (per-minute limit aside): healthy,
        or risky or banned with its rest over, and not past its end."""
        return (
            self.health in (Health.HEALTHY, Health.RISKY, Health.BANNED)
            and self.cooldown_until <= now
            and (self.expires_at is None or self.expires_at > now)
        )

    def requests_in_minute(self, now: float) -> int:
        return self.used_in_minute if self.minute == int(now // 60) else 0

    def summary(self, now: float) -> dict[str, Any]:
        """Everything an operator may see: no cookie values, no proxy credentials."""
        return {
            "platform": self.platform,
            "account": self.account,
            "health": self.health.value,
            "reason": self.reason,
            "strikes": self.strikes,
            "cookies": sorted({cookie.name for cookie in self.cookies}),
            # still stored (a site set them, or they outlived an import), no longer sent
            "expired_cookies": sorted({c.name for c in self.cookies if c.expired(now)}),
            "created_at": _iso(self.created_at),
            "expires_at": _iso(self.expires_at),
            "last_used": _iso(self.last_used),
            "cooldown_until": _iso(self.cooldown_until if self.cooldown_until > now else None),
            "requests_this_minute": self.requests_in_minute(now),
            "proxy": mask_proxy(self.proxy),
            "generation": self.generation,
            "version": self.version,
        }
