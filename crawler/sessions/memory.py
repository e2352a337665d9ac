"""Sessions in one process (standalone mode): the semantics of the Lua scripts, in Python."""

from __future__ import annotations

import builtins
import dataclasses
import time
from collections.abc import Iterable
from typing import Any

from crawler.sessions.keys import check_names
from crawler.sessions.models import Cookie, Health, Session, merge_cookie_lists
from crawler.sessions.settings import SessionSettings

_RESTING = (Health.RISKY, Health.BANNED)


class MemorySessionStore:
    """Implements :class:`crawler.sessions.store.SessionStore`; entries expire after their TTL."""

    def __init__(self, settings: SessionSettings | None = None) -> None:
        self.settings = settings or SessionSettings()
        # (platform, account) -> (session, deadline); insertion order breaks LRU ties
        self._entries: dict[tuple[str, str], tuple[Session, float]] = {}

    def _live(self, platform: str, account: str) -> Session | None:
        check_names(platform, account)
        entry = self._entries.get((platform, account))
        if entry is None:
            return None
        if entry[1] <= time.time():
            del self._entries[(platform, account)]
            return None
        return entry[0]

    def _replace(self, session: Session, **changes: Any) -> Session:
        key = (session.platform, session.account)
        updated = dataclasses.replace(session, **changes)
        self._entries[key] = (updated, self._entries[key][1])
        return updated

    async def put(self, session: Session, ttl: float) -> Session:
        check_names(session.platform, session.account)
        now = time.time()
        previous = self._live(session.platform, session.account)
        stored = dataclasses.replace(
            session,
            created_at=session.created_at or now,
            expires_at=min(session.expires_at or now + ttl, now + ttl),
            generation=(previous.generation if previous else 0) + 1,
            version=(previous.version if previous else 0) + 1,
            updated_at=now,
        )
        self._entries.pop((session.platform, session.account), None)
        self._entries[(session.platform, session.account)] = (stored, now + ttl)
        return stored

    async def get(self, platform: str, account: str) -> Session | None:
        return self._live(platform, account)

    async def acquire(self, platform: str, *, now: float | None = None) -> Session | None:
        moment = time.time() if now is None else now
        limit = self.settings.max_per_minute
        for session in sorted(await self.list(platform), key=lambda s: s.last_used):
            used = session.requests_in_minute(moment)
            if (
                (session.health is Health.HEALTHY or session.health in _RESTING)
                and session.cooldown_until <= moment
                and (session.expires_at is None or session.expires_at > moment)
                and (limit == 0 or used < limit)
            ):
                return self._replace(
                    session,
                    health=Health.HEALTHY,
                    last_used=moment,
                    minute=int(moment // 60),
                    used_in_minute=used + 1,
                )
        return None

    async def merge_cookies(
        self, platform: str, account: str, cookies: Iterable[Cookie], *, now: float | None = None
    ) -> Session | None:
        session = self._live(platform, account)
        if session is None:
            return None
        moment = time.time() if now is None else now
        merged = merge_cookie_lists(session.cookies, cookies, moment)
        if merged == session.cookies:
            return session
        return self._replace(
            session, cookies=merged, version=session.version + 1, updated_at=moment
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
        session = self._live(platform, account)
        if session is None:
            return None
        if session.health is Health.RETIRED or (
            generation is not None and generation != session.generation
        ):
            return session.health
        moment = time.time() if now is None else now
        strikes, until = session.strikes, 0.0
        if health is Health.EXPIRED and session.cooldown_until > moment:
            until = session.cooldown_until  # the site's rest outlives the login it now wants
        if health in _RESTING:  # one event, one strike: none while the account rests
            strikes += 1 if strike and session.cooldown_until <= moment else 0
            rest = self.settings.cooldown if cooldown is None else cooldown
            until = max(session.cooldown_until, moment + rest)
            if strikes >= self.settings.max_strikes:
                health = Health.RETIRED
        self._replace(session, health=health, reason=reason, strikes=strikes, cooldown_until=until)
        return health

    async def list(self, platform: str) -> builtins.list[Session]:
        check_names(platform)
        accounts = [account for (p, account) in self._entries if p == platform]
        return [s for a in accounts if (s := self._live(platform, a)) is not None]

    async def invalidate(self, platform: str, account: str) -> bool:
        check_names(platform, account)
        return self._entries.pop((platform, account), None) is not None
