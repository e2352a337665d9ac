"""Where sessions live: one Protocol, a Redis backend for the cluster, memory for one process.

Every change that touches several keys, or reads and then writes, is one Lua
script (``crawler/sessions/lua/``). Without an explicit ``now`` the scripts use
Redis server time, so the per-minute windows and cooldowns agree across nodes.
The cookie payload is sealed by :class:`CookieCipher` (Fernet when
``CRAWLER_SESSION_KEY`` is set); the other fields stay readable for operators.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from crawler.lua import script_text, text
from crawler.redis_connection import AsyncRedis
from crawler.sessions.crypto import CookieCipher, SessionKeyError
from crawler.sessions.keys import SessionKeys
from crawler.sessions.models import (
    Cookie,
    Health,
    Session,
    SessionDecodeError,
    SessionError,
    UnreadableSession,
    decode_cookies,
    encode_cookies,
    merge_cookie_lists,
)
from crawler.sessions.settings import SessionSettings

logger = logging.getLogger(__name__)
UNREADABLE = "unreadable"  # the reason of an account retired because its session can't be read

MERGE_ATTEMPTS = 8
_TIME_FIELDS = ("created_at", "expires_at", "last_used", "cooldown_until", "updated_at")


class SessionStore(Protocol):
    async def put(self, session: Session, ttl: float) -> Session:
        """Store ``session`` for ``ttl`` seconds (a login or an import): replaces the previous
        one, bumps ``generation`` and ``version``; ``expires_at`` becomes at most now + ttl.
        Returns the session as stored."""

    async def get(self, platform: str, account: str) -> Session | None: ...

    async def acquire(self, platform: str, *, now: float | None = None) -> Session | None:
        """The least recently used usable account, already counted as used (atomic)."""

    async def merge_cookies(
        self, platform: str, account: str, cookies: Iterable[Cookie], *, now: float | None = None
    ) -> Session | None:
        """Fold cookies a site set into the shared session (``None``: no such session)."""

    async def mark(
        self,
        platform: str,
        account: str,
        health: Health,
        reason: str,
        cooldown: float | None = None,
        *,
        strike: bool = True,
        generation: int | None = None,
        now: float | None = None,
    ) -> Health | None:
        """Record a verdict; returns the health after it (``None``: no such session).
        ``strike=False``: a rest the site asked for (``Retry-After``), which does not count
        towards ``SESSIONS_MAX_STRIKES``; nor does a mark while the account already rests (one
        burst of refusals, one strike)."""

    async def list(self, platform: str) -> builtins.list[Session]: ...

    async def invalidate(self, platform: str, account: str) -> bool: ...


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else str(round(seconds * 1000))


def _to_ms_precision(seconds: float) -> float:
    return round(seconds * 1000) / 1000.0


class RedisSessionStore:
    """Sessions in Redis (layout in ``docs/sessions.md``); ``cipher`` defaults to the env key."""

    def __init__(
        self,
        client: AsyncRedis,
        settings: SessionSettings | None = None,
        cipher: CookieCipher | None = None,
    ) -> None:
        self.redis = client
        self.settings = settings or SessionSettings()
        self.cipher = cipher if cipher is not None else CookieCipher.from_env()
        self._put = client.register_script(script_text("crawler.sessions", "put"))
        self._acquire = client.register_script(script_text("crawler.sessions", "acquire"))
        self._mark = client.register_script(script_text("crawler.sessions", "mark"))
        self._merge = client.register_script(script_text("crawler.sessions", "merge"))
        self._invalidate = client.register_script(script_text("crawler.sessions", "invalidate"))

    def keys(self, platform: str) -> SessionKeys:
        return SessionKeys(platform, self.settings.key_prefix)

    async def put(self, session: Session, ttl: float) -> Session:
        """Store ``session`` for ``ttl`` seconds. Its times, stamped by this node's clock, are
        moved onto Redis time, which every script compares them with."""
        keys = self.keys(session.platform)
        seconds, micros = await self.redis.time()
        now = int(seconds) + int(micros) / 1e6
        skew = now - time.time()  # Redis's clock minus this node's
        session = dataclasses.replace(
            session,
            created_at=session.created_at + skew if session.created_at else 0.0,
            expires_at=session.expires_at + skew if session.expires_at else None,
            last_used=session.last_used + skew if session.last_used else 0.0,
            cooldown_until=session.cooldown_until + skew if session.cooldown_until else 0.0,
        )
        expires_at = min(session.expires_at or now + ttl, now + ttl)
        payload, encoding = self.cipher.seal(encode_cookies(session.cookies))
        fields: list[Any] = [
            *("created_at", _ms(session.created_at or now), "expires_at", _ms(expires_at)),
            *("health", session.health.value, "reason", session.reason),
            *("strikes", session.strikes, "last_used", _ms(session.last_used)),
            *("cooldown_until", _ms(session.cooldown_until), "minute", session.minute),
            *("used", session.used_in_minute, "proxy", session.proxy or ""),
            *("cookies", payload, "enc", encoding),
        ]
        generation, version = await self._put(
            keys=[keys.session(session.account), keys.accounts],
            args=[session.account, max(1, round(ttl * 1000)), _ms(now), *fields],
        )
        return dataclasses.replace(  # times as stored: whole milliseconds
            session,
            created_at=_to_ms_precision(session.created_at or now),
            expires_at=_to_ms_precision(expires_at),
            last_used=_to_ms_precision(session.last_used),
            cooldown_until=_to_ms_precision(session.cooldown_until),
            generation=int(generation),
            version=int(version),
            updated_at=_to_ms_precision(now),
        )

    async def get(self, platform: str, account: str) -> Session | None:
        raw = await self.redis.hgetall(self.keys(platform).session(account))
        return self._decode(platform, account, raw) if raw else None

    async def acquire(self, platform: str, *, now: float | None = None) -> Session | None:
        keys = self.keys(platform)
        flat = await self._acquire(
            keys=[keys.accounts],
            args=[keys.session_prefix, _ms(now), self.settings.max_per_minute],
        )
        if not flat:
            return None
        fields = {text(flat[i]): flat[i + 1] for i in range(1, len(flat), 2)}
        account = text(flat[0])
        try:
            return self._decode(platform, account, fields)
        except SessionDecodeError as exc:  # never handed out again: a login or import replaces it
            await self.mark(platform, account, Health.RETIRED, UNREADABLE, strike=False)
            raise UnreadableSession(platform, account, str(exc)) from None

    async def merge_cookies(
        self, platform: str, account: str, cookies: Iterable[Cookie], *, now: float | None = None
    ) -> Session | None:
        incoming = tuple(cookies)
        key = self.keys(platform).session(account)
        for _attempt in range(MERGE_ATTEMPTS):
            current = await self.get(platform, account)
            if current is None:
                return None
            moment = time.time() if now is None else now
            merged = merge_cookie_lists(current.cookies, incoming, moment)
            if merged == current.cookies:
                return current  # nothing new: no write (sites repeat cookies on every response)
            payload, encoding = self.cipher.seal(encode_cookies(merged))
            version = await self._merge(
                keys=[key], args=[current.version, payload, encoding, _ms(now)]
            )
            if int(version):
                return dataclasses.replace(current, cookies=merged, version=int(version))
        raise SessionError(
            f"cookies of {platform}/{account} kept changing: {MERGE_ATTEMPTS} merges lost the race"
        )

    async def mark(
        self,
        platform: str,
        account: str,
        health: Health,
        reason: str,
        cooldown: float | None = None,
        *,
        strike: bool = True,
        generation: int | None = None,
        now: float | None = None,
    ) -> Health | None:
        rest = self.settings.cooldown if cooldown is None else cooldown
        result = await self._mark(
            keys=[self.keys(platform).session(account)],
            args=[
                health.value,
                reason,
                round(rest * 1000),
                _ms(now),
                self.settings.max_strikes,
                "" if generation is None else generation,
                "1" if strike else "0",
            ],
        )
        if not result:
            return None
        after = Health(text(result))
        if after is not health:
            logger.info(
                "session %s/%s is %s (marked %s: %s)", platform, account, after, health, reason
            )
        return after

    async def list(
        self, platform: str, unreadable: dict[str, str] | None = None
    ) -> builtins.list[Session]:
        """The platform's sessions; with ``unreadable``, the ones that cannot be read are left
        out and put there (account -> why) instead of raising ``SessionDecodeError``, and those
        whose cookies the key cannot open are listed without their cookies, the key's error in
        ``unreadable`` too (an operator without the key sees every other field)."""
        keys = self.keys(platform)
        members = await self.redis.zrange(keys.accounts, 0, -1)
        accounts = [text(member) for member in members if isinstance(member, bytes | str)]
        async with self.redis.pipeline(transaction=False) as pipe:
            for account in accounts:
                pipe.hgetall(keys.session(account))
            rows = await pipe.execute()
        sessions = []
        for account, raw in zip(accounts, rows, strict=True):
            if not raw:
                continue
            try:
                sessions.append(self._decode(platform, account, raw))
            except SessionKeyError as exc:
                if unreadable is None:
                    raise
                unreadable[account] = str(exc)
                with contextlib.suppress(SessionDecodeError):
                    sessions.append(self._decode(platform, account, raw, cookies=False))
            except SessionDecodeError as exc:
                if unreadable is None:
                    raise
                unreadable[account] = str(exc)
        return sessions

    async def invalidate(self, platform: str, account: str) -> bool:
        keys = self.keys(platform)
        deleted = await self._invalidate(
            keys=[keys.session(account), keys.accounts], args=[account]
        )
        return bool(deleted)

    def _decode(
        self, platform: str, account: str, raw: Mapping[Any, Any], *, cookies: bool = True
    ) -> Session:
        """The stored session (``cookies=False``: without its cookies, left sealed)."""
        where = f"{platform}/{account}"
        fields = {text(name): value for name, value in raw.items()}
        try:
            seconds = {name: float(fields[name]) / 1000.0 for name in _TIME_FIELDS}
            payload = (
                self.cipher.open(bytes(fields["cookies"]), text(fields["enc"]), where)
                if cookies
                else b"[]"
            )
            return Session(
                platform=platform,
                account=account,
                cookies=decode_cookies(payload, where),
                created_at=seconds["created_at"],
                expires_at=seconds["expires_at"] or None,
                health=Health(text(fields["health"])),
                strikes=int(fields["strikes"]),
                reason=text(fields["reason"]),
                last_used=seconds["last_used"],
                cooldown_until=seconds["cooldown_until"],
                minute=int(fields["minute"]),
                used_in_minute=int(fields["used"]),
                proxy=text(fields["proxy"]) or None,
                generation=int(fields["generation"]),
                version=int(fields["version"]),
                updated_at=seconds["updated_at"],
            )
        except (KeyError, ValueError) as exc:
            raise SessionDecodeError(
                f"session {where} has a missing or malformed field ({type(exc).__name__}: "
                f"{exc.args[0] if isinstance(exc, KeyError) else 'bad number or health'})"
            ) from None


async def session_to_replace(store: SessionStore, platform: str, account: str) -> Session | None:
    """The account's session before a login replaces it: None when there is none, or when it
    cannot be read (the login writes a readable one)."""
    try:
        return await store.get(platform, account)
    except SessionDecodeError as exc:
        logger.warning("%s: a login replaces it", exc)
        return None
