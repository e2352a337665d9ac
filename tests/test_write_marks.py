"""A Redis that lost writes it had acknowledged (a failover to a replica that was behind, a
restart from an older snapshot) keeps the frontier's epoch: the nodes' seen-caches then hold
fingerprints the dedup lost, and a page fetched again had its links dropped by a cache
without a word (an audit lost 28 of 400 pages, status "finished"). Each write now carries a
token the node compares with its write mark in Redis; a loss starts another epoch."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest
import redis

from crawler.devservices import RedisServer, RedisServerConfig, free_port
from crawler.frontier.client import FrontierClient, NewRequest
from crawler.frontier.dedup import DedupConfig
from crawler.frontier.keys import frontier_parts
from crawler.frontier.lease_keeper import LeaseKeeper, Timing
from crawler.frontier.node_run import NodeRun
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.frontier.write_marks import WriteMarks
from crawler.redis_connection import async_client
from crawler.redis_outage import OutageGuard
from crawler.redis_url import RedisConfig
from tests.frontier_state import Counts, Quiet
from tests.services import started


def link(url: str) -> NewRequest:
    fingerprint = hashlib.sha1(url.encode()).hexdigest()
    return NewRequest(fingerprint, 0.0, b'{"url": "%s"}' % url.encode(), site="a.test")


def test_a_mark_below_a_call_answered_before_is_a_loss() -> None:
    marks = WriteMarks(asyncio.Event())
    first, applied = marks.issue()
    assert applied == 0
    assert not marks.settled(first, applied, b"")  # the node's first call: nothing to compare
    second, applied = marks.issue()
    assert second > first and applied == first
    third, applied_third = marks.issue()  # sent before the second's reply: may run before it
    assert not marks.settled(third, applied_third, str(first).encode())
    assert not marks.settled(second, applied, str(third).encode())  # replies out of order
    fourth, applied = marks.issue()
    assert applied == third
    assert marks.settled(fourth, applied, str(first).encode())  # the second and third are gone
    assert marks.lost.is_set()


async def write(frontier: PartitionedFrontier, url: str) -> None:
    for _ in range(50):  # the first call after a restart may meet the old connection
        try:
            await frontier.complete_turn([link(url)], [])
            return
        except redis.exceptions.ConnectionError:
            await asyncio.sleep(0.1)
    raise AssertionError("Redis did not come back")


@pytest.mark.parametrize("persisted", [False, True], ids=["snapshot", "aof"])
def test_a_redis_restarted_from_an_older_snapshot_is_noticed(
    tmp_path: Path, persisted: bool
) -> None:
    config = RedisServerConfig(port=free_port(), data_dir=tmp_path / "redis", appendonly=persisted)
    with started(RedisServer(config), "redis-server") as server:
        plain = redis.Redis.from_url(server.url)

        async def scenario() -> bool:
            client = async_client(RedisConfig.from_url(server.url))
            frontier = PartitionedFrontier.connect(
                client, "rolled", "node-a", 1, dedup=DedupConfig(), link_check=None
            )
            await frontier.open_epoch()
            await write(frontier, "http://a.test/1")
            plain.save()
            await write(frontier, "http://a.test/2")  # answered; gone with the restart below
            assert not frontier.lost_writes.is_set()
            server.stop()
            server.start()
            await write(frontier, "http://a.test/3")
            await client.aclose()
            return frontier.lost_writes.is_set()

        assert asyncio.run(scenario()) is not persisted  # with the AOF nothing was lost
        plain.close()


class Holds(Quiet):
    """A node holding one request, whose seen-cache is forgotten once."""

    def __init__(self) -> None:
        self.forgotten = 0

    def held_bodies(self) -> list[bytes]:
        return [b'{"url": "http://a.test/held"}']

    def drop_buffered(self) -> None:
        pass

    def forget_seen(self) -> None:
        self.forgotten += 1


def test_lost_writes_start_another_epoch_and_the_node_recovers_at_once(
    redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    timing = Timing(lease_timeout=30, heartbeat_interval=60, reclaim_batch=10)
    holder: Any = Holds()
    counts = Counts()

    async def scenario() -> tuple[str, str]:
        client = async_client(RedisConfig.from_url(redis_url))
        frontier = PartitionedFrontier.connect(
            client, "rolled", "node-a", 1, dedup=DedupConfig(), link_check=None
        )
        run = NodeRun(client, frontier.keys, "node-a", 5)  # unclaimed: it beats nothing
        keeper = LeaseKeeper(
            frontier, holder, OutageGuard("t", lambda _: None), counts, timing, node_run=run
        )
        loop = asyncio.ensure_future(keeper.run())
        await asyncio.sleep(0.3)
        before = keeper.epoch
        frontier.lost_writes.set()  # as a write's reply sets it
        for _ in range(50):  # long before the next heartbeat (a minute)
            if holder.forgotten:
                break
            await asyncio.sleep(0.1)
        loop.cancel()
        await client.aclose()
        return before, keeper.epoch

    before, after = asyncio.run(scenario())
    assert before and after and before != after
    assert redis_client.get("{rolled}:epoch") == after.encode()
    assert holder.forgotten == 1
    assert counts.counter["frontier/writes_lost"] == 1
    assert counts.counter["frontier/epoch_lost"] == 1
    assert counts.counter["frontier/requeued_after_loss"] == 1
    assert "Redis lost writes of the frontier {rolled} it had acknowledged" in caplog.text
    assert redis_client.llen("{rolled}:incidents") == 1


def test_calls_sent_before_the_node_adopted_another_epoch_measure_nothing() -> None:
    """A forced purge deletes the marks with the rest: the node adopts the purge's epoch, and a
    call sent before that found no mark. It was taken for lost writes, and the node started
    another epoch over the purge's (a loss, an incident)."""
    marks = WriteMarks(asyncio.Event())
    first, applied = marks.issue()
    marks.settled(first, applied, b"")
    in_flight, applied = marks.issue()
    marks.forget()  # the heartbeat adopted the purge's epoch meanwhile
    assert not marks.settled(in_flight, applied, b"")
    after, applied = marks.issue()
    assert applied == 0
    assert not marks.settled(after, applied, b"")
    last, applied = marks.issue()
    assert marks.settled(last, applied, b"")  # a mark gone again: a loss


