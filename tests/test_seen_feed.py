"""The seen feed (``FRONTIER_SEEN_FEED``): the fingerprints one node records reach every other
node's seen-cache through Kafka, only within the frontier's epoch; and a crawl with it on gets
every page exactly once while its nodes drop links they never sent themselves."""

from __future__ import annotations

import asyncio
import functools
import re
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import redis
from confluent_kafka import KafkaError, Producer
from scrapy.settings import Settings

from crawler.demo.site import Site
from crawler.frontier import seen_feed
from crawler.frontier.seen_cache import SeenCache
from crawler.frontier.seen_feed import SeenFeed, SeenFeedSettings
from crawler.frontier.settings import FrontierSettings
from settings import base
from tests.cluster import crawl_site_once, logs


class Counts(Counter[str]):
    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self[key] += count


def feed_settings(bootstrap: str) -> SeenFeedSettings:
    return SeenFeedSettings(
        enabled=True, topic=f"seen-{uuid.uuid4().hex[:8]}", bootstrap=bootstrap, replication=1
    )


class Node:
    """One node's feed, its seen-cache and the epoch it believes in."""

    def __init__(
        self,
        settings: SeenFeedSettings,
        node_id: str,
        epoch: str,
        *,
        found_too: bool = True,
        cache: int = 1000,
    ) -> None:
        self.stats = Counts()
        self.feed = SeenFeed(settings, node_id, self.stats, found_too=found_too)
        self.cache = SeenCache(cache)
        self.epoch = epoch
        self.loop: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.loop = asyncio.ensure_future(self.feed.run(lambda: self.epoch, self.cache.add))
        await self.feed.reading.wait()

    async def stop(self) -> None:
        assert self.loop is not None
        self.loop.cancel()
        await self.feed.close()


