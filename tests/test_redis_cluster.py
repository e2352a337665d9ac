"""Every component on a real 3-master Redis Cluster (``redis_cluster_url``, tests/conftest.py):
frontier, politeness, sessions, privacy key, and two nodes crawling into Kafka with seeds from
``redis-cli -c``, then ledger, status and purge over every master."""

from __future__ import annotations

import asyncio
import hashlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis
from redis.crc import key_slot

from crawler.demo.nodes import REPO_ROOT
from crawler.demo.site import Site
from crawler.extensions.ledger_layout import LedgerKeys
from crawler.frontier.admin import discover_spiders
from crawler.frontier.client import FrontierClient, NewRequest
from crawler.frontier.dedup import DedupConfig, DedupMode
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.refusal import ScrapyRedisQueueLeft
from crawler.politeness.limiter import Penalty, Rate, RedisLimiter
from crawler.redis_connection import async_client, sync_client
from crawler.redis_url import RedisConfig
from crawler.sessions import (
    Cookie,
    CookieCipher,
    Health,
    RedisLoginLease,
    RedisSessionStore,
    Session,
    SessionSettings,
)
from crawler.zhihu.privacy import shared_privacy_key
from tests.cluster import crawl_into_kafka, logs, running_nodes, wait_for_exit
from tests.frontier_state import fingerprint_of

SPIDERS = ("a", "b", "c")  # their hash tags fall on three different masters
SITES = ("site-a:1", "site-b:2", "site-c:3")
PENALTY = Penalty(cooldown=1.0, max_cooldown=10.0, min_factor=0.1, recovery=0.5, strike_window=60)


@pytest.fixture
def cluster(redis_cluster_url: str) -> Iterator[redis.RedisCluster]:
    client = sync_client(redis_cluster_url)
    assert isinstance(client, redis.RedisCluster)
    try:
        yield client
    finally:
        client.close()


def master_of(cluster: redis.RedisCluster, key: str) -> str:
    name: str = cluster.get_node_from_key(key).name  # type: ignore[no-untyped-call]
    return name


def keys_on(cluster: redis.RedisCluster, node: str) -> set[str]:
    """Every key stored on one master (asked directly, not through the cluster client)."""
    host, port = node.rsplit(":", 1)
    direct = redis.Redis(host=host, port=int(port), decode_responses=True)
    try:
        return set(direct.scan_iter(count=1000))
    finally:
        direct.close()


def test_each_spider_keeps_its_keys_in_one_slot(cluster: redis.RedisCluster) -> None:
    assert len({master_of(cluster, f"{{{spider}}}") for spider in SPIDERS}) == 3
    for spider in SPIDERS:
        ledger = LedgerKeys.for_crawl(spider, "c1")
        keys = [*FrontierKeys.for_spider(spider).all(), ledger.total, ledger.minute(29_000_000)]
        assert {key_slot(key.encode()) for key in keys} == {key_slot(spider.encode())}


def request(name: str, priority: int = 0) -> NewRequest:
    return NewRequest(
        fingerprint=fingerprint_of(name), score=-float(priority), body=f'{{"u":"{name}"}}'.encode()
    )


def test_the_advice_to_clear_a_scrapy_redis_queue_works_on_the_cluster(
    redis_cluster_url: str, cluster: redis.RedisCluster
) -> None:
    """The refusal of a node whose spider's scrapy-redis queue is left named one ``redis-cli
    del`` of the queue and the dupefilter, which a Cluster refuses (CROSSSLOT: two slots)
    (an audit). Each command it names, run as it says, deletes its key."""
    queue, dupefilter = "u_redis:requests", "u_redis:dupefilter"
    assert key_slot(queue.encode()) != key_slot(dupefilter.encode())
    cluster.zadd(queue, {b"\x80pickled": 0})
    cluster.sadd(dupefilter, "0" * 40)
    said = str(ScrapyRedisQueueLeft("u_redis", queue, 1, dupefilter))
    assert "redis-cli -c" in said
    host, port = RedisConfig.from_url(redis_cluster_url).hosts[0]
    for command in re.findall(r"`redis-cli (del [^`]+)`", said):
        subprocess.run(
            ["redis-cli", "-c", "-h", host, "-p", str(port), *command.split()],
            check=True,
            capture_output=True,
        )
    assert cluster.exists(queue, dupefilter) == 0


