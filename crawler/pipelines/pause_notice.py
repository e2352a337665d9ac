"""Telling operators that a node's crawl is paused, and why (``crawler status``).

While the Kafka pipeline keeps the engine paused (``KAFKA_MAX_OUTAGE`` passed, or the spool
cannot be written while Kafka is away), or Kafka does not answer and the node spools its items
meanwhile (reason ``kafka_unreachable``), the node sets ``{<spider>}:paused:<node>`` to
``{"reason": ..., "since": <epoch seconds Kafka stopped answering>}`` every
``FRONTIER_HEARTBEAT_INTERVAL``, expiring after three intervals (a node killed while paused
does not stay paused), and deletes it when the crawl resumes. Standalone (no ``REDIS_URL``)
nobody is told.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NotRequired, TypedDict

import orjson
from scrapy.crawler import Crawler

from crawler.lua import text
from crawler.node_context import NodeContext
from crawler.redis_connection import SyncRedis
from crawler.settings_values import get_float

KAFKA_AWAY = "kafka_unreachable"  # a notice's reason while Kafka is away and the crawl goes on


class PauseInfo(TypedDict):
    # max_outage | spool_error (kafka/crawl_paused/<reason>): paused; KAFKA_AWAY: spooling
    reason: str
    since: float  # epoch seconds: when Kafka stopped answering
    # Kafka answered, it has no topic for some items (the outage began so); absent before
    missing_topic: NotRequired[bool]


def pause_key(spider: str, node: str) -> str:
    return f"{{{spider}}}:paused:{node}"


def read_pauses(client: SyncRedis, spider: str, nodes: list[str]) -> dict[str, PauseInfo]:
    """The pause notices of ``nodes`` that have one."""
    if not nodes:
        return {}
    values = client.mget([pause_key(spider, node) for node in nodes])
    pauses = {}
    for node, value in zip(nodes, values, strict=True):
        if value is not None:
            notice = orjson.loads(text(value))
            pauses[node] = PauseInfo(
                reason=str(notice["reason"]),
                since=float(notice["since"]),
                missing_topic=bool(notice.get("missing_topic", False)),
            )
    return pauses


class PauseNotice:
    def __init__(self, crawler: Crawler, state: Callable[[], PauseInfo | None]) -> None:
        self._context = NodeContext.of(crawler)
        self._interval = get_float(crawler.settings, "FRONTIER_HEARTBEAT_INTERVAL")
        self._state = state
        self._key = ""
        self._published = False

    def start(self, spider: str) -> None:
        """Publish from now on (the node context ends the loop when the engine stops)."""
        if self._context is not None:
            self._key = pause_key(spider, self._context.node_id)
            self._context.supervise("pause_notice", self._publish_loop)

    async def _publish_loop(self) -> None:
        assert self._context is not None
        guard = self._context.guard("pause_notice")
        while True:
            await guard.run(self._publish)
            await asyncio.sleep(self._interval)

    async def _publish(self) -> None:
        assert self._context is not None
        state = self._state()
        if state is not None:
            ttl = int(self._interval * 3000)
            await self._context.redis.set(self._key, orjson.dumps(state), px=ttl)
            self._published = True
        elif self._published:
            await self._context.redis.delete(self._key)
            self._published = False
