"""A step of Redis's clock is told apart from slow round trips, and a node says it."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from redis.asyncio import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from scrapy import signals
from scrapy.utils.test import get_crawler

from crawler import node_context
from crawler.node_context import NodeContext
from crawler.redis_clock import ClockWatch, Step, step_message, watch
from crawler.redis_connection import AsyncRedis, async_client, masters_time_ms


def test_readings_that_move_together_are_no_step() -> None:
    clock = ClockWatch()
    assert clock.reading(100.0, 100.001, 5_000_000) is None  # the first: nothing to compare
    assert clock.reading(110.0, 110.001, 5_010_000) is None
    # Redis answered 4 s late (a stall, an outage): its clock moved as far as the round trip
    assert clock.reading(120.0, 124.0, 5_023_500) is None


def test_a_step_ahead_and_a_step_back_are_told_with_their_size() -> None:
    clock = ClockWatch()
    clock.reading(100.0, 100.001, 5_000_000)
    ahead = clock.reading(110.0, 110.001, 5_013_000)
    assert ahead is not None
    assert (ahead.direction, round(ahead.seconds, 1), round(ahead.over)) == ("ahead", 3.0, 10)
    back = clock.reading(120.0, 120.001, 5_020_000)
    assert back is not None
    assert (back.direction, round(back.seconds, 1)) == ("back", -3.0)
    assert "moved 3.0s back of this node's in 10s" in step_message(back)


def steps_of_a_node_falling_behind(url: str, count: int) -> list[Step]:
    """The steps the watch tells on the real clocks of the Redis at ``url`` (every master's),
    with the node's clock falling 3 s behind after two readings (``count`` of them, or what came
    within 5 s)."""
    steps: list[Step] = []

    async def main() -> None:
        client = async_client(url)
        readings = 0

        def node_clock() -> float:
            nonlocal readings
            readings += 1
            return time.monotonic() - (3.0 if readings > 4 else 0.0)

        task = asyncio.ensure_future(
            watch(lambda: masters_time_ms(client), steps.append, every=0.05, monotonic=node_clock)
        )
        try:
            deadline = time.monotonic() + 5
            while len(steps) < count and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        finally:
            task.cancel()
            await client.aclose()

    asyncio.run(main())
    return steps


def test_the_watch_reads_redis_and_tells_a_step(redis_url: str) -> None:
    steps = steps_of_a_node_falling_behind(redis_url, 1)
    assert [(step.direction, round(step.seconds), step.server) for step in steps] == [
        ("ahead", 3, "")
    ]


def test_a_reading_that_meets_an_outage_is_left_out_and_a_step_across_it_is_told() -> None:
    """Retried through the outage, a reading's bounds widened by the outage and hid a step of
    30 s (a review): each reading is one call, timed alone."""
    steps: list[Step] = []
    # the node's clock before and after each reading that answers, before the one that fails
    node = iter([0.0, 0.001, 10.0, 20.0, 20.001, 30.0, 30.001])
    answers: list[int | Exception] = [
        1_000_000,
        RedisConnectionError("Connection refused"),
        1_050_000,  # 30 s more than the node's 20 s: the step happened during the outage
        1_060_000,
    ]

    async def read_ms() -> dict[str, int]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {"": answer}

    async def main() -> None:
        task = asyncio.ensure_future(
            watch(read_ms, steps.append, every=0, monotonic=lambda: next(node))
        )
        while answers:
            await asyncio.sleep(0)
        task.cancel()

    asyncio.run(asyncio.wait_for(main(), 5))
    assert [(step.direction, round(step.seconds)) for step in steps] == [("ahead", 30)]


def test_a_clock_that_cannot_be_read_ends_the_watch_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def read_ms() -> dict[str, int]:
        raise ResponseError("NOPERM User crawler has no permissions to run the 'time' command")

    with caplog.at_level(logging.WARNING, logger="crawler.redis_clock"):
        asyncio.run(asyncio.wait_for(watch(read_ms, lambda step: None, every=0), 5))  # ends
    assert caplog.text.count("Cannot read Redis's clock (NOPERM") == 1


def test_a_node_warns_of_a_step_and_counts_it(
    redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Its second reading meets an outage: left out, not retried (no ``redis_clock`` outage of
    its own), and the third still tells the step."""
    reads = 0

    async def flaky_time_ms(client: AsyncRedis, timeout: float) -> dict[str, int]:
        nonlocal reads
        reads += 1
        if reads == 2:
            raise RedisConnectionError("Connection refused")
        return await masters_time_ms(client, timeout)

    calls = 0

    def node_clock() -> float:
        nonlocal calls
        calls += 1
        return time.monotonic() + (4.0 if calls > 2 else 0.0)  # Redis's clock looks 4 s back

    fast: Callable[..., object] = functools.partial(watch, every=0.02, monotonic=node_clock)
    monkeypatch.setattr(node_context, "watch", fast)
    monkeypatch.setattr(node_context, "masters_time_ms", flaky_time_ms)
    crawler = get_crawler(settings_dict={"REDIS_URL": redis_url, "REDIS_MAX_CONNECTIONS": 4})
    context = NodeContext(crawler)

    async def main() -> None:
        crawler.signals.send_catch_log(signals.engine_started)
        deadline = time.monotonic() + 5
        while not context.stats.get_value("redis/clock_step/back") and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await crawler.signals.send_catch_log_async(signals.engine_stopped)

    with caplog.at_level(logging.WARNING, logger="crawler.node_context"):
        asyncio.run(main())
    assert context.stats.get_value("redis/clock_step/back") == 1
    assert reads >= 3
    assert context.stats.get_value("redis_clock/redis_error") is None
    assert "Redis's clock moved 4.0s back of this node's" in caplog.text
    assert "(redis/clock_step/back)" in caplog.text


