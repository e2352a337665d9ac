"""A node's heartbeat loop after Redis was away: it takes no live node's leases."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

import pytest
import redis
import redis.asyncio

from crawler.frontier.client import Heartbeat
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.lease_keeper import LeaseKeeper, Timing
from crawler.frontier.node_run import NodeRun
from crawler.redis_outage import OutageGuard
from tests.frontier_state import Counts, Quiet


class Beats:
    """A frontier whose heartbeats fail while ``away`` and record the reclaim limit asked."""

    def __init__(self) -> None:
        self.away = False
        self.limits: list[int] = []
        self.lost_writes = asyncio.Event()

    async def open_epoch(self) -> str:
        return "e"

    async def heartbeat(self, held: list[str], **kwargs: Any) -> Heartbeat:
        if self.away:
            raise redis.exceptions.ConnectionError("Redis is away")
        self.limits.append(kwargs["reclaim_limit"])
        return Heartbeat(0, 0, (), "e", 0)


def beating(lease_timeout: float) -> tuple[Beats, Counts, LeaseKeeper]:
    """A keeper beating every 50 ms on ``Beats`` for a node that holds nothing."""
    beats, counts = Beats(), Counts()
    timing = Timing(lease_timeout=lease_timeout, heartbeat_interval=0.05, reclaim_batch=10)
    frontier: Any = beats
    holder: Any = Quiet()
    guard = OutageGuard("t", lambda _: None)
    run = NodeRun(redis.asyncio.Redis(), FrontierKeys.for_spider("t"), "n", 0.05)  # unclaimed
    return beats, counts, LeaseKeeper(frontier, holder, guard, counts, timing, node_run=run)


def test_back_from_an_outage_a_node_reclaims_nothing_for_a_lease_timeout() -> None:
    """Every node's leases looked expired after the outage (Redis's clock ran on); the others'
    beats, up to a heartbeat interval later, extend theirs: until then none is taken."""
    beats, _counts, keeper = beating(lease_timeout=0.4)
    timing = keeper.timing

    async def scenario() -> None:
        loop = asyncio.ensure_future(keeper.run())
        await asyncio.sleep(0.2)
        assert beats.limits and set(beats.limits) == {10}  # beating: reclaiming
        beats.away, outage = True, len(beats.limits)
        await asyncio.sleep(0.3)  # longer than half a lease timeout
        beats.away = False
        back = time.monotonic()
        await asyncio.sleep(0.8)
        loop.cancel()
        after = beats.limits[outage:]
        assert after[0] == 0  # the first beats back leave expired leases alone
        grace = round(timing.lease_timeout / timing.heartbeat_interval) - 2
        assert set(after[:grace]) == {0}, after
        assert after[-1] == 10, (after, time.monotonic() - back)  # then dead nodes' come back

    asyncio.run(scenario())


def test_a_blocked_event_loop_is_named(caplog: pytest.LogCaptureFixture) -> None:
    """A callback that blocks the reactor (time.sleep, a synchronous HTTP call) longer than
    the lease timeout lost the node's leases to other nodes, which fetched the page again and
    blocked in turn: an endless re-crawl, with only the leases' warnings to go by."""
    _beats, counts, keeper = beating(lease_timeout=0.4)

    async def scenario() -> None:
        loop = asyncio.ensure_future(keeper.run())
        await asyncio.sleep(0.2)
        assert counts.counter["frontier/loop_blocked"] == 0
        time.sleep(0.5)  # a callback that blocks
        await asyncio.sleep(0.2)
        loop.cancel()

    with caplog.at_level(logging.ERROR, logger="crawler.frontier.lease_keeper"):
        asyncio.run(scenario())
    assert counts.counter["frontier/loop_blocked"] == 1
    assert re.search(r"The event loop was blocked for 0\.[5-9]s", caplog.text), caplog.text
    assert "FRONTIER_LEASE_TIMEOUT" in caplog.text


def test_an_outage_longer_than_a_lease_timeout_pauses_leasing_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The pause was only looked at when the node asked to lease, which it does not while its
    write waits out the outage: a 90 s outage (60 s lease timeout) never said it."""
    beats, counts, keeper = beating(lease_timeout=0.3)

    async def scenario() -> None:
        loop = asyncio.ensure_future(keeper.run())
        await asyncio.sleep(0.1)
        beats.away = True
        await asyncio.sleep(0.6)
        assert counts.counter["frontier/leasing_paused"] == 1
        beats.away = False
        await asyncio.sleep(0.2)
        loop.cancel()

    with caplog.at_level(logging.WARNING, logger="crawler.frontier.lease_keeper"):
        asyncio.run(scenario())
    assert "leasing paused" in caplog.text
    assert "leasing resumed" in caplog.text
