"""The ``__zse_ck`` challenge, solved once for the cluster (no Scrapy imports).

Zhihu may answer an API call with an HTML page whose script sets the ``__zse_ck`` cookie and
reloads (:data:`crawler.zhihu.errors.CHALLENGE_MARK`). The cookie belongs to the session (it
is computed over its ``d_c0``), so each account of the shared session store needs one solve:
whichever node first takes the account's challenge lease (``{<platform>}:zse_ck_lease:<account>``,
the login lease's ``SET NX PX`` and compare-and-delete on another key) runs the solver with
the shared session and merges the cookie it returns into that session; from then on every node
sends it. A node whose challenged request carried another ``__zse_ck`` than the session holds
now finds the challenge already solved; a node that finds the lease taken waits (asyncio
sleeps: the event loop keeps running) for the holder's cookie and never starts a solver of its
own. Either way the caller retries the request afterwards.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from enum import StrEnum
from typing import Protocol

from crawler.redis_connection import AsyncRedis
from crawler.redis_outage import REDIS_FAILURES
from crawler.sessions import (
    Cookie,
    LoginLease,
    RedisLoginLease,
    Session,
    SessionError,
    SessionSettings,
    SessionStore,
)
from crawler.sessions.keys import check_names

ZSE_CK = "__zse_ck"
LEASE_MARGIN = 15.0  # seconds the lease outlives the solve timeout (browser launch and close)
POLL_FIRST = 0.05  # seconds before a waiting node looks again; doubles up to POLL_MAX
POLL_MAX = 1.0


class Outcome(StrEnum):
    SOLVED = "solved"  # this caller ran the solver; the session holds its cookie
    SHARED = "shared"  # another solve (another node's, or an earlier one) already did


class ChallengeFailed(Exception):
    """No ``__zse_ck`` this time; ``reason`` is one word for stats (the message never carries
    cookie values)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ChallengeSolver(Protocol):
    async def solve(self, url: str, session: Session) -> Cookie:
        """Open the challenged ``url`` with ``session``'s cookies; the ``__zse_ck`` cookie the
        page set. Raises :class:`ChallengeFailed`."""


class ChallengeLease(RedisLoginLease):
    """``{<platform>}:zse_ck_lease:<account>`` = owner token, for ``ttl`` seconds."""

    def __init__(self, client: AsyncRedis, ttl: float) -> None:
        super().__init__(client, SessionSettings(login_lease=ttl))

    def key(self, platform: str, account: str) -> str:
        check_names(platform, account)
        return f"{{{platform}}}:zse_ck_lease:{account}"


def lease_seconds(timeout: float) -> float:
    """How long the lease lives, and the longest a node waits for another node's solve."""
    return timeout + LEASE_MARGIN


def zse_ck_of(cookies: Iterable[Cookie]) -> str | None:
    """The ``__zse_ck`` value a request with these cookies sends (the last one wins)."""
    value = None
    for cookie in cookies:
        if cookie.name == ZSE_CK:
            value = cookie.value
    return value


class ChallengeResolver:
    def __init__(
        self, store: SessionStore, lease: LoginLease, solver: ChallengeSolver, wait: float
    ) -> None:
        self.store = store
        self.lease = lease
        self.solver = solver
        self.wait = wait  # seconds a node waits for another node's solve

    async def resolve(self, platform: str, account: str, url: str, sent: str | None) -> Outcome:
        """Make sure ``account``'s session holds a ``__zse_ck`` newer than ``sent`` (what the
        challenged request to ``url`` carried). Raises :class:`ChallengeFailed`."""
        try:
            return await self._resolve(platform, account, url, sent)
        except (*REDIS_FAILURES, SessionError) as exc:
            raise ChallengeFailed("store", f"{type(exc).__name__}: {exc}") from None

    async def _resolve(self, platform: str, account: str, url: str, sent: str | None) -> Outcome:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait
        delay = POLL_FIRST
        waited = False
        while True:
            token = await self.lease.acquire(platform, account)
            try:  # read the session after taking the lease: a solve may just have ended
                session = await self.store.get(platform, account)
                if session is None:
                    raise ChallengeFailed("no_session", f"no {platform} session for {account}")
                if zse_ck_of(session.cookies) != sent:
                    return Outcome.SHARED
                if token is not None:
                    if waited:
                        raise ChallengeFailed(
                            "other_node", f"the node solving {platform}/{account} got no {ZSE_CK}"
                        )
                    cookie = await self.solver.solve(url, session)
                    if await self.store.merge_cookies(platform, account, [cookie]) is None:
                        raise ChallengeFailed("no_session", f"{platform}/{account} disappeared")
                    return Outcome.SOLVED
            finally:
                if token is not None:
                    await self.lease.release(platform, account, token)
            waited = True
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ChallengeFailed(
                    "wait_timeout",
                    f"no {ZSE_CK} from the node solving {platform}/{account} in {self.wait:g} s",
                )
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, POLL_MAX)
