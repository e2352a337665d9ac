"""Nodes that find the queue empty get a share of the links the busy nodes write.

A write leases right after it enqueues, in the same step; without sharing, on a crawl whose
links come slower than the nodes fetch them, the writing nodes took every new link and an
idle node, asking every ``FRONTIER_IDLE_POLL``, found the queue empty each time.
"""

from __future__ import annotations

import asyncio

import redis
from redis.asyncio import Redis

from crawler.frontier.client import Finish, FrontierClient, LeaseAsk, NewRequest
from crawler.frontier.keys import FrontierKeys
from tests.aio import run
from tests.frontier_state import fingerprint_of, queued

KEYS = FrontierKeys.for_spider("sharing")
IDLE_MS = 500  # the waiting node's FRONTIER_IDLE_POLL


def client_for(url: str, node: str) -> FrontierClient:
    return FrontierClient(Redis.from_url(url), KEYS, node)


def links(*names: str) -> list[NewRequest]:
    return [NewRequest(fingerprint_of(name), 0.0, f'{{"url":"{name}"}}'.encode()) for name in names]


def test_a_write_leaves_a_waiting_node_its_share_of_the_links_it_adds(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> tuple[int, int, int, int]:
        busy, idle = client_for(redis_url, "busy"), client_for(redis_url, "idle")
        (root,) = (
            await busy.complete_many([], links("root"), lease=LeaseAsk(1, 60_000, "b0"))
        ).leases
        # the idle node's buffer ran dry and the queue is empty: it waits for work
        assert await idle.lease(8, 60_000, "i0", idle_ms=IDLE_MS) == []
        # the busy node, its buffer down to half, settles its page and refills in the same write
        write = await busy.complete_many(
            [Finish(root.id, "done")], links("a", "b", "c", "d"), lease=LeaseAsk(4, 60_000, "b1")
        )
        left = queued(redis_client, KEYS)
        shared = await idle.lease(8, 60_000, "i1", idle_ms=IDLE_MS)
        await busy.aclose()
        await idle.aclose()
        return write.added, len(write.leases), left, len(shared)

    added, carried, left, shared = run(scenario())
    assert (added, carried, left, shared) == (4, 2, 2, 2)  # two nodes: half each
    assert redis_client.zcard(KEYS.waiting) == 0  # the idle node found work: no longer waiting


def test_with_no_node_waiting_a_write_leases_all_it_asks(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> int:
        busy = client_for(redis_url, "busy")
        write = await busy.complete_many([], links("a", "b", "c"), lease=LeaseAsk(4, 60_000, "b0"))
        await busy.aclose()
        return len(write.leases)

    assert run(scenario()) == 3
    assert queued(redis_client, KEYS) == 0


def test_a_node_stops_waiting_when_its_polls_stop(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> tuple[int, int]:
        busy, idle = client_for(redis_url, "busy"), client_for(redis_url, "idle")
        assert await idle.lease(8, 60_000, "i0", idle_ms=100) == []
        await asyncio.sleep(0.4)  # three polls missed: the node is gone, or busy elsewhere
        write = await busy.complete_many([], links("a", "b"), lease=LeaseAsk(4, 60_000, "b0"))
        await busy.aclose()
        await idle.aclose()
        return len(write.leases), queued(redis_client, KEYS)

    assert run(scenario()) == (2, 0)
    assert not redis_client.exists(KEYS.waiting)  # the key expired with its last entry


def test_nodes_waiting_for_work_split_what_is_queued(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> list[int]:
        nodes = [client_for(redis_url, f"n{i}") for i in range(3)]
        for i, node in enumerate(nodes):
            assert await node.lease(8, 60_000, f"w{i}", idle_ms=IDLE_MS) == []
        writer = client_for(redis_url, "writer")
        await writer.complete_many([], links(*"abcdef"))
        taken = [
            len(await node.lease(8, 60_000, f"t{i}", idle_ms=IDLE_MS))
            for i, node in enumerate(nodes)
        ]
        for node in [*nodes, writer]:
            await node.aclose()
        return taken

    # the first asks while the other two wait: a third of six; then half of four; then all
    assert run(scenario()) == [2, 2, 2]
    assert queued(redis_client, KEYS) == 0
