"""Ride out Redis outages: retry with backoff, log once when one starts and ends."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.exceptions import ClusterDownError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Errors that pass: the server is unreachable or restarting, or a Redis Cluster is failing
# over (CLUSTERDOWN, TRYAGAIN while a slot moves). Sentinel's MasterNotFoundError is a
# ConnectionError.
TRANSIENT = (
    RedisConnectionError,
    RedisTimeoutError,
    ClusterDownError,
    TryAgainError,
    ConnectionError,
    TimeoutError,
)


class GaveUp(Exception):
    """The deadline passed while Redis was still unreachable."""


class OutageGuard:
    def __init__(
        self, component: str, on_error: Callable[[], None], max_delay: float = 10.0
    ) -> None:
        self.component = component
        self._on_error = on_error
        self._max_delay = max_delay
        self._down_since: float | None = None

    @property
    def down(self) -> bool:
        return self._down_since is not None

    async def run(self, op: Callable[[], Awaitable[T]], *, deadline: float | None = None) -> T:
        """Run ``op`` until it succeeds; raise ``GaveUp`` past ``deadline`` (monotonic)."""
        delay = 0.0
        while True:
            try:
                result = await op()
            except TRANSIENT as exc:
                self._on_error()
                if self._down_since is None:
                    self._down_since = time.monotonic()
                    logger.warning(
                        "%s: Redis unreachable (%s); pausing and retrying", self.component, exc
                    )
                if deadline is not None and time.monotonic() >= deadline:
                    raise GaveUp(f"{self.component}: Redis still unreachable") from exc
                delay = min(self._max_delay, delay * 2 or 0.1)
                await asyncio.sleep(delay)
                continue
            if self._down_since is not None:
                logger.warning(
                    "%s: Redis is back after %.1fs",
                    self.component,
                    time.monotonic() - self._down_since,
                )
                self._down_since = None
            return result
