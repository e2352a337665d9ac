"""``SessionSupply``: the sessions ``SharedSessionMiddleware`` hands out, and the log-ins that
make them.

A request takes the least recently used usable account (``acquire``), or waits, no longer than
``SESSIONS_WAIT``, for a log-in round of the spider's accounts (``spider.session_accounts``
through ``spider.session_login()``): one round at a time per platform on a node, one node per
account across the cluster (``ensure_fresh_session``'s lease). An account whose log-in fails
(a ``SessionError``, or anything else its provider raises, logged with its traceback, or a
log-in that gives no cookies) is said (ERROR, ``sessions/relogin_failed``) and the round goes
on with the next. A ``CRAWLER_SESSION_KEY`` that cannot read the stored sessions fails the
request (``sessions/key``) and stops the node (``sessions_key``, said once). Every store call
goes through the node's Redis outage guard.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from crawler.middlewares.refused import (
    STOP_LOOK,
    RefusedRequest,
    not_fetched_at_stop,
    not_waiting_past_stop,
)
from crawler.redis_outage import OutageGuard
from crawler.sessions import (
    Health,
    LoginLease,
    Session,
    SessionDecodeError,
    SessionError,
    SessionKeyError,
    SessionSettings,
    SessionStore,
    ensure_fresh_session,
)
from crawler.sessions.models import UnreadableSession
from crawler.sessions.store import session_to_replace
from crawler.wakeup import close_spider_soon

logger = logging.getLogger(__name__)

T = TypeVar("T")

UNAVAILABLE = "sessions/unavailable"  # the stat and failure reason of a request with no session
KEY_REFUSED = "sessions/key"  # the stat and failure reason of a request the key cannot serve
KEY_FINISH_REASON = "sessions_key"  # the node stops: CRAWLER_SESSION_KEY cannot read them


class SessionSupply:
    def __init__(
        self,
        crawler: Crawler,
        store: SessionStore,
        lease: LoginLease,
        store_settings: SessionSettings,
        *,
        guard: OutageGuard | None,
        wait: float,
    ) -> None:
        self.crawler = crawler
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.store = store
        self.lease = lease
        self.store_settings = store_settings
        self.guard = guard
        self.wait = wait
        self._logins: dict[str, asyncio.Future[None]] = {}  # platform -> its log-in round
        self._cannot_log_in: set[str] = set()  # platforms said to have no log-in (once each)
        self._stopping: asyncio.Future[None] | None = None  # the close a wrong key started

    async def shared(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run a session-store operation, through Redis outages in cluster mode."""
        if self.guard is None:
            return await op()
        with not_fetched_at_stop("sessions/stopped", "the shared sessions"):
            return await self.guard.run(op)

    async def pinned(self, platform: str, account: str) -> Session | None:
        try:
            return await self.shared(lambda: self.store.get(platform, account))
        except SessionKeyError as exc:
            self._key_refused(exc)
        except SessionDecodeError as exc:
            self._unreadable(exc)
            return None

    def _key_refused(self, exc: SessionKeyError) -> NoReturn:
        """``CRAWLER_SESSION_KEY`` cannot read the stored sessions: no request of the node gets
        one. The request fails (``sessions/key``) and the node stops (``sessions_key``)."""
        self.stats.inc_value(KEY_REFUSED)
        if self._stopping is None:
            self._stopping = close_spider_soon(self.crawler, KEY_FINISH_REASON)
            if self._stopping is not None:
                logger.error(
                    "%s: the node stops (finish reason %s); give every node the key the "
                    "sessions were stored with, or import them again (`crawler sessions import`)",
                    exc,
                    KEY_FINISH_REASON,
                )
        raise RefusedRequest(KEY_REFUSED, str(exc))

    def _unreadable(self, exc: SessionDecodeError) -> None:
        self.stats.inc_value("sessions/unreadable")
        logger.error("Stored session cannot be read: %s", exc)

    async def usable(self, spider: Spider, platform: str) -> Session | None:
        deadline = time.monotonic() + self.wait
        pause = 0.05
        while True:
            try:
                session: Session | None = await self.shared(lambda: self.store.acquire(platform))
            except UnreadableSession as exc:  # retired: the next account is drawn at once
                self._unreadable(exc)
                continue
            except SessionKeyError as exc:
                self._key_refused(exc)
            if session is not None:
                return session
            login = self._logins.get(platform)
            if login is None or login.done():  # one log-in round at a time, shared
                login = self._logins[platform] = asyncio.ensure_future(
                    self._log_in_again(spider, platform)
                )
                login.add_done_callback(_retrieved)
            # for the log-in no longer than the request may wait, nor past a stop
            while not login.done() and (left := deadline - time.monotonic()) > 0:
                not_waiting_past_stop(self.crawler, "sessions/stopped", left, "a session")
                await asyncio.wait({login}, timeout=min(left, STOP_LOOK))
            if time.monotonic() >= deadline:
                return None
            left = deadline - time.monotonic()
            not_waiting_past_stop(self.crawler, "sessions/stopped", left, "a session")
            await asyncio.sleep(pause)
            pause = min(1.0, pause * 2)

    def cancel_logins(self) -> None:
        """At close: a log-in under way ends (its lease in Redis expires)."""
        for login in self._logins.values():
            login.cancel()

    async def _log_in_again(self, spider: Spider, platform: str) -> None:
        """Log in the spider's accounts that need it (one node per account does it)."""
        login = getattr(spider, "session_login", None)
        provider = login() if callable(login) else None
        if provider is None:
            if platform not in self._cannot_log_in:
                self._cannot_log_in.add(platform)
                logger.warning(
                    "No %s session is usable and the spider cannot log in (its session_login "
                    "gives none: no accounts configured): requests wait SESSIONS_WAIT=%s s for "
                    "one to come back from rest, then are dropped (%s). Import a session: "
                    "`crawler sessions import %s <account> ...`",
                    platform,
                    self.wait,
                    UNAVAILABLE,
                    platform,
                )
            return
        for account in getattr(spider, "session_accounts", ()):
            await self._log_in_account(platform, str(account), provider)

    async def _log_in_account(self, platform: str, account: str, provider: Any) -> None:
        session = await self.shared(lambda: session_to_replace(self.store, platform, account))
        if session is not None and session.health is not Health.EXPIRED:
            return
        try:
            await self.shared(
                lambda: ensure_fresh_session(
                    self.store,
                    self.lease,
                    platform,
                    account,
                    provider,
                    settings=self.store_settings,
                )
            )
        except SessionError as exc:
            self.stats.inc_value("sessions/relogin_failed")
            logger.error("Log-in of %s account %s failed: %s", platform, account, exc)
        except Exception as exc:  # the spider's provider failed its own way: the next goes on
            self.stats.inc_value("sessions/relogin_failed")
            logger.error(
                "Log-in of %s account %s failed: %s: %s (raised by the spider's session_login "
                "provider; raise crawler.sessions.LoginFailed for a log-in the site refused)",
                platform,
                account,
                type(exc).__name__,
                exc,
                exc_info=exc,
            )


def _retrieved(login: asyncio.Future[None]) -> None:
    """A log-in round's failure that no account's log-in caught (its spider's
    ``session_login`` raised, its Redis failed): said here; a stop's cancellation is none."""
    if not login.cancelled() and (exc := login.exception()) is not None:
        logger.error("A log-in round failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
