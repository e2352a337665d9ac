"""The frontier loses nothing: SIGKILLed nodes, a Redis restart, a graceful stop, purge."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis

from crawler.demo.nodes import REPO_ROOT
from crawler.demo.site import Site
from crawler.devservices import RedisServer
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.partitions import spider_parts
from crawler.frontier.start_claim import start_key
from tests.cluster import logs, running_nodes, wait_for_exit, wait_for_log
from tests.faults import (
    FAST_LEASES,
    IN_FLIGHT,
    assert_nothing_lost,
    crawl_with_interruptions,
    sigkill,
    wait_for_hits,
)


def crawl_killing_node_0(
    site: Site,
    after_hits: int,
    *,
    redis_url: str,
    kafka_bootstrap: str,
    topic_template: str,
    workdir: Path,
    settings: dict[str, str] | None = None,
) -> None:
    """Three nodes crawl ``site``; node-0 is SIGKILLed once the site has seen ``after_hits``
    hits; the others finish the crawl, every page in Kafka, duplicates only of its leases."""

    def kill_one(nodes: list[subprocess.Popen[bytes]]) -> list[set[str]]:
        wait_for_hits(site, after_hits)
        return [sigkill(nodes[0], "node-0", redis_url, "pages")]

    urls, codes, held = crawl_with_interruptions(
        site,
        redis_url=redis_url,
        kafka_bootstrap=kafka_bootstrap,
        topic_template=topic_template,
        workdir=workdir,
        interrupt=kill_one,
        settings=settings,
    )
    assert codes == [-signal.SIGKILL, 0, 0], logs(workdir)
    assert_nothing_lost(urls, site, held)


def test_sigkill_one_node_loses_nothing(
    redis_url: str, kafka_bootstrap: str, topic_template: str, slow_site: Site, tmp_path: Path
) -> None:
    crawl_killing_node_0(
        slow_site,
        250,
        redis_url=redis_url,
        kafka_bootstrap=kafka_bootstrap,
        topic_template=topic_template,
        workdir=tmp_path,
    )
    assert (
        "frontier/reclaimed"
        in (tmp_path / "node-1.log").read_text() + (tmp_path / "node-2.log").read_text()
    )


@pytest.mark.slow
def test_sigkill_of_a_node_spilling_and_reading_back_the_backlog_loses_nothing(
    redis_url: str, kafka_bootstrap: str, topic_template: str, slow_site: Site, tmp_path: Path
) -> None:
    """With FRONTIER_QUEUE_MAX small, requests go through the Kafka backlog all crawl long; a
    node killed among its spills and read-backs (its partitions go to another node once
    Kafka's group sees it gone) makes no page lost, and the crawl ends (the backlog's count
    comes back to 0: neither too low, ending it early, nor stuck above, keeping it waiting)."""
    crawl_killing_node_0(
        slow_site,
        300,
        redis_url=redis_url,
        kafka_bootstrap=kafka_bootstrap,
        topic_template=topic_template,
        workdir=tmp_path,
        settings={
            "FRONTIER_PARTITIONS": "2",
            "FRONTIER_QUEUE_MAX": "20",
            "FRONTIER_SPILL_INTERVAL": "0.2",
            "FRONTIER_BACKLOG_TOPIC": topic_template.replace("-items", "-backlog"),
        },
    )
    said = logs(tmp_path, tail=0)
    assert "'frontier/spilled'" in said and "'frontier/refilled'" in said
    client = redis.Redis.from_url(redis_url)
    try:
        left = [int(client.get(keys.backlog) or 0) for keys in spider_parts(client, "pages")]
    finally:
        client.close()
    assert left == [0, 0]


@pytest.mark.slow
def test_two_sigkills_at_different_times_lose_nothing(
    redis_url: str, kafka_bootstrap: str, topic_template: str, slow_site: Site, tmp_path: Path
) -> None:
    def kill_two(nodes: list[subprocess.Popen[bytes]]) -> list[set[str]]:
        wait_for_hits(slow_site, 200)
        first = sigkill(nodes[0], "node-0", redis_url, "pages")
        wait_for_hits(slow_site, 600)
        return [first, sigkill(nodes[1], "node-1", redis_url, "pages")]

    urls, codes, held = crawl_with_interruptions(
        slow_site,
        redis_url=redis_url,
        kafka_bootstrap=kafka_bootstrap,
        topic_template=topic_template,
        workdir=tmp_path,
        interrupt=kill_two,
    )
    assert codes == [-signal.SIGKILL, -signal.SIGKILL, 0], logs(tmp_path)
    assert_nothing_lost(urls, slow_site, held)


@pytest.mark.slow
def test_redis_restart_mid_crawl_loses_nothing(
    own_redis: RedisServer,
    kafka_bootstrap: str,
    topic_template: str,
    slow_site: Site,
    tmp_path: Path,
) -> None:
    def restart_redis(nodes: list[subprocess.Popen[bytes]]) -> int:
        wait_for_hits(slow_site, 300)
        own_redis.stop()
        time.sleep(2)
        own_redis.start()
        return 3 * IN_FLIGHT  # every node's pages in flight when their calls failed

    urls, codes, in_flight = crawl_with_interruptions(
        slow_site,
        redis_url=own_redis.url,
        kafka_bootstrap=kafka_bootstrap,
        topic_template=topic_template,
        workdir=tmp_path / "nodes",
        interrupt=restart_redis,
    )
    assert codes == [0, 0, 0], logs(tmp_path / "nodes")
    assert_nothing_lost(urls, slow_site, in_flight)
    node_log = (tmp_path / "nodes" / "node-0.log").read_text()
    assert "Redis unavailable" in node_log
    assert "Redis is back" in node_log


def test_graceful_stop_returns_leases_at_once(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    feeds = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    with Site(60, delay=0.5) as site:
        settings = {**FAST_LEASES, "FRONTIER_LEASE_TIMEOUT": "600", "CONCURRENT_REQUESTS": "4"}
        first = tmp_path / "first"
        first.mkdir()
        with running_nodes(
            1,
            workdir=first,
            env=env,
            settings={**settings, "CRAWLER_STANDALONE_FEED": str(feeds[0])},
        ) as nodes:
            redis_client.lpush("pages:start_urls", site.url(0))
            wait_for_hits(site, 10)
            assert redis_client.zcard("{pages}:leases") > 0
            nodes[0].send_signal(signal.SIGTERM)
            assert wait_for_exit(nodes, timeout=60) == [0], logs(first)
        # Returned at once, not after the 600 s lease.
        assert redis_client.zcard("{pages}:leases") == 0
        assert int(redis_client.get("{pages}:queue:count") or 0) > 0
        assert "unfinished leases to the queue" in (first / "node-0.log").read_text()

        second = tmp_path / "second"
        second.mkdir()
        with running_nodes(
            1,
            workdir=second,
            env=env,
            settings={**settings, "CRAWLER_STANDALONE_FEED": str(feeds[1])},
        ) as nodes:
            assert wait_for_exit(nodes, timeout=120) == [0], logs(second)
    urls = {
        orjson.loads(line)["url"]
        for feed in feeds
        if feed.exists()
        for line in feed.read_bytes().splitlines()
    }
    assert urls == site.all_urls()


def test_purge_asks_for_confirmation(redis_url: str, redis_client: redis.Redis) -> None:
    redis_client.lpush("pages:start_urls", "http://example.invalid/")
    redis_client.sadd("{pages}:dupefilter:exact", "f")
    redis_client.set("{other}:seq", 1)
    command = [sys.executable, "-m", "scrapy", "purge", "pages"]
    env = {"REDIS_URL": redis_url, "PATH": "/usr/bin:/bin"}

    refused = subprocess.run(
        command, cwd=REPO_ROOT, env=env, input="no\n", capture_output=True, text=True, check=False
    )
    assert refused.returncode == 1
    assert "Not purged" in refused.stdout
    assert redis_client.exists("{pages}:dupefilter:exact")

    done = subprocess.run(
        [*command, "--yes", "--keep-seeds"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not redis_client.exists("{pages}:dupefilter:exact")
    assert redis_client.llen("pages:start_urls") == 1
    assert redis_client.exists("{other}:seq")


START_ITEMS_KEY = start_key(FrontierKeys.for_spider("start_items"), "default")


@contextlib.contextmanager
def start_items_node(
    redis_url: str, workdir: Path, site: Site, settings: dict[str, str], **arguments: str
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """One node of the ``start_items`` spider (its start items held by a slow pipeline)."""
    base = {
        "SPIDER_MODULES": "tests.spiders",
        "ITEM_PIPELINES": '{"tests.spiders.start_items.SlowStartItemsPipeline": 300}',
    }
    with running_nodes(
        1,
        workdir=workdir,
        env={"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""},
        settings={**base, **settings},
        spider="start_items",
        arguments={"site": site.base_url, **arguments},
    ) as nodes:
        yield nodes


def test_items_start_yields_are_written_again_when_their_node_dies_before_they_settle(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """The start claim is finished once start()'s items are settled too, not only its
    requests: a node killed while they wait in the pipelines leaves the start to another."""
    fast = {
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
        "FRONTIER_LEASE_TIMEOUT": "4",
        "FRONTIER_HEARTBEAT_INTERVAL": "1",
    }
    feed = tmp_path / "items.jsonl"
    with Site(3) as site:
        slow = {**fast, "START_ITEMS_DELAY": "60"}
        with start_items_node(redis_url, tmp_path / "first", site, slow) as nodes:
            assert wait_for_log(tmp_path / "first" / "node-0.log", "Writing the start", 60)
            time.sleep(2)  # its request is in the frontier, its items in the pipeline
            assert redis_client.hget(START_ITEMS_KEY, "state") == b"writing"
            nodes[0].send_signal(signal.SIGKILL)
            nodes[0].wait(timeout=30)
        again = {**fast, "START_ITEMS_DELAY": "0", "CRAWLER_STANDALONE_FEED": str(feed)}
        with start_items_node(redis_url, tmp_path / "second", site, again) as nodes:
            assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path / "second")
    urls = sorted(orjson.loads(line)["url"] for line in feed.read_bytes().splitlines())
    assert [url for url in urls if url.startswith("start:")] == ["start:0", "start:1", "start:2"]


def test_a_node_stopped_while_writing_the_start_gives_its_claim_up(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Another node runs start() at once, not after the claim expires."""
    settings = {"START_ITEMS_DELAY": "0", "FRONTIER_LEASE_TIMEOUT": "60"}
    with (
        Site(3) as site,
        start_items_node(redis_url, tmp_path, site, settings, pause="60") as nodes,
    ):
        assert wait_for_log(tmp_path / "node-0.log", "Writing the start requests", 60)
        time.sleep(1)
        assert redis_client.hget(START_ITEMS_KEY, "state") == b"writing"
        nodes[0].send_signal(signal.SIGTERM)
        assert wait_for_exit(nodes, timeout=60) == [0], logs(tmp_path)
    assert not redis_client.exists(START_ITEMS_KEY)
