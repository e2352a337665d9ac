"""One login for all: a per-account lease so exactly one node logs in while the others wait.

The lease is ``SET key token NX PX ttl`` in Redis; its owner renews it every
third of its length while the login runs and deletes it with a compare-and-delete
script, so a node whose lease ran out can never release another node's lease.
Waiting nodes poll the session with exponential backoff (asyncio sleeps: the
event loop keeps running) until a login has replaced the expired cookies, the
lease frees up (then they try themselves), or ``SESSIONS_LOGIN_TIMEOUT`` passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from crawler.lua import script_text
from crawler.redis_connection import AsyncRedis
from crawler.sessions.keys import SessionKeys
from crawler.sessions.models import Health, LoginFailed, Session, SessionError
from crawler.sessions.settings import SessionSettings
from crawler.sessions.store import SessionStore, session_to_replace

if TYPE_CHECKING:
    from crawler.sessions.providers import LoginProvider

logger = logging.getLogger(__name__)

POLL_FIRST = 0.05  # seconds before a waiting node looks again; doubles up to POLL_MAX
POLL_MAX = 1.0


class SessionUnavailable(SessionError):
    """The account is retired: no login will bring it back (an operator may re-import it)."""


class ReloginTimeout(SessionError):
    """No fresh session arrived within ``SESSIONS_LOGIN_TIMEOUT``."""


class LoginInProgress(SessionError):
    """Another node holds the login lease of this account."""


class LoginLease(Protocol):
    async def acquire(self, platform: str, account: str) -> str | None:
        """A token when this caller now holds the lease, else ``None``."""

    async def renew(self, platform: str, account: str, token: str) -> bool: ...

    async def release(self, platform: str, account: str, token: str) -> bool: ...


class RedisLoginLease:
    """``<prefix>:{<platform>}:login:<account>`` = token, for ``SESSIONS_LOGIN_LEASE`` seconds."""

    def __init__(self, client: AsyncRedis, settings: SessionSettings | None = None) -> None:
        self.redis = client
        self.settings = settings or SessionSettings()
        self._ttl_ms = max(1, round(self.settings.login_lease * 1000))
        self._renew = client.register_script(script_text("crawler.sessions", "lease_renew"))
        self._release = client.register_script(script_text("crawler.sessions", "lease_release"))

    def key(self, platform: str, account: str) -> str:
        return SessionKeys(platform, self.settings.key_prefix).login(account)

    async def acquire(self, platform: str, account: str) -> str | None:
        token = secrets.token_hex(16)
        taken = await self.redis.set(self.key(platform, account), token, nx=True, px=self._ttl_ms)
        return token if taken else None

    async def renew(self, platform: str, account: str, token: str) -> bool:
        renewed = await self._renew(keys=[self.key(platform, account)], args=[token, self._ttl_ms])
        return bool(renewed)

    async def release(self, platform: str, account: str, token: str) -> bool:
        return bool(await self._release(keys=[self.key(platform, account)], args=[token]))


class MemoryLoginLease:
    """The same lease inside one process (standalone mode)."""

    def __init__(self, settings: SessionSettings | None = None) -> None:
        self.ttl = (settings or SessionSettings()).login_lease
        self._held: dict[tuple[str, str], tuple[str, float]] = {}

    def _holder(self, platform: str, account: str) -> str | None:
        held = self._held.get((platform, account))
        return held[0] if held is not None and held[1] > time.monotonic() else None

    async def acquire(self, platform: str, account: str) -> str | None:
        if self._holder(platform, account) is not None:
            return None
        token = secrets.token_hex(16)
        self._held[(platform, account)] = (token, time.monotonic() + self.ttl)
        return token

    async def renew(self, platform: str, account: str, token: str) -> bool:
        if self._holder(platform, account) != token:
            return False
        self._held[(platform, account)] = (token, time.monotonic() + self.ttl)
        return True

    async def release(self, platform: str, account: str, token: str) -> bool:
        if self._holder(platform, account) != token:
            return False
        del self._held[(platform, account)]
        return True


@contextlib.asynccontextmanager
async def _renewing(
    lease: LoginLease, platform: str, account: str, token: str, every: float
) -> AsyncIterator[None]:
    async def renew() -> None:
        while True:
            await asyncio.sleep(every)
            try:
                kept = await lease.renew(platform, account, token)
            except Exception:  # noqa: BLE001 - the login goes on; the lease may lapse
                logger.warning("could not renew the login lease of %s/%s", platform, account)
                continue
            if not kept:
                logger.warning("login lease of %s/%s lapsed during the login", platform, account)
                return

    task = asyncio.create_task(renew())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _login_under_lease(
    store: SessionStore,
    lease: LoginLease,
    token: str,
    platform: str,
    account: str,
    *,
    login: LoginProvider,
    settings: SessionSettings,
    forgive: bool = False,
) -> Session:
    """Log in (renewing the lease ``token`` meanwhile) and store the new cookies.

    The new session keeps the account's strikes and a rest still running (``forgive``
    clears both), proxy and last use; it is healthy and lives ``SESSIONS_TTL`` seconds.
    """
    async with _renewing(lease, platform, account, token, settings.login_lease / 3):
        cookies = tuple(await login.login(account))
    if not cookies:
        raise LoginFailed(
            f"the log-in of {platform}/{account} gave no cookies (a refused log-in? its "
            "provider should raise LoginFailed saying why)"
        )
    previous = await session_to_replace(store, platform, account) or Session(platform, account)
    fresh = dataclasses.replace(
        previous,
        cookies=cookies,
        created_at=time.time(),
        expires_at=None,
        health=Health.HEALTHY,
        reason="login",
        cooldown_until=0.0 if forgive else previous.cooldown_until,
        strikes=0 if forgive else previous.strikes,
    )
    stored = await store.put(fresh, settings.ttl)
    logger.info("session %s/%s: logged in (generation %d)", platform, account, stored.generation)
    return stored


async def login_now(
    store: SessionStore,
    lease: LoginLease,
    platform: str,
    account: str,
    login: LoginProvider,
    *,
    settings: SessionSettings | None = None,
) -> Session:
    """An operator's login: now, under the lease, forgiving earlier strikes."""
    settings = settings or SessionSettings()
    token = await lease.acquire(platform, account)
    if token is None:
        raise LoginInProgress(f"another node is logging in {platform}/{account}; try again later")
    try:
        return await _login_under_lease(
            store, lease, token, platform, account, login=login, settings=settings, forgive=True
        )
    finally:
        await lease.release(platform, account, token)


