"""The one Redis outage policy: which errors mean "not now", and riding them out.

An outage is anything that says the server cannot serve us *now* and will again: it is
unreachable or timed out, restarting (``-LOADING``), full (``-OOM`` at ``maxmemory``),
read-only (``-READONLY``, a replica or a failover), busy with a script (``-BUSY``), unable
to persist (``-MISCONF``), or a Redis Cluster failing over (``-CLUSTERDOWN``,
``-TRYAGAIN``, ``-MASTERDOWN``; Sentinel's ``MasterNotFoundError`` is a connection
error). Every component pauses, backs off, logs once with the reason and resumes. Any
other error reply (``WRONGTYPE``, a script bug) is a fault of ours and is raised.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    MasterDownError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    RedisClusterUnreachableError,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Error replies redis-py leaves as a plain ResponseError, by their code (first word).
_OUTAGE_CODES: Final = {
    "OOM": "oom",
    "LOADING": "loading",
    "READONLY": "readonly",
    "BUSY": "busy",
    "MISCONF": "misconf",
    "CLUSTERDOWN": "clusterdown",
    "TRYAGAIN": "tryagain",
    "MASTERDOWN": "masterdown",
    "NOREPLICAS": "noreplicas",
}

# Outages in which the server still answers reads (at ``maxmemory``, a replica, unable to
# persist, short of replicas): an operation that wrote nothing does not end one.
WRITES_REFUSED: Final = frozenset({"oom", "readonly", "misconf", "noreplicas"})

# What a Redis command may raise: redis-py's cluster client has exceptions of its own, which are
# no RedisError (RedisClusterUnreachableError, SlotNotCoveredError...)
REDIS_FAILURES: Final = (RedisError, RedisClusterException)

# Classes redis-py maps a reply to (it strips the code from the message), most specific first.
_OUTAGE_CLASSES: Final[tuple[tuple[type[BaseException], str], ...]] = (
    (BusyLoadingError, "loading"),  # a ConnectionError subclass
    # a Redis Cluster whose nodes none answered (redis-py's own class, no ConnectionError)
    (RedisClusterUnreachableError, "connection"),
    # a slot no master serves, for a moment during a failover (a RedisClusterException)
    (SlotNotCoveredError, "clusterdown"),
    (RedisTimeoutError, "timeout"),
    (RedisConnectionError, "connection"),
    (OutOfMemoryError, "oom"),
    (MasterDownError, "masterdown"),  # a ClusterDownError subclass
    (ReadOnlyError, "readonly"),
    (ClusterDownError, "clusterdown"),
    (TryAgainError, "tryagain"),
    # redis-py's cluster client out of its own retries of ASK and TRYAGAIN ("TTL exhausted."):
    # a slot that keeps moving, as while it migrates key by key
    (ClusterError, "tryagain"),
    (TimeoutError, "timeout"),
    (ConnectionError, "connection"),
)


def outage_reason(exc: BaseException) -> str | None:
    """The outage ``exc`` reports (``"oom"``, ``"connection"``, ...), or None if it is not one."""
    for cls, reason in _OUTAGE_CLASSES:
        if isinstance(exc, cls):
            return reason
    if isinstance(exc, ResponseError):
        code = str(exc).split(" ", 1)[0]
        return _OUTAGE_CODES.get(code)
    return None


class GaveUp(Exception):
    """The deadline passed while Redis was still in an outage."""


class OutageGuard:
    """Runs a component's Redis operations through outages; ``on_error(reason)`` per failure."""

    def __init__(
        self,
        component: str,
        on_error: Callable[[str], None],
        max_delay: float = 10.0,
        stop_deadline: Callable[[], float | None] | None = None,
    ) -> None:
        """``stop_deadline``: the deadline (monotonic) every retry ends by once the node is
        stopping, None while it is not (``NodeContext.stop_deadline``)."""
        self.component = component
        self._on_error = on_error
        self._max_delay = max_delay
        self._stop_deadline = stop_deadline
        self._down_since: float | None = None
        self._back_at = 0.0  # when the last outage ended (monotonic)
        self._reason: str | None = None  # the last failure's outage reason
        self._writes = 0  # operations that may write on their way or retried now (``run``)

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def failed(self, exc: BaseException, began: float | None = None) -> str | None:
        """Note a failed operation (``began``: when it was sent, monotonic; a call that timed
        out began the outage, not its timeout); its outage reason, or None if ``exc`` is not
        an outage."""
        reason = outage_reason(exc)
        if reason is None:
            return None
        self._on_error(reason)
        self._reason = reason
        if self._down_since is None:
            # an operation sent before the last outage ended begins this one when that ended
            # (the "is back after" of a concurrent call's failure counted the last one again)
            self._down_since = max(time.monotonic() if began is None else began, self._back_at)
            logger.warning(
                "%s: Redis unavailable (%s); pausing and retrying: %s", self.component, reason, exc
            )
        return reason

    def succeeded(self, *, reads_only: bool = False) -> None:
        """Note an operation that succeeded; ``reads_only``: it wrote nothing, so it ends no
        outage in which Redis answers reads and refuses writes (``WRITES_REFUSED``) while a
        write is retried or on its way (it ends it); with none left (given up, cancelled), it
        does."""
        if self._down_since is None:
            return
        if reads_only and self._reason in WRITES_REFUSED and self._writes:
            return
        self._back_at = time.monotonic()
        logger.warning(
            "%s: Redis is back after %.1fs", self.component, self._back_at - self._down_since
        )
        self._down_since = None

    async def run(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        deadline: float | None = None,
        reads_only: bool = False,
    ) -> T:
        """Run ``op`` until it succeeds; raise ``GaveUp`` past ``deadline`` (monotonic) or,
        once the node is stopping, past its stop deadline. ``reads_only``: ``op`` writes
        nothing (``succeeded``)."""
        if reads_only:
            return await self._run(op, deadline, reads_only=True)
        self._writes += 1
        try:
            return await self._run(op, deadline, reads_only=False)
        finally:
            self._writes -= 1

    async def _run(
        self, op: Callable[[], Awaitable[T]], deadline: float | None, *, reads_only: bool
    ) -> T:
        delay = 0.0
        while True:
            began = time.monotonic()
            try:
                result = await op()
            except Exception as exc:
                if self.failed(exc, began) is None:
                    raise
                stop = self._stop_deadline() if self._stop_deadline is not None else None
                limits = [limit for limit in (deadline, stop) if limit is not None]
                left = min(limits) - time.monotonic() if limits else None
                if left is not None and left <= 0:
                    raise GaveUp(f"{self.component}: Redis still unavailable") from exc
                delay = min(self._max_delay, delay * 2 or 0.1)
                await asyncio.sleep(delay if left is None else min(delay, left))
                continue
            self.succeeded(reads_only=reads_only)
            return result