def test_frontier_of_spiders_on_three_masters(
    redis_cluster_url: str, cluster: redis.RedisCluster
) -> None:
    async def spider_round(spider: str, client: FrontierClient, other: FrontierClient) -> None:
        added = await client.complete(None, "done", [request("x"), request("y", 5), request("x")])
        assert (added.added, added.duplicates) == (2, 1)
        lost = await client.lease(2, 200)  # never extended: "other" reclaims them
        assert [lease.body for lease in lost] == [b'{"u":"y"}', b'{"u":"x"}']
        await asyncio.sleep(0.3)
        beat = await other.heartbeat([], 60_000, 60_000, 10, epoch="")
        assert (beat.reclaimed, await other.pending()) == (2, 2)
        first, second = await other.lease(2, 60_000)
        done = await other.complete(first.id, "done", [request("z"), request("y")])
        assert (done.status, done.added, done.duplicates) == ("done", 1, 1)
        assert (await client.complete(second.id, "done", [])).status == "stolen"
        assert await other.release([second.id]) == 1
        assert await other.pending() == 2

    async def scenario() -> None:
        shared = async_client(redis_cluster_url, max_connections=4)
        rounds = []
        for spider in SPIDERS:
            keys = FrontierKeys.for_spider(spider)
            rounds.append(
                spider_round(
                    spider,
                    FrontierClient(shared, keys, f"{spider}-dead"),
                    FrontierClient(shared, keys, f"{spider}-live"),
                )
            )
        try:
            await asyncio.gather(*rounds)
        finally:
            await shared.aclose()

    asyncio.run(scenario())
    for spider in SPIDERS:
        keys = FrontierKeys.for_spider(spider)
        on_master = keys_on(cluster, master_of(cluster, keys.queue_levels))
        assert {keys.queue_levels, keys.queue_count, keys.dupefilter, keys.seq} <= on_master
        assert not any(key.startswith("{") and key[1:2] != spider for key in on_master)
    assert discover_spiders(cluster) == list(SPIDERS)  # SCAN went to every master


def test_bloom_filter_on_the_cluster(redis_cluster_url: str, cluster: redis.RedisCluster) -> None:
    """The Bloom script declares its chunk keys: it runs on each spider's master, grown."""
    config = DedupConfig(DedupMode.BLOOM, capacity=10)  # 60 URLs: 3 slices, several chunks
    children = [
        NewRequest(hashlib.sha1(f"u{i}".encode()).hexdigest(), 0.0, b"{}") for i in range(60)
    ]

    async def scenario() -> list[tuple[int, int, int]]:
        shared = async_client(redis_cluster_url, max_connections=4)
        found = []
        try:
            for spider in SPIDERS:
                client = FrontierClient(shared, FrontierKeys.for_spider(spider), "n", config)
                first = await client.complete(None, "done", children)
                again = await client.complete(None, "done", children)
                found.append((first.added, again.added, (await client.bloom_state()).slices))
        finally:
            await shared.aclose()
        return found

    results = asyncio.run(scenario())
    assert all(added > 55 and again == 0 and slices == 3 for added, again, slices in results)
    for spider in SPIDERS:
        keys = FrontierKeys.for_spider(spider)
        on_master = keys_on(cluster, master_of(cluster, keys.queue_levels))
        assert {keys.bloom_meta, *keys.bloom_chunks[:3]} <= on_master


