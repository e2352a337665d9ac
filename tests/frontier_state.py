"""Reading and writing a frontier part's queue and leases by hand in tests (docs/redis-keys.md)."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

from crawler.frontier.keys import FrontierKeys
from crawler.lua import text
from crawler.redis_connection import SyncRedis


def fingerprint_of(name: str) -> str:
    """A hex fingerprint for a test request named ``name`` (as long as Scrapy's)."""
    return hashlib.sha1(name.encode()).hexdigest()


def queued(client: SyncRedis, keys: FrontierKeys) -> int:
    """Requests queued in the part (its count)."""
    return int(client.get(keys.queue_count) or 0)


def queue_entries(client: SyncRedis, keys: FrontierKeys) -> list[tuple[int, bytes]]:
    """(priority, request JSON) of every queued request, in lease order."""
    entries: list[tuple[int, bytes]] = []
    levels: list[Any] = client.zrange(keys.queue_levels, 0, -1, withscores=True)
    for level, score in levels:
        for body in client.lrange(keys.queue_list(text(level)), 0, -1):
            entries.append((-int(score), body.encode() if isinstance(body, str) else body))
    return entries


def put_queued(
    client: SyncRedis, keys: FrontierKeys, priority: int, bodies: Sequence[bytes]
) -> None:
    """Queue ``bodies`` at the tail of the level of ``priority``, as ``turn.lua`` does."""
    level = str(-priority)
    client.rpush(keys.queue_list(level), *bodies)
    client.zadd(keys.queue_levels, {level: -priority})
    client.incrby(keys.queue_count, len(bodies))


def put_lease(
    client: SyncRedis,
    keys: FrontierKeys,
    lease_id: str,
    node: str,
    *,
    priority: int = 0,
    body: bytes = b'{"url": "http://example.com/"}',
    deadline_ms: float = 0,
) -> None:
    """A lease of ``node`` as ``turn.lua`` records it (deadline 0: long expired)."""
    client.zadd(keys.leases, {lease_id: deadline_ms})
    client.hset(keys.inflight, lease_id, f"{node}\t{-priority}\t".encode() + body)


def leases_ended(totals: dict[str, int]) -> int:
    """The leases a crawl ledger's ``totals`` says ended (done, failed, requeued, reclaimed,
    released): once the crawl is over, the ledger's ``leased``."""
    return sum(
        totals.get(name, 0) for name in ("done", "failed", "requeued", "reclaimed", "released")
    )


class Counts:
    """A stats collector's ``inc_value``, counted."""

    def __init__(self) -> None:
        self.counter: Counter[str] = Counter()

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.counter[key] += count


class Quiet:
    """A node that holds nothing."""

    def held_leases(self) -> list[str]:
        return []

    def fingerprint(self, body: bytes) -> str:
        return ""

    async def on_beat(self) -> None:
        pass

    def after_beat(self) -> None:
        pass

    def work_arrived(self) -> None:
        pass
