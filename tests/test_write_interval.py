"""FRONTIER_WRITE_INTERVAL: a node's writes gather what it settles for a while, and go at once
when a dry prefetch buffer or a caller waits for them (against a real Redis)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from scrapy.settings import Settings
from scrapy.statscollectors import StatsCollector
from scrapy.utils.test import get_crawler

from crawler.frontier.acks import LeaseState
from crawler.frontier.client import FrontierClient, Lease, LeaseAsk, NewRequest
from crawler.frontier.dedup import DedupConfig
from crawler.frontier.dedup_report import DedupReport
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.frontier.refusal import FrontierRefused
from crawler.frontier.settings import FrontierSettings
from crawler.frontier.turn_writer import TurnWriter
from crawler.redis_outage import GaveUp
from settings.resolve import resolve_settings
from tests.aio import run
from tests.frontier_state import fingerprint_of, queued

KEYS = FrontierKeys.for_spider("interval")


class Owner:
    """The scheduler's side of the writer (``TurnOwner``), on a real frontier."""

    node_id = "node-0"
    refused = False
    epoch = "e1"

    def __init__(self, url: str) -> None:
        self.client = PartitionedFrontier(
            "interval", [FrontierClient(Redis.from_url(url), KEYS, self.node_id)]
        )
        self.released: list[str] = []
        self.heard: list[str] = []  # releases and writes, in order
        self.shared: list[tuple[list[str], list[str]]] = []  # what writes recorded, found

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        return asyncio.ensure_future(coro)

    async def guarded(self, op: Callable[[], Awaitable[Any]]) -> Any:
        return await op()

    def refuse(self, reason: FrontierRefused) -> None:
        raise AssertionError(reason)

    def new_work(self) -> None:
        pass

    def release(self, lease_id: str) -> None:
        self.released.append(lease_id)
        self.heard.append(f"release {lease_id}")

    def wrote(self) -> None:
        self.heard.append("wrote")

    def top_up(self) -> tuple[LeaseAsk, Callable[[list[Lease] | None], None]] | None:
        return None

    def recorded(self, epoch: str, new: list[str], known: list[str]) -> None:
        assert epoch == self.epoch
        self.shared.append((new, known))


def writer_for(url: str, interval: float) -> tuple[TurnWriter, Owner, StatsCollector]:
    stats = get_crawler().stats
    assert stats is not None
    owner = Owner(url)
    return TurnWriter(owner, stats, DedupReport(stats, DedupConfig()), interval), owner, stats


def link(name: str) -> NewRequest:
    return NewRequest(fingerprint_of(name), 0.0, f'{{"url":"{name}"}}'.encode())


