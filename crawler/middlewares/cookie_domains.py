"""The part of a cookie jar a request or response can touch: its site's domains.

Scrapy's ``CookieJar.add_cookie_header`` looks up only the jar's domains a request's host may
match (``potential_domain_matches``), and a ``Set-Cookie`` can only set a cookie on one of
them (the cookie policy refuses any other). ``SharedCookiesMiddleware`` compares those, before
and after a change, instead of the whole jar: with 2,000 sites in a jar, turning all of it into
JSON twice a response took 60 ms where Scrapy's lookup takes 0.2 ms.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterable, Iterator
from http.cookiejar import Cookie
from urllib.parse import urlsplit

from scrapy.http.cookies import IPV4_RE, CookieJar, potential_domain_matches

from crawler.cookies.jar_store import cookie_field, cookie_json


def site_domains(url: str) -> list[str]:
    """The jar's domain keys a request of ``url`` sends cookies of, as Scrapy looks them up."""
    host = urlsplit(url).hostname
    if not host:
        return []
    if ":" in host:  # IPv6: http.cookiejar files its cookies under [<address>].local
        return [f"[{host}]", f"[{host}].local", f".[{host}]", f".[{host}].local"]
    if IPV4_RE.search(host):
        return [host, "." + host]
    domains = potential_domain_matches(host)
    if "." not in host:  # http.cookiejar files a dotless host's cookies under <host>.local
        domains += potential_domain_matches(host + ".local")
    return domains


def jar_cookies(jar: CookieJar, domains: Iterable[str] | None) -> dict[str, bytes]:
    """The cookies ``jar`` holds in ``domains`` (None: all), as the shared jar stores them."""
    if domains is None:
        return {cookie_field(cookie): cookie_json(cookie) for cookie in jar}
    held = jar._cookies
    return {
        cookie_field(cookie): cookie_json(cookie)
        for domain in dict.fromkeys(domains)  # each once
        for paths in held.get(domain, {}).values()
        for cookie in paths.values()
    }


def drop_expired(jar: CookieJar, domains: Iterable[str] | None) -> list[str]:
    """Take the expired cookies of ``domains`` (None: all) out of ``jar``, as Scrapy's sweep of
    a jar takes them; their fields, as the shared jar names them."""
    now = int(time.time())
    held = jar._cookies
    expired = [
        cookie
        for domain in (list(held) if domains is None else set(domains))
        for cookies in held.get(domain, {}).values()
        for cookie in cookies.values()
        if cookie.is_expired(now)
    ]
    for cookie in expired:
        jar.clear(cookie.domain, cookie.path, cookie.name)
    return [cookie_field(cookie) for cookie in expired]


def added_domains(jar: CookieJar, held_before: int) -> list[str]:
    """The domain keys ``jar`` gained since it held ``held_before`` (keys are never taken
    out but by a whole ``clear()``, and a dict keeps them in the order they came)."""
    added = len(jar._cookies) - held_before
    return list(itertools.islice(reversed(jar._cookies), added)) if added > 0 else []


@contextlib.contextmanager
def set_or_deleted(jar: CookieJar) -> Iterator[set[str]]:
    """The fields of the cookies ``jar`` is told to set or delete meanwhile: also those it held
    as they are, or never held (a ``Set-Cookie`` that deletes calls ``clear``, which takes
    nothing out of a jar that lacks it). Its ``http.cookiejar`` jar's own two methods are
    wrapped for the time."""
    said: set[str] = set()
    inner = jar.jar
    set_cookie, clear = inner.set_cookie, inner.clear

    def setting(cookie: Cookie) -> None:
        said.add(cookie_field(cookie))
        set_cookie(cookie)

    def clearing(
        domain: str | None = None, path: str | None = None, name: str | None = None
    ) -> None:
        if name is not None:
            said.add(f"{domain}\t{path}\t{name}")
        clear(domain, path, name)

    own: dict[str, object] = {
        name: vars(inner)[name] for name in ("set_cookie", "clear") if name in vars(inner)
    }
    inner.set_cookie, inner.clear = setting, clearing  # type: ignore[method-assign]
    try:
        yield said
    finally:
        del inner.set_cookie, inner.clear
        vars(inner).update(own)  # whatever the instance had: the class's own, or a wrapper


def held_fields(jar: CookieJar, fields: Iterable[str]) -> dict[str, bytes]:
    """The cookies ``jar`` holds of ``fields`` (``<domain>\t<path>\t<name>``)."""
    held = jar._cookies
    found = {}
    for field in fields:
        domain, path, name = field.split("\t", 2)
        cookie = held.get(domain, {}).get(path, {}).get(name)
        if cookie is not None:
            found[field] = cookie_json(cookie)
    return found
