"""The shared cookie jar and a node's browser.

A rendered page's cookies live in the browser context of the node that rendered it (Chromium
ignores a ``Cookie`` header set for a request), so a cookie one node's browser got (a
``Set-Cookie`` of a rendered page, or one the page's script set) was missing from the pages
another node rendered. ``SharedCookiesMiddleware`` closes both ways with these helpers:

- before a rendered request navigates, ``into_page`` (a page-init step,
  ``crawler.browser_page_init``) puts the jar's cookies, as the node read them, into the
  page's context;
- after the response, the context's cookies (``cookies_of``) go into the jar, and so to every
  node, where they differ from what the jar holds (``merge``).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Mapping
from http.cookiejar import Cookie
from typing import Any

from playwright.async_api import Error as PlaywrightError
from scrapy import Request
from scrapy.http.cookies import CookieJar

logger = logging.getLogger(__name__)

COOKIES_META = "_shared_cookies_for_browser"  # the jar's cookies, for into_page (taken there)
INTO_PAGE = "crawler.middlewares.browser_cookies.into_page"
EXPIRY_SLACK = 2  # seconds
SAME_SITE = {"strict": "Strict", "lax": "Lax", "none": "None"}

# the browser context each rendered request's page belongs to, until its response is seen
_contexts: weakref.WeakKeyDictionary[Request, Any] = weakref.WeakKeyDictionary()


async def into_page(page: Any, request: Request) -> None:
    """Page-init step: the jar's cookies into the page's context, and the context remembered
    for the response."""
    cookies = request.meta.pop(COOKIES_META, None)
    if cookies:
        await page.context.add_cookies(cookies)
    _contexts[request] = page.context


async def cookies_of(request: Request) -> list[dict[str, Any]]:
    """The cookies of the browser context that rendered ``request`` (none when it was not
    rendered, or the context is gone)."""
    context = _contexts.pop(request, None)
    if context is None:
        return []
    try:
        found: list[dict[str, Any]] = await context.cookies()
    except PlaywrightError as exc:  # closed with its browser: nothing to take
        logger.debug("Browser cookies of %s not read: %s", request.url, exc)
        return []
    return found


def for_browser(cookie: Cookie) -> dict[str, Any]:
    """A jar's cookie as Playwright's ``add_cookies`` takes it (a host-only one by its URL)."""
    value: dict[str, Any] = {"name": cookie.name, "value": cookie.value or ""}
    if cookie.domain.startswith("."):
        value.update(domain=cookie.domain, path=cookie.path or "/")
    else:
        scheme = "https" if cookie.secure else "http"
        value["url"] = f"{scheme}://{cookie.domain}{cookie.path or '/'}"
    if cookie.expires is not None:
        value["expires"] = float(cookie.expires)
    rest = {name.lower(): held for name, held in getattr(cookie, "_rest", {}).items()}
    value["httpOnly"] = "httponly" in rest
    value["secure"] = bool(cookie.secure)
    same_site = SAME_SITE.get(str(rest.get("samesite", "")).lower())
    if same_site and (same_site != "None" or cookie.secure):
        value["sameSite"] = same_site
    return value


def from_browser(found: Mapping[str, Any]) -> Cookie:
    domain = str(found["domain"])
    dot = domain.startswith(".")
    expires_at = found.get("expires")
    expires = None if expires_at is None or expires_at < 0 else int(expires_at)
    rest: dict[str, str] = {}
    if found.get("httpOnly"):
        rest["HttpOnly"] = ""  # present: http.cookiejar keeps the attribute's value, none
    if found.get("sameSite"):
        rest["SameSite"] = str(found["sameSite"])
    return Cookie(
        0,
        str(found["name"]),
        str(found["value"]),
        None,
        False,
        domain,
        dot,
        dot,
        str(found.get("path") or "/"),
        True,
        bool(found.get("secure")),
        expires,
        expires is None,
        None,
        None,
        rest,
    )


def merge(jar: CookieJar, found: Iterable[Mapping[str, Any]]) -> None:
    """Put into ``jar`` the browser's cookies it lacks or holds with another value or
    lifetime (one the jar holds alike stays as it is: no change to share)."""
    held = {(cookie.domain, cookie.path, cookie.name): cookie for cookie in jar}
    for value in found:
        cookie = from_browser(value)
        same = held.get((cookie.domain, cookie.path, cookie.name))
        if same is None or same.value != cookie.value or not _same_time(same, cookie):
            jar.set_cookie(cookie)


def _same_time(held: Cookie, found: Cookie) -> bool:
    """The same lifetime, within the seconds two clocks reading one Max-Age may differ by."""
    if held.expires is None or found.expires is None:
        return held.expires is found.expires
    return abs(held.expires - found.expires) <= EXPIRY_SLACK
