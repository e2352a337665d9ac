"""Fault injection helpers: run 3 nodes on a slow local site, interrupt them, count what arrived."""

from __future__ import annotations

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
from crawler.kafka.reader import read_topic
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
VICTIM_WINDOW = CONCURRENCY + PREFETCH  # requests a killed node can hold


@pytest.fixture
def slow_site() -> Iterator[Site]:
    with Site(1000, delay=0.1) as site:
        yield site


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
    interrupt: Callable[[list[subprocess.Popen[bytes]]], list[int]],
    timeout: float = 300,
    settings: dict[str, str] | None = None,
) -> tuple[Counter[str], list[int | None], list[int]]:
    """Run 3 nodes; ``interrupt`` acts mid-crawl and returns the nodes it killed."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    given = {**FAST_LEASES, "KAFKA_TOPIC_TEMPLATE": topic_template, **(settings or {})}
    with running_nodes(3, workdir=workdir, env=env, settings=given) as nodes:
        client = redis.Redis.from_url(redis_url)
        client.lpush("pages:start_urls", site.url(0))
        client.close()
        killed = interrupt(nodes)
        codes = wait_for_exit(nodes, timeout=timeout)
    topic = topic_template.format(spider="pages")
    messages = read_topic(kafka_bootstrap, topic, expected=site.pages, timeout=90)
    urls = Counter(orjson.loads(m.value)["url"] for m in messages)
    print(f"pages={site.pages} received={len(urls)} messages={len(messages)}")
    return urls, codes, killed


class Pages(Protocol):
    def all_urls(self) -> set[str]: ...


def assert_nothing_lost(urls: Counter[str], site: Pages, allowed_duplicates: int) -> None:
    missing = site.all_urls() - set(urls)
    assert missing == set(), f"{len(missing)} pages never reached Kafka"
    duplicates = sum(urls.values()) - len(urls)
    print(f"missing=0 duplicates={duplicates} allowed={allowed_duplicates}")
    assert duplicates <= allowed_duplicates


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis server (AOF on) this test may restart."""
    config = RedisServerConfig(port=free_port(), data_dir=tmp_path / "redis", appendonly=True)
    with started(RedisServer(config), "redis-server") as server:
        yield server
