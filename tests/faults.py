"""Fault injection helpers: run 3 nodes on a slow local site, interrupt them, count what arrived."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import orjson
import pytest
import redis

from crawler.demo.site import Site
from crawler.devservices import RedisServer, RedisServerConfig, free_port
from crawler.frontier import codec
from crawler.frontier.inspect import lease_body
from crawler.frontier.partitions import spider_parts
from crawler.kafka.reader import read_topic
from crawler.lua import text
from tests.cluster import running_nodes, wait_for_exit
from tests.services import started

CONCURRENCY = 8
PREFETCH = 4
FAST_LEASES = {
    "FRONTIER_LEASE_TIMEOUT": "4",
    "FRONTIER_HEARTBEAT_INTERVAL": "1",
    "FRONTIER_PREFETCH": str(PREFETCH),
    "CONCURRENT_REQUESTS": str(CONCURRENCY),
    "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
}
IN_FLIGHT = CONCURRENCY + PREFETCH  # requests a node downloads or holds prefetched, at most


@pytest.fixture
def slow_site() -> Iterator[Site]:
    with Site(1000, delay=0.1) as site:
        yield site


def sigkill(node: subprocess.Popen[bytes], node_id: str, redis_url: str, spider: str) -> set[str]:
    """SIGKILL ``node`` and return the URLs of the pages it held leased: the only pages it may
    have made duplicates of (a page whose items reached Kafka before its completion was written
    is crawled again by another node; one whose items did not is crawled once). More than
    ``IN_FLIGHT`` of them: the pages whose items wait for Kafka's acknowledgement, or whose
    completion waits to be written, are leased too (CI: 23). Read at once, before the leases
    expire and are reclaimed."""
    node.send_signal(signal.SIGKILL)
    node.wait(timeout=10)
    client = redis.Redis.from_url(redis_url)
    try:
        records = [
            record
            for keys in spider_parts(client, spider)
            for record in client.hvals(keys.inflight)
            if text(record).split("\t", 1)[0] == node_id
        ]
    finally:
        client.close()
    return {orjson.loads(codec.plain(lease_body(record) or b"{}"))["url"] for record in records}


def wait_for_hits(site: Site, hits: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while sum(site.hits.values()) < hits:
        assert time.monotonic() < deadline, f"site saw {sum(site.hits.values())} of {hits} hits"
        time.sleep(0.05)


def crawl_with_interruptions(
    site: Site,
    *,
    redis_url: str,
    kafka_bootstrap: str,
    topic_template: str,
    workdir: Path,
    interrupt: Callable[[list[subprocess.Popen[bytes]]], Bound],
    timeout: float = 300,
    settings: dict[str, str] | None = None,
) -> tuple[Counter[str], list[int | None], Bound]:
    """Run 3 nodes; ``interrupt`` acts mid-crawl and returns what bounds the duplicates."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    given = {**FAST_LEASES, "KAFKA_TOPIC_TEMPLATE": topic_template, **(settings or {})}
    with running_nodes(3, workdir=workdir, env=env, settings=given) as nodes:
        client = redis.Redis.from_url(redis_url)
        client.lpush("pages:start_urls", site.url(0))
        client.close()
        bound = interrupt(nodes)
        codes = wait_for_exit(nodes, timeout=timeout)
    topic = topic_template.format(spider="pages")
    messages = read_topic(kafka_bootstrap, topic, expected=site.pages, timeout=90)
    urls = Counter(orjson.loads(m.value)["url"] for m in messages)
    print(f"pages={site.pages} received={len(urls)} messages={len(messages)}")
    return urls, codes, bound


class Pages(Protocol):
    def all_urls(self) -> set[str]: ...


# duplicates allowed: a count, or sets of pages each of which may come once more (the pages a
# killed node held leased; those a spider asks for with dont_filter, as plain Scrapy fetches)
Bound = int | list[set[str]]


def assert_nothing_lost(urls: Counter[str], site: Pages, allowed: Bound) -> None:
    """Every page reached Kafka, and at most ``allowed`` came again."""
    missing = site.all_urls() - set(urls)
    assert missing == set(), f"{len(missing)} pages never reached Kafka"
    duplicates = sum(urls.values()) - len(urls)
    if isinstance(allowed, int):
        print(f"missing=0 duplicates={duplicates} allowed={allowed}")
        assert duplicates <= allowed
        return
    held = set().union(*allowed)
    print(f"missing=0 duplicates={duplicates} may come again={[len(s) for s in allowed]}")
    twice = {url for url, count in urls.items() if count > 1}
    assert twice <= held, f"pages that may not came twice: {sorted(twice - held)}"
    assert duplicates <= sum(len(pages) for pages in allowed)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis server (AOF on) this test may restart."""
    config = RedisServerConfig(port=free_port(), data_dir=tmp_path / "redis", appendonly=True)
    with started(RedisServer(config), "redis-server") as server:
        yield server
