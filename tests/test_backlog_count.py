"""The backlog's count (``{<part>}:backlog``) says how many spilled requests wait in Kafka,
whatever order the nodes' steps land in and wherever a node dies: the idle check and
``crawler status`` add it to the queue, so a count too low ends a crawl with requests unread,
and one too high keeps its nodes waiting forever."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from dataclasses import astuple
from typing import Any

import orjson
import pytest
import redis
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from crawler.devservices import KafkaBroker
from crawler.frontier import backlog as backlog_module
from crawler.frontier.backlog import Backlog
from crawler.frontier.backlog_outcomes import Step
from crawler.frontier.client import FrontierClient
from crawler.frontier.keys import frontier_parts
from crawler.frontier.pending import pending_requests
from crawler.frontier.refusal import BacklogTopicTaken
from crawler.redis_connection import async_client
from tests.frontier_state import queued
from tests.test_backlog import MAX, SPIDER, crawl_queued, request, settings


@pytest.fixture
def kafka(module_kafka: KafkaBroker) -> KafkaBroker:
    return module_kafka


class DiesBeforeCommitting:
    """A node's consumer whose node dies once it has queued what it read back, before the
    offsets are committed."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)

    def commit(self, *_args: object, **_kwargs: object) -> None:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))


def spilled(kafka: KafkaBroker, topic: str, urls: list[str]) -> None:
    """Put ``urls`` in partition 0 of ``topic`` as spilled requests (score: their index)."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for n, url in enumerate(urls):
        producer.produce(topic, orjson.dumps({"score": n, "request": {"url": url}}), partition=0)
    assert producer.flush(30) == 0


async def read_back(backlog: Backlog, requests: int) -> Step:
    """Step ``backlog`` until it has read ``requests`` back (the group's first assignment takes
    seconds): the steps' counts summed."""
    total, deadline = Step(0, 0, 0), time.monotonic() + 60
    while total.refilled < requests:
        assert time.monotonic() < deadline, total
        step = await backlog.step()
        total = Step(*(a + b for a, b in zip(astuple(total), astuple(step), strict=True)))
    return total