async def until(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def fingerprint(n: int) -> str:
    return f"{n:040x}"


def test_a_reader_takes_a_message_when_it_arrives_not_when_a_batch_fills(
    kafka_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """librdkafka's batch read waits its whole timeout unless the batch fills: a reader that
    read so would learn a write's fingerprints only once per wait, while the others sent their
    links to Redis. With the wait made a minute, one message still arrives within seconds."""
    monkeypatch.setattr(seen_feed, "READ_WAIT", 60.0)
    settings = feed_settings(kafka_bootstrap)

    async def scenario() -> float:
        sender, reader = Node(settings, "node-a", "e1"), Node(settings, "node-b", "e1")
        for node in (sender, reader):
            await node.start()
        try:
            await asyncio.sleep(0.5)  # the reader waits in its read
            sent = time.monotonic()
            sender.feed.publish("e1", [fingerprint(1)], [])
            await until(lambda: fingerprint(1) in reader.cache, timeout=20.0)
            return time.monotonic() - sent
        finally:
            for node in (reader, sender):  # no read after the one in flight (each waits 60 s)
                node.loop.cancel()  # type: ignore[union-attr]
            sender.feed.publish("e1", [fingerprint(2)], [])  # ends the reads in flight
            for node in (reader, sender):
                await node.stop()

    took = asyncio.run(scenario())
    assert took < 20.0


def test_a_message_that_is_not_fingerprints_is_skipped_and_counted(kafka_bootstrap: str) -> None:
    """A message of the node's epoch whose value is not hex fingerprints, one a line (bytes
    that are not text, text that is not hex): skipped and counted, and the reader goes on to
    the next message (before, the first one ended the node's reading for good)."""
    settings = feed_settings(kafka_bootstrap)

    async def scenario() -> Counts:
        reader = Node(settings, "node-b", "e1")
        await reader.start()
        try:
            producer = Producer({"bootstrap.servers": kafka_bootstrap})
            headers: dict[str, str | bytes | None] = {"epoch": "e1", "node": "other", "at": "1"}
            for value in (b"\xff\xfe not text", b"not a fingerprint", fingerprint(3).encode()):
                producer.produce(settings.topic, value, headers=headers)
            assert producer.flush(30) == 0
            await until(lambda: fingerprint(3) in reader.cache)
            return reader.stats
        finally:
            await reader.stop()

    stats = asyncio.run(scenario())
    assert stats["frontier/seen_feed/unreadable"] == 2
    assert stats["frontier/seen_feed/received"] == 1


def test_what_one_node_records_reaches_the_others_within_its_epoch(kafka_bootstrap: str) -> None:
    settings = feed_settings(kafka_bootstrap)

    async def scenario() -> None:
        sender, other, behind, ttl = (
            Node(settings, "node-a", "e1"),
            Node(settings, "node-b", "e1"),
            Node(settings, "node-c", "e0"),  # has not seen the epoch change yet
            Node(settings, "node-d", "e1", found_too=False),  # a dedup TTL: only new ones
        )
        for node in (sender, other, behind, ttl):
            await node.start()
        try:
            sender.feed.publish("e1", [fingerprint(1)], [fingerprint(2)])  # recorded, found
            sender.feed.publish("", [fingerprint(3)], [])  # epoch not known yet: nothing goes
            sender.feed.publish("e0", [fingerprint(4)], [])  # an epoch the frontier left
            ttl.feed.publish("e1", [fingerprint(6)], [fingerprint(7)])
            sender.feed.publish("e1", [fingerprint(5)], [])
            await until(lambda: fingerprint(5) in other.cache and fingerprint(6) in other.cache)
            await until(lambda: other.stats["frontier/seen_feed/stale"] == 1)
            await until(lambda: behind.stats["frontier/seen_feed/stale"] == 3)
        finally:
            for node in (sender, other, behind, ttl):
                await node.stop()
        assert fingerprint(7) not in other.cache  # found by a node with a TTL: not shared
        assert [fingerprint(n) in other.cache for n in range(1, 6)] == [
            True,
            True,
            False,
            False,
            True,
        ]
        # the older epoch's node took only its own epoch's fingerprint
        assert [fingerprint(n) in behind.cache for n in range(1, 6)] == [
            False,
            False,
            False,
            True,
            False,
        ]
        # its own fingerprints are not read back
        assert fingerprint(1) not in sender.cache
        assert fingerprint(6) not in ttl.cache
        assert sender.stats["frontier/seen_feed/sent"] == 4
        assert ttl.stats["frontier/seen_feed/sent"] == 1
        assert other.stats["frontier/seen_feed/received"] == 4
        assert behind.stats["frontier/seen_feed/received"] == 1

    asyncio.run(scenario())


def test_a_write_of_many_links_goes_in_messages_kafka_takes(kafka_bootstrap: str) -> None:
    """25,000 fingerprints (a sitemap's page) are over Kafka's 1 MB in one message."""
    settings = feed_settings(kafka_bootstrap)

    async def scenario() -> tuple[Counts, Counts]:
        sender, other = Node(settings, "node-a", "e1"), Node(settings, "node-b", "e1", cache=60_000)
        for node in (sender, other):
            await node.start()
        try:
            sender.feed.publish("e1", [fingerprint(n) for n in range(25_000)], [])
            await until(lambda: other.stats["frontier/seen_feed/received"] == 25_000)
        finally:
            for node in (sender, other):
                await node.stop()
        return sender.stats, other.stats

    sent, received = asyncio.run(scenario())
    assert (sent["frontier/seen_feed/sent"], sent["frontier/seen_feed/lost"]) == (25_000, 0)
    assert received["frontier/seen_feed/error"] == 0


def test_a_node_that_cannot_reach_kafka_keeps_crawling_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing listens on the port: publishing never blocks, the loop only counts and logs."""
    settings = SeenFeedSettings(
        enabled=True, topic="seen-nowhere", bootstrap="127.0.0.1:1", replication=1
    )

    async def scenario() -> Counts:
        node = Node(settings, "node-a", "e1")
        node.loop = asyncio.ensure_future(node.feed.run(lambda: "e1", node.cache.add))
        node.feed.publish("e1", [fingerprint(1)], [])  # queued locally, never waits for Kafka
        await until(lambda: node.stats["frontier/seen_feed/error"] >= 1, timeout=40)
        await node.stop()
        return node.stats

    stats = asyncio.run(scenario())
    assert stats["frontier/seen_feed/sent"] == 1
    assert "Seen feed open error on topic seen-nowhere" in caplog.text


def test_fingerprints_kafka_did_not_take_are_counted_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """They were counted in frontier/seen_feed/lost with no line (an audit)."""
    settings = SeenFeedSettings(
        enabled=True, topic="seen-untaken", bootstrap="127.0.0.1:1", replication=1
    )
    node = Node(settings, "node-a", "e1")
    report = node.feed._delivery_report(3)
    for _ in range(2):  # the WARNING once a minute at most, every one counted
        report(KafkaError(KafkaError._MSG_TIMED_OUT), None)  # type: ignore[arg-type]
    asyncio.run(node.feed.close())
    assert node.stats["frontier/seen_feed/lost"] == 6
    assert caplog.text.count("Seen feed: 3 fingerprints not shared") == 1
    assert "(Kafka did not take them: " in caplog.text


def test_an_entry_learned_late_never_outlives_the_dedup_ttl() -> None:
    """A fingerprint recorded ``age`` seconds ago goes to a generation at least that old, or
    nowhere: the cache never holds it longer than the TTL after it was recorded."""

    class Clock:
        now = 1000.0

        def __call__(self) -> float:
            return self.now

    clock = Clock()
    cache = SeenCache(100, ttl=10.0, clock=clock)
    clock.now += 3
    cache.add("fresh", age=1.0)  # the newer generation started 3 s ago: it goes there
    cache.add("older", age=4.0)  # recorded before the newer generation started
    assert "fresh" in cache
    assert "older" not in cache  # no generation is 4 s old yet: not kept
    clock.now += 3  # 6 s: past half the TTL, the next add rotates
    cache.add("x")
    cache.add("late", age=5.0)  # the older generation started 6 s ago: it goes there
    assert "late" in cache
    clock.now += 4.5  # the older generation is 10.5 s old: gone, "late" with it
    assert "late" not in cache
    assert "fresh" not in cache


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"KAFKA_BOOTSTRAP_SERVERS": ""}, "FRONTIER_SEEN_FEED=True needs KAFKA_BOOTSTRAP_SERVERS"),
        ({"FRONTIER_SEEN_CACHE": "0"}, "FRONTIER_SEEN_FEED=True fills the seen-cache"),
    ],
)
def test_a_feed_without_kafka_or_cache_is_refused(given: dict[str, str], message: str) -> None:
    settings = Settings()
    settings.setmodule(base)
    settings.set("REDIS_URL", "redis://localhost:6379/0")
    settings.set("KAFKA_BOOTSTRAP_SERVERS", "localhost:9092")
    settings.set("FRONTIER_SEEN_FEED", "true")
    settings.update(given)
    with pytest.raises(ValueError, match=re.escape(message)):
        FrontierSettings.from_settings(settings)


def test_a_crawl_with_the_feed_gets_every_page_once_and_drops_links_others_recorded(
    redis_url: str, redis_client: redis.Redis, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Two nodes on a link-dense site (8 more links a page): links the other node recorded
    are dropped from the cache without reaching Redis, and no page is missed."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    settings = {
        "FRONTIER_SEEN_FEED": "true",
        "FRONTIER_SEEN_TOPIC": f"seen-{uuid.uuid4().hex[:8]}-{{spider}}",
        "FRONTIER_HEARTBEAT_INTERVAL": "1",
        "FRONTIER_LEASE_TIMEOUT": "4",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
        "KAFKA_TOPIC_TEMPLATE": f"items-{uuid.uuid4().hex[:8]}-{{spider}}",
    }
    with Site(300, delay=0.01, extra_links=8) as site:
        seed = functools.partial(redis_client.lpush, "pages:start_urls")
        node_logs = crawl_site_once(
            site, seed, nodes=2, workdir=tmp_path, env=env, settings=settings
        )
    assert "Seen feed: fingerprints recorded by any node reach this one" in node_logs
    received = [int(n) for n in re.findall(r"'frontier/seen_feed/received': (\d+)", node_logs)]
    assert sum(received) > 0, logs(tmp_path)
