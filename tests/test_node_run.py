"""One running process per node id (``crawler.frontier.node_run``): a second live process of
an id is refused; a process restarted in place after a kill waits for the killed run's hold to
expire, then returns that run's leases at once."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest
import redis

from crawler.demo.site import Site
from crawler.frontier.keys import frontier_parts
from crawler.frontier.node_run import NodeIdInUse, NodeRun
from crawler.lua import text
from crawler.redis_connection import AsyncRedis
from tests.cluster import logs, running_nodes, wait_for_exit
from tests.test_partitions import frontier, page, run

BEAT = 0.2  # heartbeat interval of the runs here: their holds live 0.6 s


async def beating(node_run: NodeRun) -> None:
    while True:
        assert await node_run.beat() is None
        await asyncio.sleep(BEAT)


def test_a_second_live_process_of_a_node_id_is_refused(redis_url: str) -> None:
    async def scenario(r: AsyncRedis) -> None:
        keys = frontier_parts("runs", 1)[0]
        first, second = NodeRun(r, keys, "twin", BEAT), NodeRun(r, keys, "twin", BEAT)
        assert await first.claim() is False
        beats = asyncio.ensure_future(beating(first))
        try:
            with pytest.raises(NodeIdInUse, match="CRAWLER_NODE_ID=twin is in use"):
                await second.claim()
        finally:
            beats.cancel()
        assert await second.beat() is None  # it never held the id: it refreshes nothing
        await first.end()
        assert await second.claim() is False  # let go of: at once

    run(scenario, redis_url)


def test_a_killed_run_s_hold_expires_and_its_leases_return_at_once(redis_url: str) -> None:
    """A pod restarted in place keeps its name: the killed run's leases waited for
    FRONTIER_LEASE_TIMEOUT (an audit: 15 s of 15, 61 s instead of 22 for a small crawl)."""

    async def scenario(r: AsyncRedis) -> None:
        killed, other = frontier(r, "pod-0", 1, "runs"), frontier(r, "pod-1", 1, "runs")
        await other.complete_turn([page("a.test", f"/{n}") for n in range(6)], [])
        held = await killed.lease(4, 60_000, call="before-the-kill")
        kept = await other.lease(1, 60_000, call="the-other-node")
        keys = killed.keys
        dead = NodeRun(r, keys, "pod-0", BEAT)
        await dead.claim()  # then killed: it never beats again
        restarted = NodeRun(r, keys, "pod-0", BEAT)
        assert await restarted.claim() is True  # after waiting for the dead run's hold
        assert await restarted.take_back([keys]) == len(held) == 4
        scores = [await r.zscore(keys.leases, lease.id) for lease in (*held, *kept)]
        assert scores[:4] == [0.0] * 4  # expired now: the next heartbeat's reclaim returns them
        assert (scores[4] or 0) > 0  # another node's: untouched

    run(scenario, redis_url)


def test_a_killed_run_of_a_longer_heartbeat_is_waited_for_not_refused(redis_url: str) -> None:
    """The wait was this run's hold time: a run killed at FRONTIER_HEARTBEAT_INTERVAL=2,
    restarted at 0.2, was refused with the killed run's hold still 3 s from expiring."""

    async def scenario(r: AsyncRedis) -> None:
        keys = frontier_parts("runs", 1)[0]
        await NodeRun(r, keys, "pod-0", 3 * BEAT).claim()  # then killed
        assert await NodeRun(r, keys, "pod-0", BEAT).claim() is True

    run(scenario, redis_url)


def test_two_nodes_of_one_id_crawl_as_one_and_the_second_is_refused(
    redis_url: str, tmp_path: Path
) -> None:
    """A unit file copied to two machines with CRAWLER_NODE_ID in it: seeds lost (16 of 200
    when one was killed), start requests written twice, one node in status (an audit)."""
    feeds = [tmp_path / "items-0.jsonl", tmp_path / "items-1.jsonl"]
    with Site(30, delay=0.05) as site:
        env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
        settings = {"FRONTIER_HEARTBEAT_INTERVAL": "1", "MAX_IDLE_TIME_BEFORE_CLOSE": "2"}
        per_node = [
            {"CRAWLER_NODE_ID": "twin", "CRAWLER_STANDALONE_FEED": str(feed)} for feed in feeds
        ]
        with running_nodes(
            2, workdir=tmp_path, env=env, settings=settings, per_node=per_node
        ) as nodes:
            client = redis.Redis.from_url(redis_url)
            client.lpush("pages:start_urls", site.url(0))
            client.close()
            codes = wait_for_exit(nodes, timeout=120)
        assert sorted(map(str, codes)) == ["0", "1"], logs(tmp_path)
        urls = [
            orjson.loads(line)["url"]
            for feed in feeds
            if feed.exists()
            for line in feed.read_bytes().splitlines()
        ]
        assert sorted(urls) == sorted(site.all_urls())
    log = logs(tmp_path, tail=0)
    assert log.count("Node refused: CRAWLER_NODE_ID=twin is in use by another running") == 1
    assert "'frontier/refused/node_id': 1" in log


