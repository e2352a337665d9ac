"""How a shared session meets HTTP (``SharedSessionMiddleware``): the ``Cookie`` header a
request carries (and the cookies a browser page gets), the cookies a response sets, and what a
response says about the account."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached

from crawler.sessions import OWN_COOKIES_META, Cookie, Health, Session
from crawler.sessions.cookies import parse_set_cookie

LOGIN_WORDS = (b"login", b"signin", b"sign_in")


def default_state(response: Response) -> Health | None:
    """401 or a redirect to a login page: expired; 429: risky; else fine."""
    if response.status == 401:
        return Health.EXPIRED
    location = (response.headers.get(b"Location") or b"").lower()
    if 300 <= response.status < 400 and any(word in location for word in LOGIN_WORDS):
        return Health.EXPIRED
    if response.status == 429:
        return Health.RISKY
    return None


def set_cookies(response: Response) -> list[Cookie]:
    """Cookies of the response's ``Set-Cookie`` headers (host-only ones get the host).

    A browser-rendered response joins several ``Set-Cookie`` values with newlines.
    """
    headers = [
        line
        for value in response.headers.getlist(b"Set-Cookie")
        for line in value.decode("latin-1").split("\n")
    ]
    return parse_set_cookie(headers, urlsplit(response.url).hostname or "")


def with_session_cookies(own: str, session: Session, url: str) -> str:
    """The ``Cookie:`` header of a request to ``url``: the session's cookies that go there,
    and the request's own (its ``cookies``, a cookie jar's, a header the spider set) but those
    the session also has (the session's value wins)."""
    shared = session.cookies_for(url, time.time())
    names = {cookie.name for cookie in shared}
    kept = [
        pair.strip()
        for pair in own.split(";")
        if pair.strip() and pair.split("=", 1)[0].strip() not in names
    ]
    return "; ".join(kept + [f"{cookie.name}={cookie.value}" for cookie in shared])


def own_cookies(request: Request) -> str:
    """The request's own cookies (``OWN_COOKIES_META``) for its host, recorded in its meta."""
    host = urlparse_cached(request).hostname or ""
    by_host = request.meta.get(OWN_COOKIES_META)
    if by_host is None:  # first pass: Scrapy's CookiesMiddleware (700) built the header
        built = request.headers.get(b"Cookie")
        by_host = {host: built.decode("latin-1") if built else ""}
    elif isinstance(by_host, str):  # recorded by an earlier version, for whichever host
        by_host = {host: by_host}
    # a new dict: a redirect shares its source's meta values
    request.meta[OWN_COOKIES_META] = by_host = {host: "", **by_host}
    return str(by_host[host])


def verdict(after: Health | None, max_strikes: int) -> str:
    """What a mark did to the account (its health after it), for the log."""
    if after is None:
        return "it is no longer stored"
    if after is Health.RETIRED:
        return f"it is retired (SESSIONS_MAX_STRIKES={max_strikes} strikes)"
    if after in (Health.RISKY, Health.BANNED):
        return f"marked {after.value}, it rests until its cooldown ends"
    if after is Health.EXPIRED:
        return "marked expired, a log-in replaces it (or an imported session, without one)"
    return "a newer log-in already replaced the cookies it was sent with"


def browser_cookies(session: Session, url: str) -> list[dict[str, Any]]:
    """The session's cookies as Playwright's ``add_cookies`` wants them (JSON: storable meta)."""
    host = urlsplit(url).hostname or ""
    return [
        {
            "name": cookie.name,
            "value": cookie.value,
            "domain": cookie.domain or host,
            "path": cookie.path or "/",
            "expires": cookie.expires if cookie.expires is not None else -1,
            "httpOnly": cookie.http_only,
            "secure": cookie.secure,
        }
        for cookie in session.cookies
    ]