def test_requests_of_several_reactor_turns_go_in_one_write(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> int:
        writer, owner, stats = writer_for(redis_url, 0.3)
        writer.add_fresh([link("a")])
        await asyncio.sleep(0.05)  # later turns, within the interval
        writer.add_fresh([link("b")], waiter="lease-1")
        await asyncio.sleep(0.05)
        assert queued(redis_client, KEYS) == 0  # still gathering
        await asyncio.sleep(0.4)
        await owner.client.parts[0].aclose()
        return int(stats.get_value("frontier/writes", 0))

    assert run(scenario()) == 1
    assert queued(redis_client, KEYS) == 2


def test_a_dry_buffers_lease_and_a_waiting_caller_send_the_write_at_once(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> tuple[list[Lease] | None, list[str]]:
        writer, owner, _ = writer_for(redis_url, 30.0)
        leases: asyncio.Future[list[Lease] | None] = asyncio.get_running_loop().create_future()
        writer.add_fresh([link("a"), link("b")])
        # the node's buffer ran dry (idle_ms set): its lease rides on this write, now
        assert writer.carry_lease(LeaseAsk(8, 60_000, "c1", idle_ms=500), leases.set_result)
        got = await asyncio.wait_for(leases, 5)
        writer.add_fresh([link("c")], waiter="lease-1")
        await asyncio.wait_for(writer.flushed(), 5)  # a caller waits: no 30 s of gathering
        await owner.client.parts[0].aclose()
        return got, owner.released

    got, released = run(scenario())
    assert got is not None and [lease.body for lease in got] == [b'{"url":"a"}', b'{"url":"b"}']
    assert released == ["lease-1"]
    assert queued(redis_client, KEYS) == 1


def test_the_owner_hears_what_a_write_recorded_and_what_it_found(redis_url: str) -> None:
    """What the seen feed shares: fingerprints recorded, those found recorded already, not a
    dont_filter request's (it has none)."""

    async def scenario() -> list[tuple[list[str], list[str]]]:
        writer, owner, _ = writer_for(redis_url, 0.0)
        writer.add_fresh([link("a")])
        await asyncio.wait_for(writer.flushed(), 5)
        seed = NewRequest(fingerprint_of("s"), 0.0, b'{"url":"s"}', force=True)
        writer.add_fresh([link("a"), link("b"), NewRequest("", 0.0, b'{"url":"c"}'), seed])
        await asyncio.wait_for(writer.flushed(), 5)
        await owner.client.parts[0].aclose()
        return owner.shared

    a, b, s = fingerprint_of("a"), fingerprint_of("b"), fingerprint_of("s")
    # a seed forced in may have been recorded long before: it goes with those found
    assert run(scenario()) == [([a], []), ([b], [a, s])]


def test_a_write_during_which_the_epoch_changed_tells_nothing(redis_url: str) -> None:
    """Its fingerprints may be in a Redis the frontier no longer has (a purge, a loss)."""

    class Moving(Owner):
        async def guarded(self, op: Callable[[], Awaitable[Any]]) -> Any:
            result = await op()
            self.epoch = "e2"  # the heartbeat adopted another epoch while the write ran
            return result

    async def scenario() -> list[tuple[list[str], list[str]]]:
        stats = get_crawler().stats
        assert stats is not None
        owner = Moving(redis_url)
        writer = TurnWriter(owner, stats, DedupReport(stats, DedupConfig()), 0.0)
        writer.add_fresh([link("a")])
        await asyncio.wait_for(writer.flushed(), 5)
        await owner.client.parts[0].aclose()
        return owner.shared

    assert run(scenario()) == []


def test_the_owner_hears_of_each_write_once_its_leases_are_released(redis_url: str) -> None:
    """The scheduler looks then whether it holds anything still: a node that does not closes
    on idle at once, not at the engine's next 5 s heartbeat."""

    async def scenario() -> list[str]:
        writer, owner, _ = writer_for(redis_url, 0.0)
        writer.add_fresh([link("a")], waiter="lease-1")
        await asyncio.wait_for(writer.flushed(), 5)
        writer.add_fresh([link("b")])
        await asyncio.wait_for(writer.flushed(), 5)
        await owner.client.parts[0].aclose()
        return owner.heard

    assert run(scenario()) == ["release lease-1", "wrote", "wrote"]


@pytest.mark.parametrize("value", ["-0.1", "2"])
def test_a_write_interval_out_of_range_is_refused_at_start(value: str) -> None:
    given = {"REDIS_URL": "redis://127.0.0.1:6379", "FRONTIER_WRITE_INTERVAL": value}
    settings = Settings({**resolve_settings({}), **given})
    with pytest.raises(ValueError, match=rf"FRONTIER_WRITE_INTERVAL={float(value)} must be 0-1"):
        FrontierSettings.from_settings(settings)


def test_settled_leases_whose_write_gave_up_are_counted(redis_url: str) -> None:
    """At a stop with Redis away, a write gives up: the node said 'Could not return 4 leases'
    while 21 were left (the settled ones in that write were not counted)."""

    class Away(Owner):
        async def guarded(self, op: Callable[[], Awaitable[Any]]) -> Any:
            raise GaveUp("redis away at the stop")

    async def scenario() -> tuple[int, int]:
        stats = get_crawler().stats
        assert stats is not None
        owner = Away(redis_url)
        writer = TurnWriter(owner, stats, DedupReport(stats, DedupConfig()), 0.0)
        for n in range(3):
            writer.add_settled(LeaseState(f"lease-{n}", b"{}", holds=0, callback_done=True))
        # given back at the stop, not fetched: the close ERROR said every one of them would
        # be fetched again (an audit: 16 said, none fetched twice)
        given_back = LeaseState("lease-3", b"{}", holds=0, callback_done=True)
        given_back.requeue_reason = "frontier/requeued/stopped"
        writer.add_settled(given_back)
        with contextlib.suppress(GaveUp):
            await asyncio.wait_for(writer.flushed(), 5)
        await owner.client.parts[0].aclose()
        return writer.unwritten, writer.unwritten_fetched

    assert run(scenario()) == (4, 3)


def test_a_write_that_fails_for_no_outage_stops_the_node(redis_url: str) -> None:
    """A write raising what no outage rule knew (redis-py's ClusterError while a slot moved,
    before it was one) dropped its new requests and settled leases and left their holds
    taken: the node held its leases for ever, renewed by its heartbeat, and never ended (an
    audit: 2 nodes hung, 5-8 pages never crawled). The node stops, refused; its leases expire
    and go back to the queue."""

    class Failing(Owner):
        reasons: list[FrontierRefused] = []  # noqa: RUF012 - one scenario

        async def guarded(self, op: Callable[[], Awaitable[Any]]) -> Any:
            raise RuntimeError("a bug in the write")

        def refuse(self, reason: FrontierRefused) -> None:
            self.reasons.append(reason)

    async def scenario() -> list[FrontierRefused]:
        stats = get_crawler().stats
        assert stats is not None
        owner = Failing(redis_url)
        writer = TurnWriter(owner, stats, DedupReport(stats, DedupConfig()), 0.0)
        writer.add_settled(LeaseState("lease-0", b"{}", holds=0, callback_done=True))
        await asyncio.wait_for(writer.flushed(), 5)
        await owner.client.parts[0].aclose()
        return owner.reasons

    (reason,) = run(scenario())
    assert reason.finish_reason == "frontier_write_failed"
    assert "RuntimeError: a bug in the write" in str(reason)
