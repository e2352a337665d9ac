"""The cookie jars of a spider's crawl, shared by its nodes in Redis (no Scrapy imports).

Scrapy keeps a cookie jar per ``meta['cookiejar']`` (``None``: the default one) in each
process, so a login made on one node was not there on another. Here each jar is also a hash,
``{<spider>}:cookies:<jar as JSON>``: a field per cookie (``<domain>\\t<path>\\t<name>``)
holding its attributes as JSON (sealed with ``CRAWLER_SESSION_KEY`` when it is set), and the
field '' holding the jar's version, a token of Redis's clock that rises with every write
(``lua/jar_write.lua``). A node writes what a response (``Set-Cookie``) or a request's
``cookies=`` changed in its jar; a node that needs a version it has not read reads what changed
since the one it read (``{<spider>}:cookies:<jar>:changes``, a sorted set: each cookie's field
by the version that set or deleted it last, an hour of them kept), or, the first time and when
the changes do not tell, the whole jar.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.cookiejar import Cookie
from typing import Any

import orjson

from crawler.frontier.keys import glob_escape
from crawler.lua import data, script_text, text
from crawler.redis_connection import AsyncRedis
from crawler.sessions.crypto import CookieCipher

VERSION_FIELD = ""
# the attributes ``http.cookiejar.Cookie`` is made of (and ``rest``, ``rfc2109``)
ATTRIBUTES = (
    "version",
    "name",
    "value",
    "port",
    "port_specified",
    "domain",
    "domain_specified",
    "domain_initial_dot",
    "path",
    "path_specified",
    "secure",
    "expires",
    "discard",
    "comment",
    "comment_url",
)


def jar_label(jar: object) -> str:
    """A ``meta['cookiejar']`` value as text: its JSON (``null`` for the default jar); values
    equal in Python are one jar in Scrapy's dict of jars, so one label (``True``, ``1.0``: 1)."""
    jar = _one_key(jar)
    try:
        return orjson.dumps(jar).decode()
    except TypeError:  # not JSON: such a request cannot be stored either, its repr names it
        return repr(jar)


def _one_key(value: object) -> object:
    """``value`` with numbers equal in Python written alike (``True``, ``1.0``: ``1``)."""
    if isinstance(value, bool | float) and float(value).is_integer():
        return int(value)
    if isinstance(value, tuple):
        return [_one_key(item) for item in value]
    return value


def jar_key(spider: str, label: str) -> str:
    return f"{{{spider}}}:cookies:{label}"


def changes_key(spider: str, label: str) -> str:
    """A jar's changes (``lua/jar_write.lua``); JSON never ends a label with ``:changes``."""
    return f"{jar_key(spider, label)}:changes"


def jars_pattern(spider: str) -> str:
    """SCAN pattern of every shared cookie jar of a spider."""
    return f"{{{glob_escape(spider)}}}:cookies:*"


def cookie_field(cookie: Cookie) -> str:
    return f"{cookie.domain}\t{cookie.path}\t{cookie.name}"


def cookie_json(cookie: Cookie) -> bytes:
    fields: dict[str, Any] = {name: getattr(cookie, name) for name in ATTRIBUTES}
    fields["rest"] = dict(getattr(cookie, "_rest", {}))  # HttpOnly, SameSite, ...
    fields["rfc2109"] = cookie.rfc2109
    return orjson.dumps(fields)


def cookie_from_json(data: bytes) -> Cookie:
    fields = orjson.loads(data)
    return Cookie(
        fields["version"],
        fields["name"],
        fields["value"],
        fields["port"],
        fields["port_specified"],
        fields["domain"],
        fields["domain_specified"],
        fields["domain_initial_dot"],
        fields["path"],
        fields["path_specified"],
        fields["secure"],
        fields["expires"],
        fields["discard"],
        fields["comment"],
        fields["comment_url"],
        fields["rest"],
        rfc2109=fields["rfc2109"],
    )


@dataclass(frozen=True, slots=True)
class JarChanges:
    version: int  # the jar's version now
    cookies: list[Cookie]  # set or replaced since
    removed: list[tuple[str, str, str]]  # (domain, path, name) deleted since


class JarStore:
    """One spider's shared jars in one Redis."""

    def __init__(self, client: AsyncRedis, spider: str, cipher: CookieCipher) -> None:
        self._redis = client
        self._spider = spider
        self._cipher = cipher
        self._write = client.register_script(script_text("crawler.cookies", "jar_write"))
        self._changes = client.register_script(script_text("crawler.cookies", "jar_changes"))

    async def write(
        self,
        label: str,
        changed: Mapping[str, bytes],
        removed: Sequence[str],
        expired: Sequence[str] = (),
        read: int = 0,
    ) -> tuple[int, int]:
        """Set ``changed`` (field -> cookie JSON) and delete ``removed`` in the jar, and the
        ``expired`` fields unless another node changed them after version ``read`` (the one
        the node's jar holds all of: they were renewed); the jar's version before and after."""
        key = jar_key(self._spider, label)
        if changed and self._cipher.encrypts:  # sealed values differ each time: compare texts
            changed = await self._differing(label, key, changed)
        args: list[str | bytes | int] = [len(changed), len(expired), read]
        for field, cookie in changed.items():
            sealed, encoding = self._cipher.seal(cookie)
            args += [field, encoding.encode() + b"\n" + sealed]
        args += [*expired, *removed]
        before, after = await self._write(keys=[key, changes_key(self._spider, label)], args=args)
        return int(before), int(after)

    async def _differing(
        self, label: str, key: str, cookies: Mapping[str, bytes]
    ) -> dict[str, bytes]:
        """The ``cookies`` the jar does not hold as they are (opened: the Lua script compares
        plain values only)."""
        fields = list(cookies)
        stored = await self._redis.hmget(key, fields)
        return {
            field: cookies[field]
            for field, value in zip(fields, stored, strict=True)
            if value is None or self._opened(label, data(value)) != cookies[field]
        }

    async def version(self, label: str) -> int:
        """The jar's version (0: no jar)."""
        return int(await self._redis.hget(jar_key(self._spider, label), VERSION_FIELD) or 0)

    async def read(self, label: str) -> tuple[int, list[Cookie]]:
        """The jar's version and cookies (``SessionKeyError`` if sealed with another key)."""
        found = await self._redis.hgetall(jar_key(self._spider, label))
        stored = {text(name): data(value) for name, value in found.items()}
        version = int(stored.pop(VERSION_FIELD, b"0"))
        return version, [self._cookie(label, value) for value in stored.values()]

    async def changes(self, label: str, since: int) -> JarChanges | None:
        """What changed in the jar after version ``since``; None when only a whole read tells
        (forgotten changes, a write of a node of an earlier version, Redis lost the jar)."""
        keys = [jar_key(self._spider, label), changes_key(self._spider, label)]
        reply = await self._changes(keys=keys, args=[since])
        version = int(reply[0])
        if len(reply) == 1 or version < since:
            return None
        cookies, removed = [], []
        for field, value in zip(reply[1], reply[2], strict=True):
            if value is None:
                domain, path, name = text(field).split("\t", 2)
                removed.append((domain, path, name))
            else:
                cookies.append(self._cookie(label, data(value)))
        return JarChanges(version, cookies, removed)

    def _cookie(self, label: str, value: bytes) -> Cookie:
        return cookie_from_json(self._opened(label, value))

    def _opened(self, label: str, value: bytes) -> bytes:
        encoding, _, sealed = value.partition(b"\n")
        where = f"the shared cookie jar {label} of {self._spider!r}"
        return self._cipher.open(sealed, encoding.decode(), where)
