"""Async access to a spider's seed list in Redis (no Scrapy imports).

Seeds are pushed by users with ``LPUSH <spider>:start_urls``; nodes pop from
the right, so seeds are taken in the order they were pushed. A pop blocks on
the Redis connection (``BLMPOP``), never on the reactor, so an idle node sees
a new seed as soon as it is pushed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson

from crawler.frontier.client import pending_requests
from crawler.frontier.keys import FrontierKeys
from crawler.redis_connection import AsyncRedis


@dataclass(frozen=True, slots=True)
class SeedKeys:
    seeds: str
    invalid: str
    frontier: FrontierKeys


class SeedQueue:
    def __init__(self, client: AsyncRedis, keys: SeedKeys) -> None:
        self._client = client
        self.keys = keys

    async def pop(self, count: int, timeout: float) -> list[bytes]:
        """Pop up to ``count`` seeds, waiting up to ``timeout`` seconds for the first."""
        result = await self._client.blmpop(
            timeout, 1, self.keys.seeds, direction="RIGHT", count=count
        )
        if not result:
            return []
        _key, values = result
        return [value if isinstance(value, bytes) else str(value).encode() for value in values]

    async def reject(self, raw: bytes, reason: str, error: str, node_id: str) -> None:
        """Record a seed that cannot be crawled in the invalid-seed list."""
        record = {
            "seed": raw.decode("utf-8", "replace")[:4096],
            "reason": reason,
            "error": error,
            "node": node_id,
            "at": time.time(),
        }
        await self._client.lpush(self.keys.invalid, orjson.dumps(record))

    async def pending_requests(self) -> int:
        """Requests queued or leased by any node in the shared frontier."""
        return await pending_requests(self._client, self.keys.frontier)

    async def close(self) -> None:
        await self._client.aclose()