def held_by(client: redis.Redis, node: str) -> int:
    """Leases ``node`` holds now (its records in ``inflight``)."""
    prefix = f"{node}\t"
    return sum(text(record).startswith(prefix) for record in client.hvals("{pages}:inflight"))


def test_a_node_restarted_in_place_after_a_kill_returns_its_leases_at_once(
    redis_url: str, tmp_path: Path
) -> None:
    """With another node crawling: the restarted node leased while it waited for its id, and
    its take-back then expired those new leases too, which the other node reclaimed (a review:
    pages fetched twice, leases lost)."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "FRONTIER_HEARTBEAT_INTERVAL": "1",
        "FRONTIER_LEASE_TIMEOUT": "600",  # only the take-back can return them in time
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
        "CONCURRENT_REQUESTS": "4",
    }
    quiet = {**settings, "CRAWLER_STANDALONE_FEED": ""}
    with Site(80, delay=0.3) as site:
        client = redis.Redis.from_url(redis_url)
        other = {**quiet, "CRAWLER_NODE_ID": "other"}
        with running_nodes(1, workdir=tmp_path / "other", env=env, settings=other) as others:
            with running_nodes(1, workdir=tmp_path / "first", env=env, settings=quiet) as nodes:
                client.lpush("pages:start_urls", site.url(0))
                while held_by(client, "node-0") < 3:
                    pass
                nodes[0].send_signal(signal.SIGKILL)
                wait_for_exit(nodes, timeout=30)
            with running_nodes(1, workdir=tmp_path / "again", env=env, settings=quiet) as nodes:
                assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path / "again")
            assert wait_for_exit(others, timeout=120) == [0], logs(tmp_path / "other")
        client.close()
        # every page fetched (the killed run's items in its unflushed feed are gone with it)
        assert {site.base_url + path for path in site.hits} == site.all_urls()
    log = logs(tmp_path / "again", tail=0)
    # it said "Returned" for leases it only expired, which a heartbeat then returned and said
    # so again: counted twice (an audit)
    assert re.search(r"\d+ leases of an earlier run of node node-0 \(killed\) expire now", log)
    assert not re.search(r"Returned \d+ leases of an earlier run", log)
    assert "is held by run" in log  # it waited for the killed run's hold to expire
    assert "frontier/lease_lost" not in log  # no lease of its own was taken back


def test_a_node_waiting_for_its_id_leases_nothing_until_it_holds_it(
    redis_url: str, tmp_path: Path
) -> None:
    """A node whose id a killed run still held leased (and fetched) while it waited for that
    hold to expire: leases the take-back that follows the wait then expired as the killed
    run's (a review: reproduced at the unit level; here, with work queued before it starts)."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "FRONTIER_HEARTBEAT_INTERVAL": "1",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "1",
        "CRAWLER_STANDALONE_FEED": "",
    }
    hold = frontier_parts("pages", 1)[0].node_run("node-0")
    with Site(10) as site:
        host = site.base_url.removeprefix("http://")
        queued = [page(host, urlsplit(url).path) for url in sorted(site.all_urls())]
        run(lambda r: frontier(r, "seeder", 1, "pages").complete_turn(queued, []), redis_url)
        client = redis.Redis.from_url(redis_url)
        client.set(hold, "killedrun00 0", px=2500)  # a killed run's, 2.5 s left
        with running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes:
            while client.pttl(hold) > 0 and "killedrun00" in text(client.get(hold) or b""):
                assert not site.hits, "fetched while another run held its id"
                assert held_by(client, "node-0") == 0, "leased while another run held its id"
                time.sleep(0.02)
            assert wait_for_exit(nodes, timeout=60) == [0], logs(tmp_path)
        client.close()
    assert {site.base_url + path for path in site.hits} == site.all_urls()
    assert "is held by run killedrun00" in logs(tmp_path, tail=0)


def test_a_node_forced_to_stop_by_a_second_signal_exits_1(redis_url: str, tmp_path: Path) -> None:
    """A second SIGTERM forces Scrapy's unclean shutdown: no stats dump, no final ledger push,
    its leases held until they expire, and the node exited 0 as after a graceful stop, so a
    supervisor took it for done (an audit)."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {"CRAWLER_STANDALONE_FEED": "", "CONCURRENT_REQUESTS": "4"}
    with Site(80, delay=3.0) as site:  # downloads under way hold the graceful stop
        client = redis.Redis.from_url(redis_url)
        with running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes:
            client.lpush("pages:start_urls", site.url(0))
            deadline = time.monotonic() + 60
            while held_by(client, "node-0") < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)  # their downloads are under way
            nodes[0].send_signal(signal.SIGTERM)
            time.sleep(0.3)
            nodes[0].send_signal(signal.SIGTERM)
            assert wait_for_exit(nodes, timeout=60) == [1], logs(tmp_path)
        client.close()
    log = logs(tmp_path, tail=0)
    assert "forcing unclean shutdown" in log
    assert "The node stopped before its spider closed" in log
