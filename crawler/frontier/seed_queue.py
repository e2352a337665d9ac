"""Async access to a spider's seed key in Redis (no Scrapy imports).

Seeds are pushed by users with ``LPUSH <spider>:start_urls``; nodes pop from
the right, so seeds are taken in the order they were pushed. A pop blocks on
the Redis connection (``BLMPOP``), never on the reactor, so an idle node sees
a new seed as soon as it is pushed. With ``SEEDS_TYPE`` ``zset`` (scrapy-redis's
``REDIS_START_URLS_AS_ZSET``) the highest scores leave first (``BZMPOP MAX``);
with ``set`` (``REDIS_START_URLS_AS_SET``) any member (``SPOP``, which does not
block: an empty set is asked again after the wait). Every pop is one atomic
command. A key of another type raises ``WrongSeedKeyType`` naming it.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import orjson
from redis.exceptions import ResponseError

from crawler.frontier.client import pending_requests
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.seed_settings import SeedSource
from crawler.redis_connection import AsyncRedis


@dataclass(frozen=True, slots=True)
class SeedKeys:
    seeds: str
    invalid: str
    frontier: FrontierKeys


class WrongSeedKeyType(Exception):
    """The seed key holds another Redis type than the spider reads."""

    def __init__(self, key: str, found: str, source: SeedSource) -> None:
        hint = {"set": "REDIS_START_URLS_AS_SET=True", "zset": "REDIS_START_URLS_AS_ZSET=True"}
        fix = hint.get(found, "SEEDS_TYPE=list (the default)" if found == "list" else "")
        remedy = f"set {fix} or push to another key" if fix else "delete it or choose another key"
        super().__init__(
            f"seed key {key!r} is a Redis {found}, but this spider reads a {source.value} "
            f"(SEEDS_TYPE): {remedy}"
        )
        self.key = key
        self.found = found


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class SeedQueue:
    def __init__(
        self, client: AsyncRedis, keys: SeedKeys, source: SeedSource = SeedSource.LIST
    ) -> None:
        self._client = client
        self.keys = keys
        self.source = source

    async def pop(self, count: int, timeout: float) -> list[bytes]:
        """Pop up to ``count`` seeds, waiting up to ``timeout`` seconds for the first."""
        try:
            values = await self._pop(count, timeout)
        except ResponseError as exc:
            if not str(exc).startswith("WRONGTYPE"):
                raise
            found = _text(await self._client.type(self.keys.seeds))
            raise WrongSeedKeyType(self.keys.seeds, found, self.source) from exc
        return [value if isinstance(value, bytes) else str(value).encode() for value in values]

    async def _pop(self, count: int, timeout: float) -> list[Any]:
        key = self.keys.seeds
        if self.source is SeedSource.LIST:
            result = await self._client.blmpop(timeout, 1, key, direction="RIGHT", count=count)
            return list(result[1]) if result else []
        if self.source is SeedSource.ZSET:
            popped: Any = await self._client.bzmpop(timeout, 1, [key], max=True, count=count)
            return [pair[0] for pair in popped[1]] if popped else []
        members = await self._client.spop(key, count)
        if not members:
            await asyncio.sleep(timeout)
            return []
        return list(members)

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