def test_requests_read_back_by_a_node_that_died_before_committing_are_queued_once(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """The next reader reads those messages again: they were queued and counted already, so
    they are neither queued nor taken off the count again (a count taken down twice reached
    0 with requests still in Kafka: an audit's crawl ended with 3 of 451 pages not fetched)."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = f"backlog-reread-{uuid.uuid4().hex[:8]}"
    urls = [f"http://reread.test/{n}" for n in range(10)]
    spilled(kafka, topic, urls)
    redis_client.set(keys.backlog, len(urls))  # as the spill that put them there counted
    bound = settings(kafka, topic, queue_max=4)  # read back 4 at a time

    async def scenario() -> list[str]:
        client = async_client(redis_url, max_connections=8)
        dying = Backlog([FrontierClient(client, keys, "n1")], bound, 60_000)
        dying.consumer = DiesBeforeCommitting(dying.consumer)  # type: ignore[assignment]
        try:
            await dying.open()
            deadline = time.monotonic() + 60  # the group's first assignment takes seconds
            while True:
                assert time.monotonic() < deadline
                try:
                    await dying.step()
                except KafkaException:
                    break
        finally:
            await dying.close()
        assert queued(redis_client, keys) == 4
        node = FrontierClient(client, keys, "n2")
        backlog = Backlog([node], bound, 60_000)
        crawled: list[str] = []
        try:
            await backlog.open()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                crawled += await crawl_queued([node])
                waiting = await pending_requests(client, [keys])
                assert waiting >= len(set(urls) - set(crawled)), (waiting, crawled)
                if not waiting:
                    break
                await backlog.step()
                await asyncio.sleep(0.05)
            return crawled
        finally:
            await backlog.close()
            await client.aclose()

    crawled = asyncio.run(scenario())
    assert sorted(Counter(crawled).items()) == sorted((url, 1) for url in urls)
    assert int(redis_client.get(keys.backlog) or 0) == 0


def test_requests_read_back_before_their_spill_was_counted_leave_the_count_right(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka acknowledged a spill, and another node read its requests back before the spilling
    node counted them (``spill_done.lua``): the count must come back to 0, not stay at the
    spill's size (it was held at 0 on the way down, and nodes then waited forever)."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = f"backlog-early-{uuid.uuid4().hex[:8]}"
    total, spilled = MAX + 10, 10

    async def scenario() -> None:
        client = async_client(redis_url, max_connections=8)
        spilling = Backlog([FrontierClient(client, keys, "n1")], settings(kafka, topic), 60_000)
        reading = Backlog(  # room for everything: it reads back at once
            [FrontierClient(client, keys, "n2")], settings(kafka, topic, queue_max=10 * MAX), 60_000
        )
        counted = spilling._spill._done

        async def counted_after_the_read_back(**kwargs: Any) -> Any:
            await read_back(reading, spilled)
            return await counted(**kwargs)

        monkeypatch.setattr(spilling._spill, "_done", counted_after_the_read_back)
        try:
            await reading.open()
            await spilling.producer.ensure_topics([topic], 1, 1)
            await FrontierClient(client, keys, "n1").complete(
                None, "done", [request(n) for n in range(total)]
            )
            step = await spilling.step()
            assert step.spilled == spilled
            assert await pending_requests(client, [keys]) == total
        finally:
            await reading.close()
            await spilling.close()
            await client.aclose()

    asyncio.run(scenario())
    assert queued(redis_client, keys) == total
    assert redis_client.zcard(keys.leases) == 0
    assert int(redis_client.get(keys.backlog) or 0) == 0


@pytest.mark.parametrize("waited", [0, 10])
def test_a_backlog_topic_made_again_is_read_from_its_start_and_its_loss_said(
    redis_url: str,
    redis_client: redis.Redis,
    kafka: KafkaBroker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    waited: int,
) -> None:
    """The part's next offset belongs to the topic it was read from: a topic deleted by hand
    and made again starts at 0, and its messages are read, not skipped as read already. A
    read-back that found it before the node's look at it (every 10 s) started the offsets over
    with only a WARNING: the requests that waited in the topic deleted were dropped from the
    count without a word. Their loss is said and counted as the look says it."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = f"backlog-again-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(backlog_module, "TOPIC_CHECK_SECONDS", float("inf"))  # no look
    redis_client.hset(keys.backlog_read, topic, 500)  # read that far in the topic deleted
    redis_client.hset(keys.backlog_written, topic, 500 + waited)
    redis_client.set(keys.backlog, waited)
    spilled(kafka, topic, [f"http://again.test/{n}" for n in range(3)])

    async def scenario() -> Step:
        client = async_client(redis_url, max_connections=8)
        backlog = Backlog([FrontierClient(client, keys, "n1")], settings(kafka, topic), 60_000)
        try:
            await backlog.open()
            backlog._topic_checked = time.monotonic()
            return await read_back(backlog, 3)
        finally:
            await backlog.close()
            await client.aclose()

    with caplog.at_level(logging.WARNING, logger="crawler.frontier"):
        step = asyncio.run(scenario())
    assert (step.refilled, step.topic_lost) == (3, waited)
    said = f"Backlog topic {topic} was made again (deleted by hand?) while {waited} requests"
    assert (
        said in caplog.text
        if waited
        else "was made again, and is read from its start" in (caplog.text)
    )
    assert queued(redis_client, keys) == 3
    assert int(redis_client.get(keys.backlog) or 0) == 0
    assert int(redis_client.hget(keys.backlog_read, topic) or 0) == 3


def test_a_node_dying_between_kafka_and_counting_its_spill_leaves_later_counts_right(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka acknowledged a spill and the node died before ``spill_done.lua``: its requests
    are in Kafka (and, once its leases expire, in Redis again), uncounted. Read back, they
    must not take the count below what later spills put there (a count taken down by what
    was never added hid those later requests from the idle check)."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = f"backlog-uncounted-{uuid.uuid4().hex[:8]}"

    async def dies(**_kwargs: Any) -> Any:
        raise ConnectionError("the node died")

    async def scenario() -> tuple[int, int]:
        client = async_client(redis_url, max_connections=8)
        node = FrontierClient(client, keys, "n1")
        dying = Backlog([node], settings(kafka, topic), 60_000)
        reading = Backlog(
            [FrontierClient(client, keys, "n2")], settings(kafka, topic, queue_max=10 * MAX), 60_000
        )
        try:
            await reading.open()
            await dying.producer.ensure_topics([topic], 1, 1)
            await node.complete(None, "done", [request(n) for n in range(MAX + 10)])
            monkeypatch.setattr(dying._spill, "_done", dies)
            with pytest.raises(ConnectionError):
                await dying.step()
            dying._spill._unsettled.clear()  # it died: what it was to settle died with it
            assert int(redis_client.get(keys.backlog) or 0) == 0  # never counted
            await read_back(reading, 10)
            monkeypatch.undo()
            await node.complete(None, "done", [request(n) for n in range(100, 120)])
            later = await dying.step()  # 40 + 10 read back + 20 new: 30 beyond the bound
            return later.spilled, int(redis_client.get(keys.backlog) or 0)
        finally:
            await reading.close()
            await dying.close()
            await client.aclose()

    spilled, counted = asyncio.run(scenario())
    assert spilled == 30
    assert counted == 30


def test_requests_read_back_while_redis_failed_are_read_again(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis refused the call that queues what was read back (an outage: the node's guard runs
    the step again): the consumer had moved past those messages, and the next step read the
    ones after them and moved the part's next offset past the gap. An audit: 60 of 453 pages
    never crawled, the count at 0, no error."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = f"backlog-outage-{uuid.uuid4().hex[:8]}"
    urls = [f"http://outage.test/{n}" for n in range(12)]
    spilled(kafka, topic, urls)
    redis_client.set(keys.backlog, len(urls))

    async def scenario() -> list[str]:
        client = async_client(redis_url, max_connections=8)
        node = FrontierClient(client, keys, "n1")
        backlog = Backlog([node], settings(kafka, topic, queue_max=4), 60_000)
        queue_again = backlog._refill._back
        failures = [redis.exceptions.ConnectionError("Redis went away")]

        async def fails_once(**kwargs: Any) -> Any:
            if failures:
                raise failures.pop()
            return await queue_again(**kwargs)

        monkeypatch.setattr(backlog._refill, "_back", fails_once)
        crawled: list[str] = []
        try:
            await backlog.open()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                crawled += await crawl_queued([node])
                if not await pending_requests(client, [keys]):
                    break
                with contextlib.suppress(redis.exceptions.ConnectionError):
                    await backlog.step()  # the node's guard runs it again
                await asyncio.sleep(0.05)
            assert not failures  # the outage came
            return crawled
        finally:
            await backlog.close()
            await client.aclose()

    crawled = asyncio.run(scenario())
    assert sorted(Counter(crawled).items()) == sorted((url, 1) for url in urls)


def test_messages_gone_before_they_were_read_back_are_said_lost(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """The next message Kafka gives is past the part's next offset to read back (the topic's
    retention deleted the ones between): an ERROR and a count, not a silent jump."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = f"backlog-gap-{uuid.uuid4().hex[:8]}"
    spilled(kafka, topic, [f"http://gap.test/{n}" for n in range(8)])
    group = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": topic})
    group.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)  # 2-4 never read
    group.close()
    redis_client.hset(keys.backlog_read, topic, 2)
    redis_client.hset(keys.backlog_written, topic, 8)

    async def scenario() -> Step:
        client = async_client(redis_url, max_connections=8)
        backlog = Backlog([FrontierClient(client, keys, "n1")], settings(kafka, topic), 60_000)
        try:
            await backlog.open()
            return await read_back(backlog, 3)
        finally:
            await backlog.close()
            await client.aclose()

    with caplog.at_level(logging.ERROR, logger="crawler.frontier.backlog_refill"):
        step = asyncio.run(scenario())
    assert (step.refilled, step.refill_lost) == (3, 3)
    assert f"3 messages of {topic} (partition 0) were never read back" in caplog.text
    assert int(redis_client.get(keys.backlog) or 0) == 0


@pytest.mark.parametrize("made_by", ["the nodes", "another client"])
def test_a_backlog_topic_deleted_mid_crawl_is_made_again_and_its_loss_said(
    redis_url: str,
    redis_client: redis.Redis,
    kafka: KafkaBroker,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    made_by: str,
) -> None:
    """The backlog topic deleted by hand while requests waited in it (and made again at once
    by another client, or not): the count stayed at them and the nodes waited for ever, or
    the new topic's messages were skipped as read (an audit). Now the loss is said and
    counted, and the crawl goes on through the topic as it is."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = f"backlog-deleted-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(backlog_module, "TOPIC_CHECK_SECONDS", 0.0)

    async def scenario() -> tuple[int, list[str]]:
        client = async_client(redis_url, max_connections=8)
        node = FrontierClient(client, keys, "n1")
        backlog = Backlog([node], settings(kafka, topic), 60_000)
        try:
            await backlog.open()
            await node.complete(None, "done", [request(n) for n in range(MAX + 10)])
            assert (await backlog.step()).spilled == 10
            assert int(redis_client.get(keys.backlog) or 0) == 10
            admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
            admin.delete_topics([topic])[topic].result(30)
            lost, deadline = 0, time.monotonic() + 60
            while made_by == "another client":  # the broker may still hold it for a moment
                assert time.monotonic() < deadline
                with contextlib.suppress(KafkaException):
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    break
                await asyncio.sleep(0.2)
            while not lost:
                assert time.monotonic() < deadline
                with contextlib.suppress(KafkaException):
                    lost = (await backlog.step()).topic_lost
            await node.complete(None, "done", [request(n) for n in range(100, 105)])
            crawled: list[str] = []
            while await pending_requests(client, [keys]):
                assert time.monotonic() < deadline
                crawled += await crawl_queued([node])
                await backlog.step()
            return lost, crawled
        finally:
            await backlog.close()
            await client.aclose()

    with caplog.at_level(logging.ERROR, logger="crawler.frontier.backlog"):
        lost, crawled = asyncio.run(scenario())
    assert lost == 10
    assert f"Backlog topic {topic} was made again (deleted by hand?) while 10 requests" in (
        caplog.text
    )
    assert len(crawled) == MAX + 5 and len(set(crawled)) == MAX + 5
    assert int(redis_client.get(keys.backlog) or 0) == 0


def test_nodes_starting_together_say_no_loss(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker, caplog: pytest.LogCaptureFixture
) -> None:
    """The node that made the topic took another node's spill into it, made before its first
    step, for requests lost with a topic deleted: a false ERROR, and the count at 0 while they
    waited (an audit: 3 runs of 14)."""
    (keys,) = frontier_parts(SPIDER, 1)
    topic = f"backlog-together-{uuid.uuid4().hex[:8]}"

    async def scenario() -> tuple[int, int]:
        client = async_client(redis_url, max_connections=8)
        maker = Backlog([FrontierClient(client, keys, "n1")], settings(kafka, topic), 60_000)
        other = Backlog([FrontierClient(client, keys, "n2")], settings(kafka, topic), 60_000)
        try:
            await maker.open()
            await other.open()
            await FrontierClient(client, keys, "n2").complete(
                None, "done", [request(n) for n in range(MAX + 10)]
            )
            spilled = (await other.step()).spilled
            return spilled, (await maker.step()).topic_lost
        finally:
            await maker.close()
            await other.close()
            await client.aclose()

    with caplog.at_level(logging.ERROR, logger="crawler.frontier.backlog"):
        assert asyncio.run(scenario()) == (10, 0)
    assert "lost" not in caplog.text
    assert int(redis_client.get(keys.backlog) or 0) == 10


def test_requests_spilled_to_two_topics_are_all_counted_and_the_one_without_the_record_stops(
    redis_url: str, redis_client: redis.Redis, kafka: KafkaBroker
) -> None:
    """Two nodes given different FRONTIER_BACKLOG_TOPICs, the second started while nothing
    waited (it takes the record): the first spilled on to its own topic without a word, and
    each count took the other's requests off (20 spilled, 10 counted: the crawl could end with
    10 never read back). Now the count is over every topic, and a node finds the record is not
    its topic at its next look and stops before it spills again."""
    (keys,) = frontier_parts(SPIDER, 1)
    first, second = (f"backlog-two-{uuid.uuid4().hex[:8]}-{n}" for n in (1, 2))
    redis_client.set(keys.backlog_topic, first)

    async def scenario() -> tuple[int, str]:
        client = async_client(redis_url, max_connections=8)
        node = FrontierClient(client, keys, "n1")
        one = Backlog([node], settings(kafka, first), 60_000)
        two = Backlog([FrontierClient(client, keys, "n2")], settings(kafka, second), 60_000)
        try:
            await one.open()
            await two.open()
            await node.complete(None, "done", [request(n) for n in range(MAX + 10)])
            assert (await one.step()).spilled == 10
            redis_client.set(keys.backlog_topic, second)  # the second node is admitted
            await node.complete(None, "done", [request(n) for n in range(100, 110)])
            assert (await two.step()).spilled == 10
            counted = int(redis_client.get(keys.backlog) or 0)
            await node.complete(None, "done", [request(n) for n in range(200, 210)])
            one._topic_checked = 0.0  # its next look
            with pytest.raises(BacklogTopicTaken) as taken:
                await one.step()
            return counted, str(taken.value)
        finally:
            await one.close()
            await two.close()
            await client.aclose()

    counted, said = asyncio.run(scenario())
    assert counted == 20
    assert f"now spills to the Kafka backlog topic {second}" in said
    assert f"this node spills to {first}" in said
    assert f"10 requests wait in {first}" in said
    assert queued(redis_client, keys) == MAX + 10  # not spilled by the node stopped