def test_politeness_on_the_cluster(redis_cluster_url: str, cluster: redis.RedisCluster) -> None:
    template = "politeness:{%(site)s}"
    assert len({master_of(cluster, template % {"site": site}) for site in SITES}) > 1

    async def scenario() -> None:
        client = async_client(redis_cluster_url, max_connections=8)
        try:
            await limit(RedisLimiter(client, template))
        finally:
            await client.aclose()

    async def slots(limiter: RedisLimiter, site: str) -> list[float]:
        """When each of 4 requests may go (call time + wait): 2/s, a burst of 2.

        A slot read this way is early by the call's trip to Redis, so the site's master is
        reached once before (the first connection to it took 0.1 s on a busy machine) and
        the slots are 0.5 s apart, far more than a trip's jitter.
        """
        assert await limiter.cooling(site) == 0.0
        times = []
        for _ in range(4):
            called = time.monotonic()
            times.append(called + await limiter.reserve(site, Rate(2.0, burst=2), PENALTY))
        return times

    async def limit(limiter: RedisLimiter) -> None:
        for site in SITES:  # each site its own limit, whichever master holds it
            first, second, third, fourth = await slots(limiter, site)
            assert second - first < 0.2  # the burst goes at once
            assert third - first == pytest.approx(0.5, abs=0.2)
            assert fourth - third == pytest.approx(0.5, abs=0.2)
        assert await limiter.penalize(SITES[0], 3.0, PENALTY) >= 3.0
        assert await limiter.cooling(SITES[0]) > 2.5
        assert await limiter.cooling(SITES[1]) == 0.0

    asyncio.run(scenario())


def test_sessions_on_the_cluster(redis_cluster_url: str) -> None:
    cookies = (Cookie("z_c0", "value"), Cookie("lang", "en"))

    async def scenario() -> None:
        client = async_client(redis_cluster_url)
        try:
            await use(
                RedisSessionStore(client, SessionSettings(), CookieCipher(None)),
                RedisLoginLease(client, SessionSettings()),
            )
        finally:
            await client.aclose()

    async def use(store: RedisSessionStore, lease: RedisLoginLease) -> None:
        for platform in SPIDERS:  # one platform per master
            for account in ("x", "y"):
                await store.put(Session(platform, account, cookies), 600)
            # acquire.lua reads session hashes it is not given as keys: same slot only
            got = [await store.acquire(platform) for _ in range(3)]
            assert [s.account if s else None for s in got] == ["x", "y", "x"]
            assert await store.mark(platform, "y", Health.RISKY, "captcha", 100) is Health.RISKY
            again = await store.acquire(platform)
            assert again is not None and again.account == "x"
            merged = await store.merge_cookies(platform, "x", [Cookie("d_c0", "new")])
            assert merged is not None and merged.cookie_dict()["d_c0"] == "new"
            assert sorted(s.account for s in await store.list(platform)) == ["x", "y"]
            assert await store.invalidate(platform, "x")
            token = await lease.acquire(platform, "x")
            assert token is not None and await lease.acquire(platform, "x") is None
            assert await lease.renew(platform, "x", token)
            assert await lease.release(platform, "x", token)

    asyncio.run(scenario())


def test_the_privacy_key_is_shared_on_the_cluster(redis_cluster_url: str) -> None:
    first = shared_privacy_key(redis_cluster_url)
    assert shared_privacy_key(redis_cluster_url) == first
    assert len(first) == 64


