"""How much work a spider's frontier holds: queued (in Redis or spilled to Kafka) and leased,
over every part, in one round trip (no Scrapy imports)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crawler.frontier.keys import FrontierKeys
from crawler.lua import text
from crawler.redis_connection import AsyncRedis, SyncRedis


def _queued_and_leased(counts: list[Any]) -> tuple[int, int]:
    """(queued, leased) from GET queue count, ZCARD leases, GET backlog per part: requests
    spilled to Kafka count as queued."""
    queued = sum(max(0, int(n or 0)) for n in [*counts[0::3], *counts[2::3]])
    return queued, sum(int(n) for n in counts[1::3])


async def pending_requests(client: AsyncRedis, parts: Sequence[FrontierKeys]) -> int:
    """Requests queued (in Redis or spilled to Kafka) or leased by any node, in every part
    (one round trip)."""
    async with client.pipeline(transaction=False) as pipe:
        for keys in parts:
            pipe.get(keys.queue_count)
            pipe.zcard(keys.leases)
            pipe.get(keys.backlog)
        return sum(_queued_and_leased(await pipe.execute()))


def pending_requests_sync(client: SyncRedis, parts: Sequence[FrontierKeys]) -> tuple[int, int]:
    """Requests queued (in Redis or spilled to Kafka), and leased by any node, in every part
    (operator tools)."""
    with client.pipeline(transaction=False) as pipe:
        for keys in parts:
            pipe.get(keys.queue_count)
            pipe.zcard(keys.leases)
            pipe.get(keys.backlog)
        return _queued_and_leased(pipe.execute())


async def spilled_requests(client: AsyncRedis, parts: Sequence[FrontierKeys]) -> int:
    """Requests spilled to the Kafka backlog (``FRONTIER_QUEUE_MAX``) and not read back, in
    every part."""
    async with client.pipeline(transaction=False) as pipe:
        for keys in parts:
            pipe.get(keys.backlog)
        return sum(max(0, int(n or 0)) for n in await pipe.execute())


async def waiting_by_topic(client: AsyncRedis, parts: Sequence[FrontierKeys]) -> dict[str, int]:
    """Requests waiting in each Kafka backlog topic the crawl spilled to (its offsets written
    less read back, every part: ``lua/backlog_count.lua`` sums the same)."""
    async with client.pipeline(transaction=False) as pipe:
        for keys in parts:
            pipe.hgetall(keys.backlog_written)
            pipe.hgetall(keys.backlog_read)
        offsets = await pipe.execute()
    waiting: dict[str, int] = {}
    for written, read in zip(offsets[0::2], offsets[1::2], strict=True):
        for topic, offset in written.items():
            left = max(0, int(offset) - int(read.get(topic, 0)))
            waiting[text(topic)] = waiting.get(text(topic), 0) + left
    return waiting