def test_on_a_cluster_the_watch_reads_every_master(redis_cluster_url: str) -> None:
    """Each master of a Redis Cluster keeps its own clock, and each part's leases and each
    site's bookings run on the clock of the master that holds them: the watch read one (redis-py's
    default node), and a step of any other went unsaid. With the node's clock falling 3 s behind,
    each of the three masters tells its step, by its name."""
    steps = steps_of_a_node_falling_behind(redis_cluster_url, 3)
    assert sorted((step.direction, round(step.seconds)) for step in steps) == [("ahead", 3)] * 3
    assert len({step.server for step in steps}) == 3
    assert all(
        f"The clock of Redis master {step.server} moved" in step_message(step) for step in steps
    )


def test_a_master_that_does_not_answer_is_left_out_of_the_reading(
    redis_cluster_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One master refuses the connection, another hangs (a paused machine: no socket timeout
    by default): the third's clock is still read, within the timeout (a hung one held every
    reading: review AT); with none answering, the reading fails."""

    async def main() -> tuple[int, float, int]:
        client = async_client(redis_cluster_url)
        assert isinstance(client, RedisCluster)
        try:
            await client.initialize()
            refusing, hung, _ = (master.name for master in client.get_primaries())
            away = {refusing}
            execute = client.execute_command

            async def some_away(*args: Any, **kwargs: Any) -> Any:
                if kwargs["target_nodes"].name == hung:
                    await asyncio.sleep(60)
                if kwargs["target_nodes"].name in away:
                    raise RedisConnectionError("Connection refused")
                return await execute(*args, **kwargs)

            monkeypatch.setattr(client, "execute_command", some_away)
            started = time.monotonic()
            some = await masters_time_ms(client, timeout=0.5)
            took = time.monotonic() - started
            away.update(master.name for master in client.get_primaries())
            with pytest.raises((RedisConnectionError, TimeoutError)):
                await masters_time_ms(client, timeout=0.5)
            return len(some), took, len(away)
        finally:
            await client.aclose()

    answered, took, away = asyncio.run(main())
    assert (answered, away) == (1, 3)
    assert took < 5
