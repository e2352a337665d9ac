"""The node context: one guard per component that counts outages, supervised loops."""

from __future__ import annotations

import asyncio
import logging

import pytest
from redis.exceptions import OutOfMemoryError
from scrapy.utils.test import get_crawler

from crawler import node_context
from crawler.node_context import NodeContext


def _context(redis_url: str) -> NodeContext:
    crawler = get_crawler(settings_dict={"REDIS_URL": redis_url, "REDIS_MAX_CONNECTIONS": 4})
    return NodeContext(crawler)


def test_a_crashing_loop_is_logged_counted_and_restarted(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(node_context, "LOOP_RESTART_DELAY", 0.01)
    context = _context(redis_url)
    runs: list[int] = []

    async def loop() -> None:
        runs.append(len(runs))
        if len(runs) < 3:
            raise KeyError("a bug in the loop")

    async def main() -> None:
        await context.supervise("beat", loop)
        await context.redis.aclose()

    with caplog.at_level(logging.ERROR, logger="crawler.node_context"):
        asyncio.run(main())
    assert runs == [0, 1, 2]  # crashed twice, then returned
    assert context.stats.get_value("node/loop_crashed/beat") == 2
    assert caplog.text.count("Background loop 'beat' crashed") == 2
    assert "KeyError: 'a bug in the loop'" in caplog.text  # with its traceback


def test_one_guard_per_component_counts_each_outage_reason(redis_url: str) -> None:
    context = _context(redis_url)
    guard = context.guard("politeness")
    assert context.guard("politeness") is guard
    assert guard.failed(OutOfMemoryError("command not allowed")) == "oom"
    assert guard.failed(KeyError("not an outage")) is None
    assert context.stats.get_value("politeness/redis_error") == 1
    assert context.stats.get_value("redis/outage/oom") == 1


def test_redis_max_connections_is_validated(redis_url: str) -> None:
    crawler = get_crawler(settings_dict={"REDIS_URL": redis_url, "REDIS_MAX_CONNECTIONS": 0})
    with pytest.raises(ValueError, match="REDIS_MAX_CONNECTIONS=0 must be >= 1"):
        NodeContext(crawler)