def test_lost_writes_noticed_while_redis_is_away_again_are_acted_on_once_it_answers(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A failover may come with more of an outage: the first look at the epochs fails, and the
    loss must not be forgotten with it."""
    timing = Timing(lease_timeout=30, heartbeat_interval=60, reclaim_batch=10)
    holder: Any = Holds()
    counts = Counts()

    async def scenario() -> bool:
        client = async_client(RedisConfig.from_url(redis_url))
        frontier = PartitionedFrontier.connect(
            client, "rolled", "node-a", 1, dedup=DedupConfig(), link_check=None
        )
        looks = 0
        epochs = frontier.epochs

        async def away_once() -> str:
            nonlocal looks
            looks += 1
            if looks == 1:
                raise redis.exceptions.ConnectionError("away again")
            return await epochs()

        frontier.epochs = away_once  # type: ignore[method-assign]
        run = NodeRun(client, frontier.keys, "node-a", 5)  # unclaimed: it beats nothing
        keeper = LeaseKeeper(
            frontier, holder, OutageGuard("t", lambda _: None), counts, timing, node_run=run
        )
        loop = asyncio.ensure_future(keeper.run())
        await asyncio.sleep(0.3)
        frontier.lost_writes.set()
        for _ in range(50):
            if holder.forgotten:
                break
            await asyncio.sleep(0.1)
        loop.cancel()
        await client.aclose()
        return looks >= 2

    assert asyncio.run(scenario())
    assert counts.counter["frontier/writes_lost"] == 1
    assert holder.forgotten == 1


def test_a_loss_in_any_part_is_the_frontier_s_however_it_was_built() -> None:
    client = async_client(RedisConfig.from_url("redis://127.0.0.1:1/0"))  # never connects
    parts = [
        FrontierClient(client, keys, "node-a", DedupConfig())
        for keys in frontier_parts("marksbuilt", 3)
    ]
    frontier = PartitionedFrontier("marksbuilt", parts)
    marks = parts[2].marks
    first, applied = marks.issue()
    marks.settled(first, applied, b"")
    second, applied = marks.issue()
    assert marks.settled(second, applied, b"")  # the first call's write is gone
    assert frontier.lost_writes.is_set()
    frontier.forget_marks()
    assert not frontier.lost_writes.is_set()
