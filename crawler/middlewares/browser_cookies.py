"""The shared cookie jar and a node's browser.

A rendered page's cookies live in the browser context of the node that rendered it (Chromium
ignores a ``Cookie`` header set for a request), so a cookie one node's browser got (a
``Set-Cookie`` of a rendered page, or one the page's script set) was missing from the pages
another node rendered. ``SharedCookiesMiddleware`` closes both ways with these helpers:

- ``for_page`` hands the request's jar, as the node holds it, to ``into_page`` (a page-init
  step, ``crawler.browser_page_init``), which puts it into the page's context just before the
  page navigates; nothing of it travels in the request's meta (a copy of the request, stored
  in Redis, would hold every cookie in clear);
- after the response, ``changed_in_browser`` gives the cookies of the request's site that the
  context got while the page was open (a ``Set-Cookie``, a script's ``document.cookie``), and
  ``merge`` puts those into the jar, and so to every node. Only what this page changed: a
  browser context serves every jar of the node (scrapy-playwright's ``default``), and another
  jar's cookies it holds must not flow into this one.

A cookie whose value is the same and whose lifetime moved by less than ``LIFETIME_SLACK`` (an
analytics cookie re-set on every page view) is no change: no Redis write for it.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from http.cookiejar import Cookie
from typing import Any

from playwright.async_api import Error as PlaywrightError
from scrapy import Request
from scrapy.http.cookies import CookieJar

logger = logging.getLogger(__name__)

INTO_PAGE = "crawler.middlewares.browser_cookies.into_page"
LIFETIME_SLACK = 3600  # seconds a cookie's expiry may move without being a change to share
SAME_SITE = {"strict": "Strict", "lax": "Lax", "none": "None"}
LOCAL = ".local"  # http.cookiejar's domain for a dotless host's cookie: localhost.local


@dataclass(frozen=True, slots=True)
class OpenPage:
    context: Any  # the page's browser context
    before: dict[tuple[str, str, str], tuple[str, float]]  # its cookies when the page opened


# node-local, by request (never in meta): the jar for its page, then its page while open
_jars: weakref.WeakKeyDictionary[Request, CookieJar] = weakref.WeakKeyDictionary()
_pages: weakref.WeakKeyDictionary[Request, OpenPage] = weakref.WeakKeyDictionary()


def for_page(request: Request, jar: CookieJar) -> None:
    """Have ``into_page`` put ``jar`` into the context of the page that renders ``request``."""
    _jars[request] = jar


async def into_page(page: Any, request: Request) -> None:
    """Page-init step: the request's jar into the page's context (as it is now, just before
    the page navigates), and the context's cookies of the request's site remembered."""
    jar = _jars.pop(request, None)
    cookies = [for_browser(cookie) for cookie in jar] if jar is not None else []
    if cookies:
        await page.context.add_cookies(cookies)
    before = await page.context.cookies([request.url])
    _pages[request] = OpenPage(page.context, {_key(found): _state(found) for found in before})


@dataclass(frozen=True, slots=True)
class BrowserChanges:
    """What a page changed in its context's cookies of its site."""

    set: list[dict[str, Any]]  # got or changed (a Set-Cookie, a script's document.cookie)
    removed: list[tuple[str, str, str]]  # (domain, path, name): deleted (a script's logout)

    def __bool__(self) -> bool:
        return bool(self.set or self.removed)


async def changed_in_browser(request: Request, url: str) -> BrowserChanges:
    """The cookies of ``request``'s site that its page's context got, changed or lost while
    the page was open (nothing when it was not rendered, or the context is gone)."""
    page = _pages.pop(request, None)
    if page is None:
        return BrowserChanges([], [])
    try:
        after: list[dict[str, Any]] = await page.context.cookies(list({request.url, url}))
    except PlaywrightError as exc:  # closed with its browser: nothing to take
        logger.debug("Browser cookies of %s not read: %s", request.url, exc)
        return BrowserChanges([], [])
    now = {_key(found) for found in after}
    return BrowserChanges(
        [found for found in after if page.before.get(_key(found)) != _state(found)],
        [key for key in page.before if key not in now],
    )


def _key(found: Mapping[str, Any]) -> tuple[str, str, str]:
    return (str(found.get("domain")), str(found.get("path")), str(found.get("name")))


def _state(found: Mapping[str, Any]) -> tuple[str, float]:
    return (str(found.get("value")), float(found.get("expires") or -1))


def for_browser(cookie: Cookie) -> dict[str, Any]:
    """A jar's cookie as Playwright's ``add_cookies`` takes it (a host-only one by its URL)."""
    # a domain without a leading dot is host-only for Playwright, as in the jar; the path
    # given as such (a URL's path would be cut to its directory: /p became /)
    value: dict[str, Any] = {
        "name": cookie.name,
        "value": cookie.value or "",
        "domain": _browser_domain(cookie.domain),
        "path": cookie.path or "/",
    }
    if cookie.expires is not None:
        value["expires"] = float(cookie.expires)
    rest = {name.lower(): held for name, held in getattr(cookie, "_rest", {}).items()}
    value["httpOnly"] = "httponly" in rest
    value["secure"] = bool(cookie.secure)
    same_site = SAME_SITE.get(str(rest.get("samesite", "")).lower())
    if same_site and (same_site != "None" or cookie.secure):
        value["sameSite"] = same_site
    return value


def _browser_domain(domain: str) -> str:
    """A jar cookie's domain as the browser names it (localhost.local: the jar's localhost)."""
    if domain.endswith(LOCAL) and "." not in domain[: -len(LOCAL)]:
        return domain[: -len(LOCAL)]
    return domain


def _jar_domain(domain: str) -> str:
    """A browser cookie's domain as http.cookiejar names it (a dotless host + .local)."""
    return domain + LOCAL if "." not in domain else domain


def from_browser(found: Mapping[str, Any]) -> Cookie:
    domain = _jar_domain(str(found["domain"]))
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


def merge(jar: CookieJar, changes: BrowserChanges) -> None:
    """Put into ``jar`` the browser's cookies it lacks or holds with another value or a
    lifetime shorter by more than ``LIFETIME_SLACK``, and take out those the page deleted
    (anything else stays as it is: no change to share)."""
    held = {(cookie.domain, cookie.path, cookie.name): cookie for cookie in jar}
    for domain, path, name in changes.removed:
        if (key := (_jar_domain(domain), path, name)) in held:
            jar.jar.clear(*key)
    for value in changes.set:
        cookie = from_browser(value)
        same = held.get((cookie.domain, cookie.path, cookie.name))
        if same is None or same.value != cookie.value or _outlives(cookie, same):
            jar.set_cookie(cookie)


def _outlives(found: Cookie, held: Cookie) -> bool:
    """``found`` lives longer than ``held`` by more than the slack (a session extended)."""
    if found.expires is None:
        return held.expires is not None
    return held.expires is not None and found.expires - held.expires > LIFETIME_SLACK
