"""A frontier stored by the version before the queue's lists: refused by nodes, moved by
``crawler migrate``, then crawled as any other."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import orjson
import pytest
import redis
from redis.asyncio import Redis as AsyncRedis

from crawler.demo.nodes import REPO_ROOT
from crawler.frontier.client import Finish, FrontierClient
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.layout import OldLayout
from crawler.frontier.partitioned import PartitionedFrontier
from tests.frontier_state import fingerprint_of, queue_entries, queued

KEYS = FrontierKeys.for_spider("pages")


def migrate(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return crawler_cli(redis_url, "migrate", "pages", *args)


def crawler_cli(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args, "--redis", redis_url],
        cwd=REPO_ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def body(name: str) -> bytes:
    return orjson.dumps({"url": f"http://h/{name}"})


def old_frontier(client: redis.Redis) -> None:
    """What the version before wrote: queue ids by score (-priority, ties by id), the JSON
    by id, lease records '<node>\\t<score>', a JSON nothing refers to, hex fingerprints."""
    client.zadd(KEYS.legacy_queue, {"000000000003": -0.0, "000000000001": -5.0})
    client.zadd(KEYS.legacy_queue, {"000000000004": 0.0, "000000000009": 0.0})  # 9: no JSON
    client.hset(
        KEYS.legacy_data,
        mapping={
            "000000000001": body("high"),
            "000000000003": body("first"),
            "000000000004": body("second"),
            "000000000005": body("leased"),
            "000000000007": body("orphan"),
        },
    )
    client.zadd(KEYS.leases, {"000000000005": 1, "000000000006": 1})  # expired long ago
    client.hset(KEYS.inflight, mapping={"000000000005": "gone\t-2.0", "000000000006": "gone\t0"})
    client.set(KEYS.seq, 9)
    client.sadd(KEYS.legacy_dupefilter, *(fingerprint_of(name) for name in ("a", "b", "c")))


def test_a_node_refuses_a_frontier_of_the_layout_before(
    redis_url: str, redis_client: redis.Redis
) -> None:
    old_frontier(redis_client)

    async def claim() -> None:
        client = FrontierClient(AsyncRedis.from_url(redis_url), KEYS, "n1")
        try:
            await PartitionedFrontier("pages", [client]).claim()
        finally:
            await client.aclose()

    with pytest.raises(OldLayout) as refused:
        asyncio.run(claim())
    assert refused.value.stat == "layout"
    assert refused.value.finish_reason == "frontier_layout_old"
    assert "run `crawler migrate pages` once" in str(refused.value)


def test_migrate_moves_queue_and_leases_then_nodes_crawl_them(
    redis_url: str, redis_client: redis.Redis
) -> None:
    old_frontier(redis_client)
    status = orjson.loads(crawler_cli(redis_url, "status", "pages", "--json").stdout)
    assert status[0]["state"] == "old_layout"  # not "finished": nodes refuse it
    assert "run `crawler migrate pages`" in crawler_cli(redis_url, "status", "pages").stdout
    redis_client.zadd(KEYS.nodes, {"live-node": 1e15})  # beating (server time far ahead)
    refused = migrate(redis_url)
    assert refused.returncode == 1
    assert "1 nodes of 'pages' are live (live-node): stop them first" in refused.stderr
    redis_client.delete(KEYS.nodes)

    result = migrate(redis_url, "--json")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout) == {
        "spider": "pages",
        "keys": [KEYS.legacy_queue, KEYS.legacy_data, KEYS.legacy_dupefilter],
        "queued": 3,
        "leases": 1,
        "dropped": 3,  # queued id 9 without JSON, lease 6 without JSON, orphan JSON 7
        "fingerprints": 3,
    }
    assert queue_entries(redis_client, KEYS) == [
        (5, body("high")),
        (0, body("first")),
        (0, body("second")),
    ]
    assert redis_client.hgetall(KEYS.inflight) == {
        b"000000000005": b"gone\t-2\t" + body("leased")  # score -2: priority 2
    }
    assert not redis_client.exists(KEYS.legacy_queue, KEYS.legacy_data, KEYS.legacy_dupefilter)
    binary = {bytes.fromhex(fingerprint_of(name))[:12] for name in ("a", "b", "c")}
    assert redis_client.smembers(KEYS.dupefilter) == binary  # as the exact dedup keeps them
    assert "Nothing to migrate" in migrate(redis_url).stdout

    async def crawl() -> list[bytes]:
        client = FrontierClient(AsyncRedis.from_url(redis_url), KEYS, "n1")
        try:
            await PartitionedFrontier("pages", [client]).claim()  # admitted now
            beat = await client.heartbeat([], 60_000, 60_000, 10, await client.open_epoch())
            assert beat.reclaimed == 1  # the dead node's migrated lease, back in the queue
            leases = await client.lease(10, 60_000)
            await client.complete_many([Finish(lease.id, "done") for lease in leases], [])
            return [lease.body for lease in leases]
        finally:
            await client.aclose()

    assert asyncio.run(crawl()) == [body("high"), body("leased"), body("first"), body("second")]
    assert queued(redis_client, KEYS) == 0