def _usable(session: Session | None) -> Session | None:
    """``session`` unless it needs a login; a retired account raises."""
    if session is not None and session.health is Health.RETIRED:
        raise SessionUnavailable(
            f"session {session.platform}/{session.account} is retired ({session.reason})"
        )
    return None if session is None or session.health is Health.EXPIRED else session


async def ensure_fresh_session(
    store: SessionStore,
    lease: LoginLease,
    platform: str,
    account: str,
    login: LoginProvider,
    *,
    settings: SessionSettings | None = None,
) -> Session:
    """The account's session, logging in first if it is missing or expired.

    Exactly one caller (across nodes) runs ``login``; the others wait for its
    result. Healthy, risky and banned sessions are returned as they are (the
    last two rest until their cooldown ends). Raises :class:`SessionUnavailable`
    for a retired account, :class:`ReloginTimeout` after ``SESSIONS_LOGIN_TIMEOUT``,
    and whatever ``login`` raises to the caller that ran it. A failed login keeps the lease
    until it expires (``SESSIONS_LOGIN_LEASE``): no caller on any node tries the account
    again sooner (a wrong password retried by every waiting request could lock it).
    """
    settings = settings or SessionSettings()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + settings.login_timeout
    delay = POLL_FIRST
    while True:
        token = await lease.acquire(platform, account)
        held = token is not None
        try:
            current = _usable(await session_to_replace(store, platform, account))
            if current is not None:
                return current
            if token is not None:
                try:
                    return await _login_under_lease(
                        store, lease, token, platform, account, login=login, settings=settings
                    )
                except Exception:
                    held = False  # left to expire: the next try waits for it
                    raise
        finally:
            if held and token is not None:
                await lease.release(platform, account, token)
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise ReloginTimeout(
                f"no fresh session for {platform}/{account} after {settings.login_timeout} s"
            )
        await asyncio.sleep(min(delay, remaining))
        delay = min(delay * 2, POLL_MAX)
