"""Bounded Redis memory (``FRONTIER_QUEUE_MAX``): requests beyond the bound spill to a Kafka
backlog topic and come back as the queue drains, each exactly once, with a broker of this
module's own that a test pauses mid-spill; then nodes crawl a site through the backlog."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from confluent_kafka import KafkaError, KafkaException, Producer
from redis.exceptions import ConnectionError as RedisConnectionError

from crawler.demo.nodes import REPO_ROOT
from crawler.demo.site import Site
from crawler.devservices import KafkaBroker
from crawler.frontier import backlog as backlog_module
from crawler.frontier import codec
from crawler.frontier.backlog import Backlog
from crawler.frontier.backlog_outcomes import Step
from crawler.frontier.backlog_settings import BacklogSettings
from crawler.frontier.backlog_spill import REPORT_SLACK
from crawler.frontier.client import Finish, FrontierClient, NewRequest
from crawler.frontier.keys import FrontierKeys, frontier_parts, glob_escape
from crawler.frontier.partitions import part_of
from crawler.frontier.pending import pending_requests
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import DeliveryReport
from crawler.kafka.reader import end_offsets, read_topic
from crawler.lua import text
from crawler.redis_connection import AsyncRedis, async_client, server_time_ms
from tests.cli_process import crawler_process
from tests.cluster import logs, running_nodes, tracebacks, wait_for_exit
from tests.frontier_state import fingerprint_of, queued
from tests.one_node import crawl

SPIDER = "spill"
MAX = 40


@pytest.fixture
def kafka(module_kafka: KafkaBroker) -> KafkaBroker:
    return module_kafka


def settings(
    broker: KafkaBroker, topic: str, ack_timeout: float = 10.0, queue_max: int = MAX
) -> BacklogSettings:
    return BacklogSettings(
        queue_max=queue_max,
        batch=1000,
        interval=0.1,
        topic=topic,
        bootstrap=broker.bootstrap_servers,
        replication=1,
        ack_timeout=ack_timeout,
    )


def request(n: int, site: str = "site") -> NewRequest:
    """Stored compressed (FRONTIER_COMPRESS's default) or as JSON (before it, or with it off)."""
    url = f"http://{site}{n % 7}.test/p/{n}"
    body = codec.dumps({"url": url}, compress=n % 2 == 0)
    return NewRequest(fingerprint_of(url), float(n), body, site=f"{site}{n % 7}.test")


@contextlib.asynccontextmanager
async def spilling(
    redis_url: str,
    kafka: KafkaBroker,
    parts: Sequence[FrontierKeys],
    topic: str,
    *,
    ack_timeout: float = 10.0,
    queue_max: int = MAX,
    lease_ms: int = 60_000,
    node_id: str = "n1",
) -> AsyncIterator[tuple[AsyncRedis, list[FrontierClient], Backlog]]:
    """A node over ``parts``, spilling to ``topic``: its Redis client, a frontier client a
    part and its backlog (not opened: a test may set things up first). Closed at the end, the
    broker resumed first (a test may have paused it)."""
    client = async_client(redis_url, max_connections=8)
    nodes = [FrontierClient(client, keys, node_id) for keys in parts]
    backlog = Backlog(nodes, settings(kafka, topic, ack_timeout, queue_max), lease_ms=lease_ms)
    try:
        yield client, nodes, backlog
    finally:
        kafka.resume()
        await backlog.close()
        await client.aclose()


async def open_with_100_queued(node: FrontierClient, backlog: Backlog) -> None:
    """The part's epoch opened (as every node does before it spills), the backlog opened, and
    100 requests queued: 60 beyond the bound."""
    await node.open_epoch()
    await backlog.open()
    await node.complete(None, "done", [request(n) for n in range(100)])


async def spill_waiting_for_the_broker(
    kafka: KafkaBroker, backlog: Backlog, redis_client: redis.Redis, keys: FrontierKeys
) -> asyncio.Future[Step]:
    """The broker paused and a step started: the step, once its spill holds its leases."""
    kafka.pause()
    step = asyncio.ensure_future(backlog.step())
    while not redis_client.zcard(keys.leases):
        await asyncio.sleep(0.01)
    return step


async def crawl_queued(nodes: Sequence[FrontierClient]) -> list[str]:
    """Lease what each node can (25 at most) and finish every lease as done: their URLs."""
    urls: list[str] = []
    for node in nodes:
        for lease in await node.lease(25, 60_000):
            urls.append(codec.loads(lease.body)["url"])
            await node.complete_many([Finish(lease.id, "done")], [])
    return urls


async def crawl_through(
    client: AsyncRedis, nodes: Sequence[FrontierClient], backlog: Backlog, count: int
) -> tuple[list[str], Step]:
    """Lease everything, stepping the backlog as a node does, until ``count`` requests were
    crawled and none is left (60 s at most: the group's first assignment takes seconds): the
    URLs crawled, and the steps' ``spilled`` and ``refill_requeued`` summed."""
    crawled: list[str] = []
    spilled = requeued = 0
    parts = [node.keys for node in nodes]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        crawled += await crawl_queued(nodes)
        step = await backlog.step()
        spilled, requeued = spilled + step.spilled, requeued + step.refill_requeued
        if len(crawled) >= count and not await pending_requests(client, parts):
            break
        await asyncio.sleep(0.05)
    return crawled, Step(spilled, 0, 0, refill_requeued=requeued)


@pytest.mark.parametrize(("bound", "count"), [(MAX, 300), (1, 12)])
def test_requests_beyond_the_bound_wait_in_kafka_and_each_comes_back_once(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, bound: int, count: int
) -> None:
    """Also with the smallest bound: a part refills once it is empty."""
    parts = frontier_parts(SPIDER, 2)
    topic = f"backlog-once-{bound}"
    sizes = Counter(part_of(request(n).site, 2) for n in range(count))
    spilled = sum(max(0, size - bound) for size in sizes.values())
    assert spilled > 0

    async def scenario() -> list[str]:
        async with spilling(redis_url, kafka, parts, topic, queue_max=bound) as (
            client,
            nodes,
            backlog,
        ):
            await backlog.open()
            by_part: dict[int, list[NewRequest]] = {0: [], 1: []}
            for n in range(count):
                by_part[part_of(request(n).site, 2)].append(request(n))
            for part, found in by_part.items():
                await nodes[part].complete(None, "done", found)
            first = await backlog.step()
            assert first.spilled == spilled and first.refused == 0
            for keys, found in zip(parts, by_part.values(), strict=True):
                assert queued(redis_client, keys) == min(bound, len(found))  # the bound holds
            assert await pending_requests(client, parts) == count  # spilled ones count as queued
            crawled, _ = await crawl_through(client, nodes, backlog, count)
            return crawled

    crawled = asyncio.run(scenario())
    counts = Counter(crawled)
    assert set(counts) == {codec.loads(request(n).body)["url"] for n in range(count)}
    assert max(counts.values()) == 1  # every request exactly once
    for keys in parts:
        assert int(redis_client.get(keys.backlog) or 0) == 0
    high = sum(high for _, high in end_offsets(kafka.bootstrap_servers, topic).values())
    assert high == spilled


def test_a_parts_spill_is_counted_when_a_later_part_of_its_step_fails(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """A review: a step spilled part 0, and part 1's spill then failed (Redis away): the step
    raised, and part 0's spill was in Kafka and in no count (frontier/spilled). It is counted
    by the next step that runs through."""
    parts = frontier_parts(SPIDER, 2)

    async def scenario() -> int:
        async with spilling(redis_url, kafka, parts, "backlog-part-counted") as (_, nodes, backlog):
            await backlog.open()
            for part, node in enumerate(nodes):
                await node.open_epoch()
                found = [request(n) for n in range(400) if part_of(request(n).site, 2) == part]
                await node.complete(None, "done", found)
            spill = backlog._spill
            take = spill._take

            async def part_1_away(**kwargs: Any) -> Any:
                if parts[1].queue_count in kwargs["keys"]:
                    raise RedisConnectionError("Connection refused")
                return await take(**kwargs)

            spill._take = part_1_away  # type: ignore[assignment]
            with pytest.raises(RedisConnectionError):
                await backlog.step()
            spill._take = take
            return (await backlog.step()).spilled

    spilled = asyncio.run(scenario())
    assert spilled == sum(int(redis_client.get(keys.backlog) or 0) for keys in parts)


def test_a_spill_cancelled_as_its_take_answers_gives_its_leases_back(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """A stop that cancelled the spill after spill_take.lua ran, before its answer was read,
    left its leases held until they expired (a CI run: 60 leases left)."""
    (keys,) = frontier_parts(SPIDER, 1)

    async def scenario() -> None:
        async with spilling(redis_url, kafka, [keys], "backlog-cut-answer") as (
            _,
            (node,),
            backlog,
        ):
            take = backlog._spill._take
            step: asyncio.Future[Step] | None = None

            async def answered_then_cancelled(**kwargs: Any) -> object:
                answer = await take(**kwargs)  # the script ran: its leases are held
                assert step is not None
                step.cancel()  # a stop lands as the answer comes back
                await asyncio.sleep(0)
                return answer

            await open_with_100_queued(node, backlog)
            backlog._spill._take = answered_then_cancelled  # type: ignore[assignment]
            step = asyncio.ensure_future(backlog.step())
            with pytest.raises(asyncio.CancelledError):
                await step

    asyncio.run(scenario())
    assert redis_client.zcard(keys.leases) == 0


@pytest.mark.parametrize("how", ["cancelled", "reply lost"])
def test_a_spill_cut_short_as_its_leases_are_dropped_loses_nothing(
    redis_url: str, kafka: KafkaBroker, how: str
) -> None:
    """spill_done.lua ran, and the spill was cut short before its answer came (a stop, or the
    reply lost to a connection error): the spill gives back what it had not settled, and so
    calls spill_done.lua again for the same leases, which are gone by then. Taken for leases
    another node reclaimed, their messages would be skipped when read back: lost."""
    (keys,) = frontier_parts(SPIDER, 1)

    async def scenario() -> list[str]:
        async with spilling(redis_url, kafka, [keys], f"backlog-done-{how[:5]}") as (
            client,
            (node,),
            backlog,
        ):
            done = backlog._spill._done
            step: asyncio.Future[Step] | None = None

            async def ran_then_cut_short(**kwargs: Any) -> object:
                await done(**kwargs)
                backlog._spill._done = done
                if how == "reply lost":
                    raise RedisConnectionError("Connection reset by peer")
                assert step is not None
                step.cancel()
                await asyncio.sleep(0)
                raise AssertionError("not cancelled")

            await open_with_100_queued(node, backlog)
            backlog._spill._done = ran_then_cut_short  # type: ignore[assignment]
            step = asyncio.ensure_future(backlog.step())
            with pytest.raises((asyncio.CancelledError, RedisConnectionError)):
                await step
            crawled, _ = await crawl_through(client, [node], backlog, 100)
            return crawled

    crawled = asyncio.run(scenario())
    assert Counter(crawled) == Counter(codec.loads(request(n).body)["url"] for n in range(100))


@pytest.mark.parametrize("how", ["cancelled", "raised"])
def test_a_spill_cut_short_gives_its_leases_back(
    redis_url: str,
    redis_client: redis.Redis,
    kafka: KafkaBroker,
    how: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node stopped while a spill waited for the broker (the loop is cancelled at close), or
    a send that raised (a partition the topic lacks), left the leases spill_take.lua gave it:
    the crawl showed STALLED until they expired, then crawled those pages twice (an audit: 15
    duplicates). They go back to the queue at once; a damaged one among them is failed with
    its record first (it went back to the queue, to be taken and failed by the next spill)."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = f"backlog-cut-{how}"
    damaged = replace(request(99), body=codec.COMPRESSED + b"\xff\xff")  # spilled first

    async def scenario() -> None:
        async with spilling(redis_url, kafka, [keys], topic) as (_, (node,), backlog):
            await backlog.open()
            await node.complete(None, "done", [request(n) for n in range(99)] + [damaged])
            if how == "cancelled":
                waiting = asyncio.Event()

                async def broker_never_answers(timeout: float) -> int:
                    waiting.set()
                    await asyncio.sleep(60)
                    return 0

                monkeypatch.setattr(backlog.producer, "drain", broker_never_answers)
                step = asyncio.ensure_future(backlog.step())
                await waiting.wait()  # the spill waits for the broker
                step.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await step
                monkeypatch.undo()  # the close drains the producer
            else:

                def no_such_partition(*_args: object) -> bool:
                    raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))

                monkeypatch.setattr(backlog.producer, "send", no_such_partition)
                with pytest.raises(KafkaException):
                    await backlog.step()

    asyncio.run(scenario())
    assert redis_client.zcard(keys.leases) == 0
    # those Kafka acknowledged before the purge (reports served by it) are spilled, as they are
    spilled = int(redis_client.get(keys.backlog) or 0)
    assert queued(redis_client, keys) + spilled == 99
    (record,) = [orjson.loads(value) for value in redis_client.hvals(keys.failed)]
    assert record["reason"] == "spill/undecodable"


async def stopped_past_the_grace(backlog: Backlog, step: asyncio.Future[Step]) -> None:
    """Stop the backlog as a node does with ``step`` under way: cancelled, given a grace (run
    out here), then the close (the caller cancels the step again after it, as the node's
    close does, once it has looked at what the close left)."""
    backlog.stop()
    step.cancel()
    await asyncio.wait({step}, timeout=0.2)
    await backlog.close()


def test_a_give_back_that_outlasts_the_stops_grace_is_awaited_at_the_close(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: a stop cancels the backlog loop while a spill waits for the broker and gives
    the loop LOOP_CANCEL_GRACE to give its leases back; a give-back that took longer (Redis
    slow) was left out of the spills the close settles, and Redis was closed under it: its
    leases held until they expired. The close awaits it."""
    (keys,) = frontier_parts(SPIDER, 1)

    async def scenario() -> None:
        async with spilling(redis_url, kafka, [keys], "backlog-slow-give-back") as (
            _,
            (node,),
            backlog,
        ):
            await open_with_100_queued(node, backlog)
            waiting = asyncio.Event()
            complete_many = node.complete_many

            async def broker_never_answers(timeout: float) -> int:
                waiting.set()
                await asyncio.sleep(60)
                return 0

            async def slow(*args: Any, **kwargs: Any) -> Any:
                await asyncio.sleep(1.0)  # past the grace below
                return await complete_many(*args, **kwargs)

            kafka.pause()  # no message acknowledged: every request goes back to the queue
            monkeypatch.setattr(backlog.producer, "drain", broker_never_answers)
            step = asyncio.ensure_future(backlog.step())
            await waiting.wait()  # the spill waits for the broker
            monkeypatch.undo()  # the close drains the producer
            node.complete_many = slow  # type: ignore[method-assign]
            await stopped_past_the_grace(backlog, step)
            assert redis_client.zcard(keys.leases) == 0
            assert queued(redis_client, keys) == 100
            step.cancel()
            await asyncio.wait({step})

    asyncio.run(scenario())


def test_a_spill_stopped_as_its_take_answers_late_has_its_leases_back_at_the_close(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """A review: a stop cancelled a spill while spill_take.lua's answer was on its way; the
    spill waited for it to give the leases back, past the stop's grace, and the close did not
    wait for that: Redis was closed under it, and the leases held until they expired."""
    (keys,) = frontier_parts(SPIDER, 1)

    async def scenario() -> None:
        async with spilling(redis_url, kafka, [keys], "backlog-slow-take") as (_, (node,), backlog):
            await open_with_100_queued(node, backlog)
            spill = backlog._spill
            take, answered = spill._take, asyncio.Event()

            async def answers_late(**kwargs: Any) -> Any:
                flat = await take(**kwargs)  # the script ran: the leases are the node's
                answered.set()
                await asyncio.sleep(1.0)  # its answer comes past the grace below
                return flat

            spill._take = answers_late  # type: ignore[assignment]
            step = asyncio.ensure_future(backlog.step())
            await answered.wait()
            assert redis_client.zcard(keys.leases) == 100 - MAX
            await stopped_past_the_grace(backlog, step)
            assert redis_client.zcard(keys.leases) == 0
            assert queued(redis_client, keys) == 100
            step.cancel()
            await asyncio.wait({step})

    asyncio.run(scenario())


def test_a_backlog_topic_with_fewer_partitions_than_parts_is_grown(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """A 1-part crawl that never spilled left its 1-partition topic (purge keeps an empty
    one); a 3-part crawl then could not spill parts 1 and 2 ('Unknown partition', a warning a
    step) and its spill leases waited a lease timeout. The topic gets a partition per part."""
    parts = frontier_parts(SPIDER, 3)
    topic = "backlog-grown"

    async def scenario() -> int:
        async with spilling(redis_url, kafka, parts, topic, queue_max=5) as (_, nodes, backlog):
            await backlog.producer.ensure_topics([topic], 1, 1)  # the earlier crawl's
            await backlog.open()
            await nodes[2].complete(None, "done", [request(n) for n in range(20)])
            return (await backlog.step()).spilled

    assert asyncio.run(scenario()) == 15
    assert redis_client.zcard(parts[2].leases) == 0
    assert len(end_offsets(kafka.bootstrap_servers, topic)) == 3


def test_a_spill_kafka_does_not_acknowledge_stays_in_redis(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker that stalls past the message timeout: the spill's requests stay queued in
    Redis. The broker wrote the messages it had been sent all the same once it answered, and
    they were read back too: 60 pages crawled twice (a review). They are skipped."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = "backlog-paused"

    async def scenario() -> tuple[Step, Step, list[str]]:
        async with spilling(redis_url, kafka, [keys], topic, ack_timeout=2.0) as (
            client,
            (node,),
            backlog,
        ):
            await open_with_100_queued(node, backlog)
            kafka.pause()  # the broker stops answering mid-crawl
            paused = await backlog.step()
            assert queued(redis_client, keys) == 100  # nothing left Redis unacknowledged
            assert redis_client.zcard(keys.leases) == 0
            kafka.resume()
            crawled, after = await crawl_through(client, [node], backlog, 100)
            return paused, after, crawled

    paused, after, crawled = asyncio.run(scenario())
    assert (paused.spilled, paused.refused) == (0, 100 - MAX)
    assert paused.unsure == 100 - MAX  # they timed out, sent or not: Kafka may write them still
    assert (
        "60 of them were sent and timed out, were purged, had no outcome or were acknowledged "
        "without an offset: should Kafka" in caplog.text
    )
    assert Counter(crawled) == Counter(codec.loads(request(n).body)["url"] for n in range(100))
    high = sum(high for _, high in end_offsets(kafka.bootstrap_servers, topic).values())
    # what the broker wrote of the first attempt once it answered was read back and skipped
    assert after.refill_requeued == high - after.spilled
    # what it did not write stays recorded (a few bytes each)
    assert redis_client.hlen(keys.backlog_unsure) == 100 - MAX - after.refill_requeued


def spill_left_unanswered(
    redis_url: str, kafka: KafkaBroker, monkeypatch: pytest.MonkeyPatch, *, late_reports: bool
) -> tuple[Step, list[str]]:
    """100 requests (60 beyond the bound) spilled while the broker is paused: the spill waits
    half a second, and its purge leaves every message out (librdkafka's purge of messages on the
    wire is not sure to report them at once); then the broker answers and writes them, and all
    is crawled through the backlog. ``late_reports``: their acknowledgements come while the
    spill writes its unsure record (its call drains the producer). The spill's step and the
    URLs crawled."""
    (keys,) = frontier_parts(SPIDER, 1)
    monkeypatch.setattr("crawler.frontier.backlog_spill.REPORT_SLACK", 0.5 - 10.0)

    async def scenario() -> tuple[Step, list[str]]:
        topic = f"backlog-unanswered-{late_reports}"
        async with spilling(redis_url, kafka, [keys], topic) as (client, (node,), backlog):
            monkeypatch.setattr(backlog.producer, "purge", lambda: None)
            record = client.hset

            async def record_then_reports(name: str, **kwargs: Any) -> Any:
                kafka.resume()
                assert await backlog.producer.drain(8.0) == 0  # the acknowledgements come now
                return await record(name, **kwargs)

            await open_with_100_queued(node, backlog)
            kafka.pause()
            if late_reports:
                monkeypatch.setattr(client, "hset", record_then_reports)
            unanswered = await backlog.step()
            monkeypatch.setattr(client, "hset", record)
            kafka.resume()  # the broker writes what the producer still held
            crawled, _ = await crawl_through(client, [node], backlog, 100)
            return unanswered, crawled

    return asyncio.run(scenario())


def test_a_spill_message_with_no_outcome_even_after_the_purge_is_recorded_unsure(
    redis_url: str, kafka: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spill that waited past the message timeout purges what is still out; a message the
    purge could not take back (no outcome reported yet) went back to the queue unrecorded, and
    the broker wrote it once it answered: read back and crawled twice."""
    step, crawled = spill_left_unanswered(redis_url, kafka, monkeypatch, late_reports=False)
    assert (step.spilled, step.refused, step.unsure) == (0, 60, 60)
    assert Counter(crawled) == Counter(codec.loads(request(n).body)["url"] for n in range(100))


def test_a_report_that_comes_after_a_spill_recorded_its_message_unsure_loses_nothing(
    redis_url: str, kafka: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spill recorded its unanswered messages unsure, and their acknowledgements came while
    it wrote that record (a stop: the backlog's close drains the producer while the cancelled
    spill gives its leases back; or a purge that did not take back what was on the wire): the
    spill dropped those requests from Redis as spilled, and their messages, read back, were
    skipped as unsure: lost (a review). A lease recorded unsure goes back to the queue
    whatever report comes after."""
    step, crawled = spill_left_unanswered(redis_url, kafka, monkeypatch, late_reports=True)
    assert (step.spilled, step.refused, step.unsure) == (0, 60, 60)
    assert Counter(crawled) == Counter(codec.loads(request(n).body)["url"] for n in range(100))


def test_a_record_of_a_timed_out_spill_skips_no_message_of_another_request(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """Redis lost its data while 60 spilled requests waited in Kafka: the part's lease
    counter started over, so a timed-out spill afterwards recorded the keys of those 60
    messages, which were then skipped as its own: lost (a review). A message's key is its
    spill's own."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = "backlog-wiped"

    def urls(site: str) -> Counter[str]:
        return Counter(codec.loads(request(n, site).body)["url"] for n in range(100))

    async def scenario() -> tuple[Step, list[str]]:
        async with spilling(redis_url, kafka, [keys], topic, ack_timeout=2.0) as (
            client,
            (node,),
            backlog,
        ):
            await backlog.open()
            await node.complete(None, "done", [request(n, "a") for n in range(100)])
            assert (await backlog.step()).spilled == 100 - MAX
            for key in redis_client.scan_iter(match=f"{glob_escape(keys.tag)}*"):
                redis_client.delete(key)  # a restart without persistence: Kafka keeps its 60
            await node.complete(None, "done", [request(n, "b") for n in range(100)])
            kafka.pause()  # past the message timeout: the spill does not know what Kafka took
            stalled = await backlog.step()
            kafka.resume()
            crawled, _ = await crawl_through(client, [node], backlog, 160)
            return stalled, crawled

    stalled, crawled = asyncio.run(scenario())
    assert stalled.unsure == 100 - MAX
    counts = Counter(crawled)
    assert max(counts.values()) == 1
    assert {url for url in counts if "//b" in url} == set(urls("b"))
    # the 60 that waited in Kafka (the 40 queued in Redis were lost with it)
    assert len({url for url in counts if "//a" in url} & set(urls("a"))) == 100 - MAX


def test_a_spill_whose_leases_another_node_reclaimed_leaves_their_messages_skipped(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """Kafka acknowledged a spill's messages after its leases had expired (the node stalled,
    or Redis's clock stepped ahead) and another node had reclaimed them: spill_done.lua left
    those requests queued, as it must, but the spill counted them as spilled and their
    messages were read back: each of those pages crawled twice (a review). Their messages are
    recorded to be skipped, and they are counted apart."""
    (keys,) = frontier_parts(SPIDER, 1)

    async def scenario() -> tuple[Step, list[str]]:
        async with spilling(redis_url, kafka, [keys], "backlog-reclaimed") as (
            client,
            (node,),
            backlog,
        ):
            other = FrontierClient(client, keys, "n2")
            done = backlog._spill._done

            async def reclaimed_then_done(**kwargs: Any) -> object:
                leases = [lease_id for lease_id, _ in redis_client.zscan_iter(keys.leases)]
                redis_client.zadd(keys.leases, dict.fromkeys(leases, 0))  # expired
                beat = await other.heartbeat([], 60_000, 60_000, 1000, await other.open_epoch())
                assert beat.reclaimed == 100 - MAX
                return await done(**kwargs)

            await open_with_100_queued(node, backlog)
            backlog._spill._done = reclaimed_then_done  # type: ignore[assignment]
            step = await backlog.step()
            backlog._spill._done = done
            crawled, _ = await crawl_through(client, [node], backlog, 100)
            return step, crawled

    step, crawled = asyncio.run(scenario())
    assert (step.spilled, step.spill_reclaimed) == (0, 100 - MAX)
    assert Counter(crawled) == Counter(codec.loads(request(n).body)["url"] for n in range(100))


def test_a_spill_settled_again_counts_the_requests_reclaimed_from_it_once(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """A review: Kafka acknowledged 15 requests of a spill whose leases another node had
    reclaimed (counted as spill_done.lua recorded them), and Redis went away as the spill gave
    its refused requests back: its give-back again (as the spill is cut short, or at the next
    step) counted the 15 again in frontier/spill_reclaimed (and said them again)."""
    (keys,) = frontier_parts(SPIDER, 1)
    room = 15

    async def scenario() -> int:
        async with spilling(redis_url, kafka, [keys], "backlog-reclaimed-again") as (
            client,
            (node,),
            backlog,
        ):
            other = FrontierClient(client, keys, "n2")
            spill, send, complete_many = backlog._spill, backlog.producer.send, node.complete_many
            done = spill._done
            sent = [0]
            outage = [RedisConnectionError("Connection refused")]

            def send_with_little_room(
                message: OutgoingMessage, on_delivery: DeliveryReport, *, alone: bool = False
            ) -> bool:
                sent[0] += 1
                return sent[0] <= room and send(message, on_delivery)

            async def reclaimed_then_done(**kwargs: Any) -> object:
                if leases := [lease_id for lease_id, _ in redis_client.zscan_iter(keys.leases)]:
                    redis_client.zadd(keys.leases, dict.fromkeys(leases, 0))  # expired
                    await other.heartbeat([], 60_000, 60_000, 1000, await other.open_epoch())
                return await done(**kwargs)

            async def away_once(*args: Any, **kwargs: Any) -> Any:
                if outage:
                    raise outage.pop()
                return await complete_many(*args, **kwargs)

            await open_with_100_queued(node, backlog)
            backlog.producer.send = send_with_little_room  # type: ignore[method-assign]
            spill._done = reclaimed_then_done  # type: ignore[assignment]
            node.complete_many = away_once  # type: ignore[method-assign]
            with pytest.raises(RedisConnectionError):
                await backlog.step()
            backlog.producer.send = send  # type: ignore[method-assign]
            spill._done = done
            step = await backlog.step()
            return step.spill_reclaimed

    assert asyncio.run(scenario()) == room


@pytest.mark.parametrize("then", ["reclaimed", "drained", "stopped", "answer lost"])
def test_a_spill_redis_refused_to_settle_is_settled_before_anything_else(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, then: str
) -> None:
    """Kafka acknowledged a spill's messages and Redis was away when the spill settled them
    (spill_done.lua, and its second try as the spill was cut short, refused): the next step
    began anew and forgot them, their leases expired and were reclaimed, and their messages
    were read back too: each crawled twice (a review). Settled first at the next step, also
    one that does not spill (the queue drained below the bound: a second review), and at the
    node's stop."""
    (keys,) = frontier_parts(SPIDER, 1)

    counted: Counter[str] = Counter()

    class Stats:
        def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
            counted[key] += count

    async def scenario() -> tuple[list[str], Step]:
        topic = f"backlog-unsettled-{then.replace(' ', '-')}"
        async with spilling(redis_url, kafka, [keys], topic) as (client, (node,), backlog):
            other = FrontierClient(client, keys, "n2")
            done = backlog._spill._done
            calls = 0

            async def away(**kwargs: Any) -> object:
                nonlocal calls
                calls += 1
                if then == "answer lost" and calls == 1:
                    await done(**kwargs)  # it ran; its answer is lost, then Redis is away
                raise RedisConnectionError("Connection refused")

            await open_with_100_queued(node, backlog)
            backlog._spill._done = away  # type: ignore[assignment]
            with pytest.raises(RedisConnectionError):
                await backlog.step()
            backlog._spill._done = done
            crawled, step = [], Step(0, 0, 0)
            if then == "drained":
                crawled += await crawl_queued([node])  # 25 of the 40 queued
                step = await backlog.step()
            elif then == "answer lost":
                step = await backlog.step()
            elif then == "stopped":
                backlog.stop()
                await backlog.close(stats=Stats())
            if leases := [lease_id for lease_id, _ in redis_client.zscan_iter(keys.leases)]:
                redis_client.zadd(keys.leases, dict.fromkeys(leases, 0))  # expired meanwhile
            await other.heartbeat([], 60_000, 60_000, 1000, await other.open_epoch())
        async with spilling(redis_url, kafka, [keys], topic, node_id="n3") as (
            client,
            (node,),
            backlog,
        ):
            await backlog.open()
            more, _ = await crawl_through(client, [node], backlog, 100 - len(crawled))
            return crawled + more, step

    crawled, step = asyncio.run(scenario())
    assert Counter(crawled) == Counter(codec.loads(request(n).body)["url"] for n in range(100))
    if then in ("drained", "answer lost"):  # counted as the step settled them
        assert step.spilled == 100 - MAX
    if then == "stopped":
        assert counted == {"frontier/spilled": 100 - MAX}


def test_requests_spilled_as_redis_loses_its_data_are_crawled_from_kafka(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """Redis lost its data (a restart without persistence) while a spill waited for the broker:
    its leases were gone when Kafka acknowledged their messages, and were taken for leases
    another node reclaimed, so the messages, the requests' only copy, were skipped when read
    back (review AT: 60 of 60 lost). A spill records nothing once the part's epoch changed."""
    (keys,) = frontier_parts(SPIDER, 1)

    async def scenario() -> tuple[Step, list[str]]:
        async with spilling(redis_url, kafka, [keys], "backlog-wiped-mid-spill") as (
            client,
            (node,),
            backlog,
        ):
            await open_with_100_queued(node, backlog)
            step = await spill_waiting_for_the_broker(kafka, backlog, redis_client, keys)
            redis_client.flushdb()  # a restart without persistence: the 40 queued are lost
            kafka.resume()
            wiped = await step
            crawled, _ = await crawl_through(client, [node], backlog, 100 - MAX)
            return wiped, crawled

    wiped, crawled = asyncio.run(scenario())
    assert (wiped.spilled, wiped.spill_reclaimed) == (0, 0)  # their leases were lost, not taken
    spilled = read_topic(kafka.bootstrap_servers, "backlog-wiped-mid-spill", expected=100 - MAX)
    assert len(spilled) == 100 - MAX
    assert Counter(crawled) == Counter(orjson.loads(m.value)["request"]["url"] for m in spilled)


def test_a_spill_message_acknowledged_without_an_offset_stays_queued(
    redis_url: str, kafka: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """librdkafka reports a batch that failed delivered, without an offset, once a batch sent
    after it succeeds ("implicitly acked"), and a broker with no state for the producer may
    have written the later batch only (a reproduction, on item topics). The spill took such a
    report for Kafka's word (offset 0) and dropped the requests from Redis: here 10 lost. Such
    a message is unsure: its request stays queued, its message skipped should Kafka hold it."""
    (keys,) = frontier_parts(SPIDER, 1)

    class NoOffset:
        def offset(self) -> None:
            return None

    async def scenario() -> tuple[Step, list[str]]:
        async with spilling(redis_url, kafka, [keys], "backlog-no-offset") as (
            client,
            (node,),
            backlog,
        ):
            send = backlog.producer.send
            unproven = [0]

            def implicitly_acked(
                message: OutgoingMessage, on_delivery: DeliveryReport, *, alone: bool = False
            ) -> bool:
                if unproven[0] < 10:  # not written, reported delivered
                    unproven[0] += 1
                    on_delivery(None, NoOffset())  # type: ignore[arg-type]
                    return True
                return send(message, on_delivery)

            await open_with_100_queued(node, backlog)
            backlog.producer.send = implicitly_acked  # type: ignore[method-assign]
            step = await backlog.step()
            backlog.producer.send = send  # type: ignore[method-assign]
            crawled, _ = await crawl_through(client, [node], backlog, 100)
            return step, crawled

    step, crawled = asyncio.run(scenario())
    assert (step.spilled, step.refused, step.unsure) == (100 - MAX - 10, 10, 10)
    assert Counter(crawled) == Counter(codec.loads(request(n).body)["url"] for n in range(100))


def test_a_spills_leases_outlast_its_wait_for_the_broker(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """They had the node's FRONTIER_LEASE_TIMEOUT (15 s at its least) while a spill waits up
    to 35 s: expired, reclaimed and crawled from Redis, and crawled again from Kafka once it
    took their messages (a review: 60 pages twice with a lease of 3 s and a broker away 4.5 s)."""
    (keys,) = frontier_parts(SPIDER, 1)

    async def scenario() -> float:
        async with spilling(redis_url, kafka, [keys], "backlog-leases", lease_ms=3_000) as (
            _,
            (node,),
            backlog,
        ):
            await open_with_100_queued(node, backlog)
            step = await spill_waiting_for_the_broker(kafka, backlog, redis_client, keys)
            deadline = min(float(score) for _, score in redis_client.zscan_iter(keys.leases))
            now_ms = server_time_ms(redis_client, keys.epoch)
            kafka.resume()
            assert (await step).spilled == 100 - MAX
            return (deadline - now_ms) / 1000

    assert asyncio.run(scenario()) > 10.0 + REPORT_SLACK  # the helper's ack_timeout, and more


def test_a_spill_the_broker_acknowledges_late_is_in_kafka_only(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """A spill gave up after KAFKA_FLUSH_TIMEOUT and put its requests back in the queue while
    librdkafka still held their messages: written when the broker answered, each was queued in
    Redis and waited in Kafka, and was crawled twice (an audit: a page 8 times with
    KAFKA_FLUSH_TIMEOUT=0). A spill waits for the outcome of each message it sent, up to the
    message timeout: a broker that answers within it takes them all."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = "backlog-late"

    async def scenario() -> tuple[Step, int, list[str]]:
        async with spilling(redis_url, kafka, [keys], topic, ack_timeout=15.0) as (
            client,
            (node,),
            backlog,
        ):
            await backlog.open()
            await node.complete(None, "done", [request(n) for n in range(MAX)])
            assert (await backlog.step()).spilled == 0  # the topic checked, nothing to spill
            await node.complete(None, "done", [request(n) for n in range(MAX, 100)])
            kafka.pause()  # answers again after 4 s (a spill waited 2 s: KAFKA_FLUSH_TIMEOUT)
            asyncio.get_running_loop().call_later(4.0, kafka.resume)
            late = await backlog.step()
            crawled, after = await crawl_through(client, [node], backlog, 100)
            return late, late.spilled + after.spilled, crawled

    late, spilled, crawled = asyncio.run(scenario())
    assert (late.spilled, late.refused) == (100 - MAX, 0)
    assert Counter(crawled) == Counter(codec.loads(request(n).body)["url"] for n in range(100))
    high = sum(high for _, high in end_offsets(kafka.bootstrap_servers, topic).values())
    assert high == spilled == 100 - MAX  # no message Redis kept too


def test_a_request_taken_to_spill_that_cannot_be_read_fails_with_a_record(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """A damaged compressed body among those taken to spill: its lease fails with a record
    (``spill/undecodable``), the others go to Kafka, and the step goes on."""
    (keys,) = frontier_parts(SPIDER, 1)
    damaged = replace(request(99), body=codec.COMPRESSED + b"\xff\xff")  # spilled first

    async def scenario() -> Step:
        async with spilling(redis_url, kafka, [keys], "backlog-damaged") as (_, (node,), backlog):
            await backlog.open()
            await node.complete(None, "done", [request(n) for n in range(99)] + [damaged])
            return await backlog.step()

    step = asyncio.run(scenario())
    assert (step.spilled, step.refused, step.undecodable) == (100 - MAX - 1, 0, 1)
    assert queued(redis_client, keys) == MAX
    assert redis_client.zcard(keys.leases) == 0
    (record,) = [orjson.loads(value) for value in redis_client.hvals(keys.failed)]
    assert (record["reason"], record["node"]) == ("spill/undecodable", "n1")


def test_a_backlog_message_that_cannot_be_read_back_fails_with_a_record(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """Messages on the backlog topic that are not a spilled request (not JSON, no score, no
    request) do not stop the refill, now or after a restart: each becomes a failure record
    (``refill/undecodable``; its request kept when there is one, for ``crawler failed retry``),
    is taken off the backlog's count and counted; the messages around them are queued."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = f"backlog-unreadable-{uuid.uuid4().hex[:8]}"
    good = [
        orjson.dumps({"score": 0.0, "request": {"url": f"http://ok.test/{n}"}}) for n in range(3)
    ]
    values = [
        good[0],
        b"not JSON at all",
        orjson.dumps({"request": {"url": "http://no-score.test/"}}),
        good[1],
        orjson.dumps({"score": 1.0, "request": "text"}),
        orjson.dumps([1, 2]),
        good[2],
    ]
    redis_client.set(keys.backlog, len(values))  # as the spill that put them there counted

    async def read_back(expected: int) -> Step:
        """Step until ``expected`` messages were taken, and 10 steps since the consumer was
        given its partition (a restart must not read them again)."""
        refilled = unreadable = assigned_steps = 0
        async with spilling(redis_url, kafka, [keys], topic) as (_, _, backlog):
            await backlog.open()
            if expected:  # the first run: the topic is new
                producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
                for value in values:
                    producer.produce(topic, value, partition=0)
                assert producer.flush(30) == 0
            deadline = time.monotonic() + 60  # the group's first assignment takes seconds
            while refilled + unreadable < expected or assigned_steps < 10:
                assert time.monotonic() < deadline, (refilled, unreadable, assigned_steps)
                step = await backlog.step()
                refilled, unreadable = (
                    refilled + step.refilled,
                    unreadable + step.refill_undecodable,
                )
                assigned_steps += bool(backlog.consumer.assignment())
            return Step(0, refilled, 0, refill_undecodable=unreadable)

    with caplog.at_level(logging.ERROR, logger="crawler.frontier.backlog"):
        first = asyncio.run(read_back(7))
    assert (first.refilled, first.refill_undecodable) == (3, 4)
    assert "4 messages read back from" in caplog.text and topic in caplog.text
    assert queued(redis_client, keys) == 3
    assert int(redis_client.get(keys.backlog) or 0) == 0
    records = {
        text(key): orjson.loads(value) for key, value in redis_client.hgetall(keys.failed).items()
    }
    assert {record["reason"] for record in records.values()} == {"refill/undecodable"}
    assert sorted(records) == [f"backlog-0-{offset}" for offset in (1, 2, 4, 5)]
    assert records["backlog-0-2"]["request"] == {"url": "http://no-score.test/"}  # retry-able
    assert records["backlog-0-1"]["request"] == "not JSON at all"
    again = asyncio.run(read_back(0))  # a restart: the offsets were committed past them
    assert (again.refilled, again.refill_undecodable) == (0, 0)
    assert queued(redis_client, keys) == 3


def test_requests_the_producer_has_no_room_for_stay_queued_in_redis(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """The producer's local queue full (large requests): the requests it did not take are
    released back to the queue, logged and counted as refused; the step goes on."""
    (keys,) = frontier_parts(SPIDER, 1)
    room = 15

    async def scenario() -> tuple[int, int]:
        async with spilling(redis_url, kafka, [keys], "backlog-full") as (_, (node,), backlog):
            send = backlog.producer.send
            taken = [0]

            def send_with_little_room(
                message: OutgoingMessage, on_delivery: DeliveryReport, *, alone: bool = False
            ) -> bool:
                taken[0] += 1
                return taken[0] <= room and send(message, on_delivery)

            await backlog.open()
            backlog.producer.send = send_with_little_room  # type: ignore[method-assign]
            await node.complete(None, "done", [request(n) for n in range(100)])
            step = await backlog.step()
            return step.spilled, step.refused

    with caplog.at_level(logging.WARNING, logger="crawler.frontier.backlog"):
        assert asyncio.run(scenario()) == (room, 100 - MAX - room)
    assert queued(redis_client, keys) == 100 - room
    assert redis_client.zcard(keys.leases) == 0
    assert "Kafka did not acknowledge 45 of 60 requests" in caplog.text


def test_kafka_errors_while_reading_back_are_logged_and_counted(
    redis_url: str,
    kafka: KafkaBroker,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A consumer error is an event, not a record: it is logged and counted, never skipped
    in silence (here: the backlog topic is gone, as after a purge, and not made again yet)."""
    (keys,) = frontier_parts(SPIDER, 1)
    monkeypatch.setattr(backlog_module, "TOPIC_CHECK_SECONDS", float("inf"))

    async def scenario() -> int:
        async with spilling(redis_url, kafka, [keys], "never-made") as (_, _, backlog):
            backlog.consumer.subscribe(["never-made"])  # joined, but the topic does not exist
            try:
                for _ in range(100):
                    if errors := (await backlog.step()).read_errors:
                        return errors
                    await asyncio.sleep(0.1)
                raise AssertionError("no Kafka error reached the backlog")
            finally:
                backlog.consumer.close()  # subscribed here, not by open()

    with caplog.at_level("WARNING", logger="crawler.frontier.backlog"):
        assert asyncio.run(scenario()) >= 1
    assert "Backlog read: " in caplog.text and "never-made" in caplog.text


def test_live_nodes_that_keep_another_bound_are_said_once(
    redis_url: str,
    redis_client: redis.Redis,
    kafka: KafkaBroker,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nodes given different FRONTIER_QUEUE_MAX pass requests back and forth through Kafka
    (each spills above its own bound, reads back below half of its own), and nothing said so.
    Each node now says the live nodes' other bounds once (a node whose beat lapsed is not
    counted, and the record of one gone is dropped)."""
    (keys,) = frontier_parts(SPIDER, 1)
    monkeypatch.setattr(backlog_module, "TOPIC_CHECK_SECONDS", 0.0)  # a look every step
    redis_client.hset(keys.backlog_bounds, mapping={"lapsed": 7, "gone": 8})
    lapsed = server_time_ms(redis_client, keys.nodes) - 60_000  # its beat a minute late
    redis_client.zadd(keys.nodes, {"lapsed": lapsed})

    async def scenario() -> tuple[list[int], list[int]]:
        topic = "backlog-bounds"
        async with (
            spilling(redis_url, kafka, [keys], topic) as (_, (one,), first),
            spilling(redis_url, kafka, [keys], topic, queue_max=10, node_id="n2") as (
                _,
                (two,),
                second,
            ),
        ):
            for node in (one, two):
                await node.heartbeat([], 60_000, 60_000, 0, await node.open_epoch())
            await first.open()
            await second.open()
            said: tuple[list[int], list[int]] = ([], [])
            for backlog in (first, second, first, second, first):
                said[backlog is second].append((await backlog.step()).bounds_differ)
            return said

    with caplog.at_level(logging.WARNING, logger="crawler.frontier.backlog_bounds"):
        said_first, said_second = asyncio.run(scenario())
    # n1's first look came before n2 recorded its bound; n2's first look finds n1's
    assert (said_first, said_second) == ([0, 1, 0], [1, 0])
    assert (
        "Nodes of this crawl keep FRONTIER_QUEUE_MAX=10 (n2) where this node keeps 40"
        in caplog.text
    )
    assert "FRONTIER_QUEUE_MAX=40 (n1) where this node keeps 10" in caplog.text
    assert caplog.text.count("Nodes of this crawl keep") == 2
    assert sorted(map(text, redis_client.hkeys(keys.backlog_bounds))) == ["lapsed", "n1", "n2"]


def test_nodes_crawl_a_site_through_the_backlog_every_page_once(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, tmp_path: Path
) -> None:
    topic_template = "spill-items-{spider}"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    node_settings = {
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "FRONTIER_QUEUE_MAX": "15",
        "FRONTIER_SPILL_INTERVAL": "0.2",
        "FRONTIER_BACKLOG_TOPIC": "spill-backlog-{spider}",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
        "CONCURRENT_REQUESTS": "4",
    }
    with (
        Site(300) as site,
        running_nodes(2, workdir=tmp_path, env=env, settings=node_settings) as nodes,
    ):
        redis_client.lpush("pages:start_urls", site.url(0))
        assert wait_for_exit(nodes, timeout=240) == [0, 0], logs(tmp_path)
    assert tracebacks(tmp_path) == [], logs(tmp_path)
    messages = read_topic(
        kafka.bootstrap_servers, topic_template.format(spider="pages"), expected=300, timeout=60
    )
    urls = Counter(orjson.loads(message.value)["url"] for message in messages)
    assert set(urls) == site.all_urls()
    assert max(urls.values()) == 1
    text = "".join((tmp_path / f"node-{i}.log").read_text() for i in range(2))
    assert "'frontier/spilled'" in text and "'frontier/refilled'" in text
    offsets = end_offsets(kafka.bootstrap_servers, "spill-backlog-pages")
    assert sum(high for _, high in offsets.values()) > 0

    # a purge ends the crawl's backlog too: its requests would come back into the next crawl
    purged = crawler_process(
        "purge",
        "pages",
        "--yes",
        "--json",
        "--redis",
        redis_url,
        env={
            "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
            **{f"CRAWLER_SETTING_{name}": value for name, value in node_settings.items()},
        },
    )
    assert purged.returncode == 0, purged.stderr
    assert orjson.loads(purged.stdout)["backlog"] == (
        "deleted the Kafka backlog topic spill-backlog-pages"
    )
    assert end_offsets(kafka.bootstrap_servers, "spill-backlog-pages", timeout=5) == {}


def scrapy_purge(
    spider: str, *args: str, redis_url: str, kafka: KafkaBroker, answer: str = ""
) -> subprocess.CompletedProcess[str]:
    """``scrapy purge <spider> <args>`` in the project, ``answer`` on its stdin."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "purge", spider, *args],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        input=answer,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_scrapy_purge_deletes_the_backlog_of_a_crawl_whose_redis_keys_are_gone(
    redis_url: str, kafka: KafkaBroker
) -> None:
    """As ``crawler purge`` does: requests left in the backlog would come back into the next
    crawl, whether or not Redis still holds anything of the spider. Asked first, as for keys."""
    topic = f"spill-backlog-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(topic, b'{"url": "http://left.invalid/"}')
    assert producer.flush(30) == 0
    assert sum(high for _, high in end_offsets(kafka.bootstrap_servers, topic).values()) == 1
    given = ["-s", "FRONTIER_QUEUE_MAX=1000", "-s", f"FRONTIER_BACKLOG_TOPIC={topic}"]

    def purge(*extra: str, answer: str = "") -> subprocess.CompletedProcess[str]:
        arguments = [*given, *extra]
        return scrapy_purge("pages", *arguments, redis_url=redis_url, kafka=kafka, answer=answer)

    refused = purge(answer="no\n")
    assert refused.returncode == 1, refused.stderr
    assert f"Delete the Kafka backlog topic {topic} (if it exists)?" in refused.stdout
    assert "Not purged." in refused.stdout
    assert sum(high for _, high in end_offsets(kafka.bootstrap_servers, topic).values()) == 1
    done = purge("--yes")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Nothing to purge for 'pages' in Redis"), done.stdout
    assert f"deleted the Kafka backlog topic {topic}" in done.stdout, done.stdout
    assert end_offsets(kafka.bootstrap_servers, topic, timeout=5) == {}


def test_a_node_without_the_bound_is_refused_while_requests_wait_in_the_backlog(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """It would never read them back: the crawl would never finish (nor would this node)."""
    redis_client.set(FrontierKeys.for_spider("pages").backlog, 59)
    with Site(3) as site:
        run = crawl("pages", [site.url(0)], workdir=tmp_path, redis_url=redis_url, exit_code=1)
    assert run.items == []
    assert "'finish_reason': 'frontier_backlog_unread'" in run.log
    assert "59 requests of 'pages' wait in the Kafka backlog" in run.log
    assert "-s FRONTIER_QUEUE_MAX=<n>" in run.log
    assert run.stat("frontier/refused/backlog") == 1


def test_a_purge_deletes_the_backlog_of_a_crawl_that_spilled_without_being_told_the_bound(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """The nodes had -s FRONTIER_QUEUE_MAX, the operator's purge does not: the crawl's backlog
    counters in Redis say it spilled, so its topic goes too (else the next crawl reads it)."""
    topic = f"spill-backlog-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(topic, b'{"url": "http://left.invalid/"}')
    assert producer.flush(30) == 0
    redis_client.set(FrontierKeys.for_spider("pages").backlog, 1)
    given = ["--yes", "-s", f"FRONTIER_BACKLOG_TOPIC={topic}"]
    done = scrapy_purge("pages", *given, redis_url=redis_url, kafka=kafka)
    assert done.returncode == 0, done.stderr
    assert f"deleted the Kafka backlog topic {topic}" in done.stdout, done.stdout
    assert end_offsets(kafka.bootstrap_servers, topic, timeout=5) == {}


@pytest.mark.parametrize("command", ["crawler", "scrapy"])
def test_a_purge_deletes_the_backlog_topic_a_spider_names_itself(
    command: str, redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """A spider's custom_settings FRONTIER_BACKLOG_TOPIC: both purges looked for the project's
    topic, found none and said nothing, and the next crawl read the 161 requests left in the
    spider's topic again (an audit: 161 pages fetched twice)."""
    topic = "own-own_backlog-backlog"
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    producer.produce(topic, b'{"url": "http://left.invalid/"}')
    assert producer.flush(30) == 0
    redis_client.set(FrontierKeys.for_spider("own_backlog").backlog, 1)
    modules = "crawler.spiders,tests.spiders"
    if command == "crawler":
        done = crawler_process(
            "purge",
            "own_backlog",
            "--yes",
            "--redis",
            redis_url,
            env={
                "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
                "CRAWLER_SETTING_SPIDER_MODULES": modules,
            },
        )
    else:
        given = ["--yes", "-s", f"SPIDER_MODULES={modules}"]
        done = scrapy_purge("own_backlog", *given, redis_url=redis_url, kafka=kafka)
    assert done.returncode == 0, done.stderr
    assert f"deleted the Kafka backlog topic {topic}" in done.stdout, done.stdout
    assert end_offsets(kafka.bootstrap_servers, topic, timeout=5) == {}


def test_a_purge_deletes_every_backlog_topic_the_crawl_spilled_to(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """The nodes ran with `-s FRONTIER_BACKLOG_TOPIC=...`, which a purge is not given: it
    deleted the recorded topic's key and left the topic, and the next crawl read its 222
    requests back (an audit: 675 items for a 453-page site). Nodes given different topics
    spilled to two: the purge deleted the recorded one and left the other. The recorded topic
    goes, and every topic a part's offsets name."""
    topics = [f"spilled-{uuid.uuid4().hex[:8]}-{n}" for n in (1, 2)]
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for topic in topics:
        producer.produce(topic, b'{"url": "http://left.invalid/"}')
    assert producer.flush(30) == 0
    keys = FrontierKeys.for_spider("pages")
    redis_client.set(keys.backlog, 2)
    redis_client.set(keys.backlog_topic, topics[1])  # recorded, read back to its end
    redis_client.hset(keys.backlog_written, topics[0], 1)  # spilled to by a node stopped
    done = crawler_process(
        "purge",
        "pages",
        "--yes",
        "--redis",
        redis_url,
        env={"KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers},
    )
    assert done.returncode == 0, done.stderr
    for topic in topics:
        assert f"deleted the Kafka backlog topic {topic}" in done.stdout, done.stdout
        assert end_offsets(kafka.bootstrap_servers, topic, timeout=5) == {}


def test_a_purge_without_kafka_keeps_a_crawl_that_spilled_and_says_why(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """Without KAFKA_BOOTSTRAP_SERVERS (the nodes had it with -s) a purge deleted the record
    of the topic and left the topic: its 192 requests came back into the next crawl (an
    audit). It refuses now, and keeps the keys."""
    keys = FrontierKeys.for_spider("pages")
    redis_client.set(keys.backlog, 192)
    redis_client.set(keys.backlog_topic, "ran-pages-backlog")
    done = crawler_process(
        "purge", "pages", "--yes", "--redis", redis_url, env={"KAFKA_BOOTSTRAP_SERVERS": ""}
    )
    assert done.returncode == 1
    assert "spilled requests to the Kafka backlog topic ran-pages-backlog" in done.stderr
    assert "KAFKA_BOOTSTRAP_SERVERS is empty here" in done.stderr
    assert redis_client.get(keys.backlog_topic) == b"ran-pages-backlog"


def test_a_node_given_another_backlog_topic_than_the_requests_wait_in_is_refused(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, tmp_path: Path
) -> None:
    """FRONTIER_BACKLOG_TOPIC changed between two runs of a crawl with requests spilled: the
    nodes read the new topic, crawled what Redis held and idled for ever, 186 requests left
    in the old one with no word (an audit)."""
    keys = FrontierKeys.for_spider("pages")
    redis_client.set(keys.backlog, 186)
    redis_client.set(keys.backlog_topic, "old-pages-backlog")
    redis_client.hset(keys.backlog_written, "old-pages-backlog", 186)
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    settings = {
        "FRONTIER_QUEUE_MAX": "10",
        "FRONTIER_BACKLOG_TOPIC": "new-{spider}-backlog",
        "CRAWLER_STANDALONE_FEED": "",
    }
    with running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes:
        assert wait_for_exit(nodes, timeout=60) == [1], logs(tmp_path)
    log = logs(tmp_path, tail=0)
    assert "'finish_reason': 'frontier_backlog_topic'" in log
    assert "186 requests of 'pages' wait in the Kafka backlog topic old-pages-backlog" in log
    assert "FRONTIER_BACKLOG_TOPIC gives new-pages-backlog" in log
    assert redis_client.get(keys.backlog_topic) == b"old-pages-backlog"


def test_a_node_whose_backlog_topic_lost_the_crawls_record_stops(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, tmp_path: Path
) -> None:
    """A node started with another FRONTIER_BACKLOG_TOPIC while nothing waited recorded its
    own: a node running with the old one spilled on to it without a word (read back by no node
    of the new topic once it stopped). It stops at its next look (every 10 s), saying why."""
    keys = FrontierKeys.for_spider("pages")
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    topic = f"old-{uuid.uuid4().hex[:8]}-pages-backlog"
    settings = {
        "FRONTIER_QUEUE_MAX": "10",
        "FRONTIER_BACKLOG_TOPIC": topic.replace("pages", "{spider}"),
        "CRAWLER_STANDALONE_FEED": "",
    }
    with running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes:
        deadline = time.monotonic() + 60
        while redis_client.get(keys.backlog_topic) != topic.encode():
            assert time.monotonic() < deadline and nodes[0].poll() is None, logs(tmp_path)
            time.sleep(0.2)
        redis_client.set(keys.backlog_topic, "new-pages-backlog")
        assert wait_for_exit(nodes, timeout=60) == [1], logs(tmp_path)
    log = logs(tmp_path, tail=0)
    assert "'finish_reason': 'frontier_backlog_topic'" in log
    assert "the crawl now spills to the Kafka backlog topic new-pages-backlog" in log
    assert f"this node spills to {topic}: it stops" in log