def crawler_cli(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args, "--redis", redis_url],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_two_nodes_crawl_the_cluster(
    redis_cluster_url: str,
    cluster: redis.RedisCluster,
    kafka_bootstrap: str,
    topic_template: str,
    tmp_path: Path,
) -> None:
    # redis-cli -c against a master that does not hold the seed list: it follows MOVED.
    seed_master = master_of(cluster, "pages:start_urls")
    config = RedisConfig.from_url(redis_cluster_url)
    host, port = next((h, p) for h, p in config.hosts if f"{h}:{p}" != seed_master)

    def seed() -> None:
        deadline = time.monotonic() + 60
        while cluster.zcard("{pages}:nodes") < 2 and time.monotonic() < deadline:
            time.sleep(0.1)  # both nodes heartbeat before the first seed: both get work
        redis_cli = ["redis-cli", "-c", "-h", host, "-p", str(port)]
        subprocess.run(
            [*redis_cli, "lpush", "pages:start_urls", site.url(0), "ftp://nope/"],
            check=True,
            capture_output=True,
            timeout=10,
        )

    settings = {
        "ROBOTSTXT_OBEY": "True",
        "LEDGER_INTERVAL": "1",
        "CRAWLER_CRAWL_ID": "cl",
        "CONCURRENT_REQUESTS": "4",  # small nodes: neither crawls the site alone
        "FRONTIER_PREFETCH": "2",
    }
    with Site(60, delay=0.1, robots="User-agent: *\nAllow: /\n") as site:
        messages = crawl_into_kafka(
            2,
            redis_url=redis_cluster_url,
            kafka_bootstrap=kafka_bootstrap,
            topic_template=topic_template,
            site=site,
            workdir=tmp_path,
            seed=seed,
            settings=settings,
        )
        netloc = site.base_url.split("://", 1)[1]
    assert {message.headers["node_id"] for message in messages} == {b"node-0", b"node-1"}
    assert cluster.exists(f"robots:{{{netloc}}}", f"politeness:{{{netloc}}}") == 2

    status = crawler_cli(redis_cluster_url, "status", "--json", "--crawl", "cl")
    assert status.returncode == 0, status.stderr
    (row,) = orjson.loads(status.stdout)
    snapshot, totals = row["snapshot"], row["ledger"]["totals"]
    assert snapshot["spider"] == "pages"
    assert (snapshot["queued"], snapshot["leased"], snapshot["dedup"]) == (0, 0, 60)
    assert snapshot["invalid_by_reason"] == {"scheme": 1}
    assert [site["site"] for site in snapshot["politeness"]] == [netloc]
    assert (totals["done"], totals["seeded"], totals["invalid_seeds"]) == (60, 2, 1)

    purged = crawler_cli(redis_cluster_url, "purge", "pages", "--yes", "--json")
    assert purged.returncode == 0, purged.stderr
    deleted = orjson.loads(purged.stdout)["keys"]
    assert LedgerKeys.for_crawl("pages", "cl").total in deleted
    assert "pages:start_urls:invalid" in deleted
    left = {key.decode() for key in cluster.scan_iter(match="*pages*")}
    assert left == set()


@pytest.mark.parametrize("wrong", ["cluster_url_for_a_server", "server_url_for_a_cluster_node"])
def test_a_redis_url_of_the_other_topology_is_refused_at_start(
    wrong: str, redis_url: str, redis_cluster_url: str, tmp_path: Path
) -> None:
    """Refused as the node starts: every command failed (a node logged a traceback a second,
    for ever), or each key on another master answered MOVED (half the pages failed, and the
    crawl 'finished')."""
    if wrong == "cluster_url_for_a_server":
        host, port = RedisConfig.from_url(redis_url).hosts[0]
        url, said = f"redis+cluster://{host}:{port}", "names a Redis Cluster, but the server"
    else:
        host, port = RedisConfig.from_url(redis_cluster_url).hosts[0]
        url, said = f"redis://{host}:{port}/0", "is a node of a Redis Cluster"
    env = {"REDIS_URL": url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {"CRAWLER_STANDALONE_FEED": "", "METRICS_ENABLED": "False"}
    with running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes:
        assert wait_for_exit(nodes, timeout=30) == [1], logs(tmp_path)
    log = (tmp_path / "node-0.log").read_text()
    assert said in log
    assert "heartbeat" not in log and "Spider opened" not in log
