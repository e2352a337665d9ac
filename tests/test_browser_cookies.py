"""The shared cookie jar and a node's browser context, with a context of our own standing for
Playwright's (a store of cookies that answers ``add_cookies`` and ``cookies(urls)``)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.http import Response
from scrapy.http.cookies import CookieJar

from crawler.middlewares import browser_cookies

DAY = 86_400


class Context:
    """Cookies by (domain, path, name), as a browser context holds them."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, str, str], dict[str, Any]] = {}

    async def add_cookies(self, cookies: list[dict[str, Any]]) -> None:
        for cookie in cookies:
            found = dict(cookie)
            if "url" in found:
                found["domain"] = urlsplit(found.pop("url")).hostname
            found.setdefault("path", "/")
            found.setdefault("expires", -1)
            self.held[(found["domain"], found["path"], found["name"])] = found

    async def cookies(self, urls: list[str]) -> list[dict[str, Any]]:
        hosts = {urlsplit(url).hostname for url in urls}
        return [
            dict(c)
            for c in self.held.values()
            if c["domain"].lstrip(".") in hosts or any(h and h.endswith(c["domain"]) for h in hosts)
        ]


class Page:
    def __init__(self, context: Context) -> None:
        self.context = context


def jar_with(url: str, *set_cookies: str) -> CookieJar:
    jar = CookieJar()
    request = Request(url)
    response = Response(url, headers={"Set-Cookie": list(set_cookies)}, request=request)
    jar.extract_cookies(response, request)
    return jar


def rendered(
    context: Context,
    request: Request,
    jar: CookieJar,
    page_sets: dict[str, Any] | None = None,
    page_deletes: tuple[str, str, str] | None = None,
) -> browser_cookies.BrowserChanges:
    """The page of ``request`` opens (its jar into the context), sets ``page_sets`` (a
    Set-Cookie or a script) or deletes ``page_deletes``, closes: what changed in the
    browser, merged into the jar."""

    async def run() -> browser_cookies.BrowserChanges:
        browser_cookies.for_page(request, jar)
        await browser_cookies.into_page(Page(context), request)
        if page_sets:
            await context.add_cookies([page_sets])
        if page_deletes:
            del context.held[page_deletes]
        return await browser_cookies.changed_in_browser(request, request.url)

    changes = asyncio.run(run())
    browser_cookies.merge(jar, changes)
    return changes


def test_another_jar_s_cookies_in_the_context_do_not_flow_into_this_jar() -> None:
    """One browser context (scrapy-playwright's default) serves every jar: merging all it
    held put alice's session into bob's jar, and from there into bob's plain requests on
    every node (a review)."""
    context = Context()
    alice = jar_with("http://shop.test/", "sid=alice; Path=/")
    bob = CookieJar()
    rendered(context, Request("http://shop.test/a", meta={"cookiejar": "alice"}), alice)
    page_of_bob = Request("http://shop.test/b", meta={"cookiejar": "bob"})
    changed = rendered(context, page_of_bob, bob)
    assert not changed  # sid=alice was there before bob's page: not bob's
    assert [cookie.name for cookie in bob] == []


def test_what_the_page_set_goes_into_the_jar_and_nothing_travels_in_meta() -> None:
    context = Context()
    jar = jar_with("http://shop.test/", "lang=en; Path=/")
    request = Request("http://shop.test/login")
    changed = rendered(
        context, request, jar, {"name": "tok", "value": "js", "url": "http://shop.test/"}
    )
    assert [(c["name"], c["value"]) for c in changed.set] == [("tok", "js")]
    assert sorted((c.name, c.value) for c in jar) == [("lang", "en"), ("tok", "js")]
    assert context.held[("shop.test", "/", "lang")]["value"] == "en"  # the jar went in
    assert set(request.meta) <= {"_page_init_steps", "playwright_page_init_callback"}


def test_an_expiry_moved_a_little_is_no_change_and_a_longer_life_is() -> None:
    """An analytics cookie re-set on each page view bumped the jar (a Redis write and a read
    on every node) for every rendered page (a review)."""
    jar = jar_with("http://shop.test/", "_ga=1; Path=/; Max-Age=86400")
    (held,) = list(jar)
    assert held.expires is not None
    seen = {"name": "_ga", "value": "1", "domain": "shop.test", "path": "/"}
    before = [(c.name, c.expires) for c in jar]
    moved = browser_cookies.BrowserChanges([{**seen, "expires": held.expires + 30}], [])
    browser_cookies.merge(jar, moved)
    assert [(c.name, c.expires) for c in jar] == before
    longer = browser_cookies.BrowserChanges([{**seen, "expires": held.expires + 2 * DAY}], [])
    browser_cookies.merge(jar, longer)
    assert [(c.name, c.expires) for c in jar] == [("_ga", held.expires + 2 * DAY)]


def test_a_dotless_host_s_cookies_reach_the_browser_and_come_back() -> None:
    """http.cookiejar names a localhost cookie's domain localhost.local: the browser got it
    for a host that does not exist, and one from the browser was never sent (a review)."""
    jar = jar_with("http://localhost:8000/", "sid=1; Path=/")
    (cookie,) = list(jar)
    assert browser_cookies.for_browser(cookie)["domain"] == "localhost"
    back = browser_cookies.from_browser({"name": "t", "value": "2", "domain": "localhost"})
    jar.set_cookie(back)
    request = Request("http://localhost:8000/p")
    jar.add_cookie_header(request)
    assert request.headers.get("Cookie") in (b"sid=1; t=2", b"t=2; sid=1")


def test_a_cookie_the_page_deleted_leaves_the_jar() -> None:
    """A script's logout (document.cookie with a past expiry) was undone: the jar kept the
    cookie, the next page got it back, every node stayed logged in (an audit)."""
    context = Context()
    jar = jar_with("http://shop.test/", "sid=alice; Path=/", "lang=en; Path=/")
    rendered(
        context, Request("http://shop.test/logout"), jar, page_deletes=("shop.test", "/", "sid")
    )
    assert [cookie.name for cookie in jar] == ["lang"]


def test_a_cookie_s_path_is_kept_in_the_browser() -> None:
    """A cookie of Path=/p went to the browser as path / (given as a URL, whose path the
    browser cuts to its directory), and came back as a second cookie (an audit)."""
    jar = jar_with("http://shop.test/p/1", "sc=A; Path=/p")
    (cookie,) = list(jar)
    given = browser_cookies.for_browser(cookie)
    assert (given["domain"], given["path"]) == ("shop.test", "/p")
    context = Context()
    assert not rendered(context, Request("http://shop.test/p/2"), jar)
    assert [(c.domain, c.path, c.name) for c in jar] == [("shop.test", "/p", "sc")]
