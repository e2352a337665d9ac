"""Cookie imports: a ``Cookie:`` header, a Netscape cookies.txt, a browser-export JSON.

Malformed input raises :class:`CookieFormatError` naming the entry or line and
what is wrong with it, never the cookie values.
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Iterable
from datetime import UTC
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import orjson
from tldextract import TLDExtract

from crawler.sessions.models import Cookie, SessionError

# The public suffix list Scrapy's cookie jar consults, from the copy tldextract ships (never
# fetched: a node may have no internet, and a crawl must not wait on one)
_split_domain = TLDExtract(suffix_list_urls=(), include_psl_private_domains=True)
_NETSCAPE_FIELDS = 7
_HTTP_ONLY_PREFIX = "#HttpOnly_"
_FORBIDDEN_IN_NAME = set(' \t\r\n;,="')


class CookieFormatError(SessionError, ValueError):
    """The cookie import is malformed (the message names where, never a value)."""


def _check_name(name: str, where: str) -> str:
    if not name or _FORBIDDEN_IN_NAME.intersection(name):
        raise CookieFormatError(f"{where}: cookie name is empty or has spaces, ';', ',', '=', '\"'")
    return name


def _check_value(value: str, where: str, name: str) -> str:
    if any(ch in value for ch in ";\r\n"):
        raise CookieFormatError(f"{where}: value of cookie {name!r} contains ';' or a line break")
    return value


def parse_cookie_header(header: str, domain: str = "") -> list[Cookie]:
    """``name=value; name2=value2`` (a browser's ``Cookie:`` request header, prefix allowed)."""
    text = header.strip()
    if text.lower().startswith("cookie:"):
        text = text[len("cookie:") :]
    cookies = []
    for number, part in enumerate(text.split(";"), start=1):
        if not part.strip():
            continue
        where = f"Cookie header entry {number}"
        name, equals, value = part.strip().partition("=")
        if not equals:
            raise CookieFormatError(f"{where}: expected name=value, found no '='")
        name = _check_name(name.strip(), where)
        cookies.append(Cookie(name, _check_value(value.strip(), where, name), domain=domain))
    if not cookies:
        raise CookieFormatError("Cookie header: no name=value pairs")
    return cookies


def parse_set_cookie(
    headers: Iterable[str], host: str, *, now: float | None = None
) -> list[Cookie]:
    """Cookies of ``Set-Cookie`` header values, read as browsers read them (RFC 6265 5.2):
    the value is everything up to the first ``;``, unknown attributes (``Priority``,
    ``Partitioned``, ``SameSite``) are ignored, host-only cookies get ``host``, and an
    ``Expires`` in the past or a ``Max-Age`` of 0 or less makes a cookie that is already
    expired, which deletes the stored one (``merge_cookie_lists``).

    Unreadable headers are skipped (a site's bad cookie must not stop a crawl).
    """
    moment = time.time() if now is None else now
    found = []
    for header in headers:
        if (cookie := _set_cookie(header, host, moment)) is not None:
            found.append(cookie)
    return found


def _set_cookie(header: str, host: str, now: float) -> Cookie | None:
    pair, *attributes = header.split(";")
    name, equals, value = pair.partition("=")
    name = name.strip()
    if not equals or not name or _FORBIDDEN_IN_NAME.intersection(name):
        return None
    found: dict[str, str] = {}
    for attribute in attributes:
        key, _, text = attribute.partition("=")
        found[key.strip().lower()] = text.strip()
    expires: float | None = None
    if (max_age := found.get("max-age")) is not None and _is_integer(max_age):
        expires = now + int(max_age) if int(max_age) > 0 else 0.0
    elif (date := found.get("expires")) is not None:
        expires = _cookie_date(date)
    domain = found.get("domain", "").lower().lstrip(".")
    if domain and not _may_set_for(host, domain):
        return None  # a site may only set cookies for itself and its parent domains
    if domain == host and (_is_ip(host) or _is_public_suffix(host)):
        domain = ""  # the host's own, never its subdomains' (browsers do the same)
    path = found.get("path", "")
    return Cookie(
        name=name,
        value=value.strip(),
        domain="." + domain if domain else host,
        path=path if path.startswith("/") else "/",
        expires=expires,
        secure="secure" in found,
        http_only="httponly" in found,
    )


def _may_set_for(host: str, domain: str) -> bool:
    """Whether ``host`` may set a cookie with the ``Domain`` attribute ``domain`` (RFC 6265
    5.3): itself, or a parent domain that is no public suffix (``com``, ``co.uk``,
    ``github.io``); an IP address only itself."""
    if host == domain:
        return True
    return host.endswith("." + domain) and not _is_ip(host) and not _is_public_suffix(domain)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _is_public_suffix(domain: str) -> bool:
    return not _split_domain(domain).domain


def _cookie_date(text: str) -> float | None:
    """Unix seconds of an ``Expires`` date (``Thu, 01 Jan 1970 00:00:00 GMT``, or with
    dashes); None (a session cookie) when it cannot be read."""
    try:
        moment = parsedate_to_datetime(text.replace("-", " "))
    except (TypeError, ValueError, IndexError):
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _is_integer(text: str) -> bool:
    return re.fullmatch(r"-?[0-9]{1,18}", text) is not None


def _flag(text: str, where: str, field: str) -> bool:
    if text.upper() not in {"TRUE", "FALSE"}:
        raise CookieFormatError(f"{where}: field {field} must be TRUE or FALSE")
    return text.upper() == "TRUE"


def parse_netscape(text: str) -> list[Cookie]:
    """A cookies.txt (curl, wget, browser extensions): 7 tab-separated fields per line."""
    cookies = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip("\r\n")
        http_only = line.startswith(_HTTP_ONLY_PREFIX)
        if http_only:
            line = line[len(_HTTP_ONLY_PREFIX) :]
        elif not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"line {number}"
        fields = line.split("\t")
        if len(fields) != _NETSCAPE_FIELDS:
            raise CookieFormatError(
                f"{where}: expected {_NETSCAPE_FIELDS} tab-separated fields "
                "(domain, subdomains, path, secure, expires, name, value), "
                f"got {len(fields)}"
            )
        domain, subdomains, path, secure, expires, name, value = fields
        if not domain:
            raise CookieFormatError(f"{where}: the domain field is empty")
        include_subdomains = _flag(subdomains, where, "2 (include subdomains)")
        try:
            expiry = int(expires)
        except ValueError:
            raise CookieFormatError(
                f"{where}: field 5 (expires) must be Unix seconds (0 = session cookie)"
            ) from None
        name = _check_name(name, where)
        cookies.append(
            Cookie(
                name,
                _check_value(value, where, name),
                domain="." + domain.lstrip(".") if include_subdomains else domain,
                path=path or "/",
                expires=float(expiry) if expiry > 0 else None,
                secure=_flag(secure, where, "4 (secure)"),
                http_only=http_only,
            )
        )
    if not cookies:
        raise CookieFormatError("cookies.txt: no cookie lines")
    return cookies


def cookie_from_json(entry: Any, where: str) -> Cookie:
    """One cookie object of a browser export or of Playwright's ``context.cookies()``."""
    if not isinstance(entry, dict):
        raise CookieFormatError(f"{where}: expected an object, got {type(entry).__name__}")
    for field in ("name", "value"):
        if not isinstance(entry.get(field), str):
            raise CookieFormatError(f"{where}: '{field}' is missing or not a string")
    name = _check_name(entry["name"], where)
    expires = entry.get("expirationDate", entry.get("expires"))
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int | float)):
        raise CookieFormatError(f"{where}: 'expirationDate'/'expires' must be a number")
    if entry.get("session") is True or (expires is not None and expires <= 0):
        expires = None  # Chrome exports "expires": -1 for browser-session cookies
    for field in ("domain", "path"):
        if not isinstance(entry.get(field, ""), str):
            raise CookieFormatError(f"{where}: '{field}' must be a string")
    return Cookie(
        name,
        _check_value(entry["value"], where, name),
        domain=entry.get("domain", ""),
        path=entry.get("path") or "/",
        expires=None if expires is None else float(expires),
        secure=bool(entry.get("secure", False)),
        http_only=bool(entry.get("httpOnly", False)),
    )


def parse_browser_json(text: str | bytes) -> list[Cookie]:
    """A browser export (EditThisCookie, Cookie-Editor, Playwright ``context.cookies()``)."""
    try:
        entries = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise CookieFormatError(
            f"cookie JSON is not valid JSON (line {exc.lineno}, column {exc.colno})"
        ) from None
    if isinstance(entries, dict) and isinstance(entries.get("cookies"), list):
        entries = entries["cookies"]  # Playwright storage_state()
    if not isinstance(entries, list) or not entries:
        raise CookieFormatError("cookie JSON must be a non-empty list of cookie objects")
    return [cookie_from_json(entry, f"entry {i}") for i, entry in enumerate(entries, start=1)]


def load_cookie_file(path: Path) -> list[Cookie]:
    """A browser-export JSON or a cookies.txt, told apart by the first non-blank character."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip()[:1] in {"[", "{"}:
        return parse_browser_json(text)
    return parse_netscape(text)
