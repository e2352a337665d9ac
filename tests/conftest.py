"""Shared fixtures: real Redis and Kafka (one each per test session) and a local site.

Also one Redis Cluster, one Sentinel setup and one TLS Redis per session (started on first
use); their per-test fixtures hand out an empty database 0.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import redis

from crawler.demo.site import Site
from crawler.devservices import KafkaBroker
from crawler.redis_connection import sync_client
from tests.faults import own_redis, slow_site
from tests.services import (
    kafka_service,
    own_kafka_broker,
    redis_cluster_service,
    redis_sentinel_service,
    redis_service,
    redis_tls_service,
)

__all__ = ["own_redis", "slow_site"]  # fault-injection fixtures, for every test module

# Databases 1..15 are handed out in turn to tests that crawl; each is flushed first.
_databases = itertools.cycle(range(1, 16))


@pytest.fixture(scope="session")
def redis_base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_service(tmp_path_factory.mktemp("redis")) as (url, _server):
        yield url


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka_service(tmp_path_factory.mktemp("kafka")) as (bootstrap, _broker):
        yield bootstrap


def _empty_database(redis_base_url: str) -> str:
    """The URL of the next database in turn, flushed."""
    url = redis_base_url.rsplit("/", 1)[0] + f"/{next(_databases)}"
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()
    return url


@pytest.fixture
def redis_url(redis_base_url: str) -> str:
    """A Redis URL on a database of its own, empty at the start of the test."""
    return _empty_database(redis_base_url)


@pytest.fixture
def other_redis_url(redis_base_url: str) -> str:
    """A second database of the test's own (another than ``redis_url``'s), empty at its start."""
    return _empty_database(redis_base_url)


@pytest.fixture(scope="module")
def module_redis_url(redis_base_url: str) -> str:
    """Like ``redis_url``, for state a whole module shares (one crawl, many tests)."""
    return _empty_database(redis_base_url)


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def topic_template() -> str:
    """A Kafka topic template unique to the test."""
    return f"test-{uuid.uuid4().hex[:10]}-{{spider}}-items"


@pytest.fixture
def site_500() -> Iterator[Site]:
    with Site(500) as site:
        yield site


def _flushed(url: str) -> str:
    """``url`` after emptying its database 0 (every master of a cluster)."""
    client = sync_client(url)
    try:
        client.flushdb()
    finally:
        client.close()
    return url


def _session_url(
    factory: pytest.TempPathFactory,
    name: str,
    service: Callable[[Path], AbstractContextManager[str]],
) -> Iterator[str]:
    with service(factory.mktemp(name)) as url:
        yield url


@pytest.fixture(scope="session")
def redis_cluster_base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _session_url(tmp_path_factory, "redis-cluster", redis_cluster_service)


@pytest.fixture(scope="session")
def redis_sentinel_base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _session_url(tmp_path_factory, "redis-sentinel", redis_sentinel_service)


@pytest.fixture(scope="session")
def redis_tls_base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _session_url(tmp_path_factory, "redis-tls", redis_tls_service)


@pytest.fixture
def redis_cluster_url(redis_cluster_base_url: str) -> str:
    """``redis+cluster://`` of a 3-master Redis Cluster, every master empty."""
    return _flushed(redis_cluster_base_url)


@pytest.fixture
def redis_sentinel_url(redis_sentinel_base_url: str) -> str:
    """``redis+sentinel://host:port/<service>/0``, the master's database 0 empty."""
    return _flushed(redis_sentinel_base_url)


@pytest.fixture
def redis_tls_url(redis_tls_base_url: str) -> str:
    """``rediss://`` with CA and client certificate, database 0 empty."""
    return _flushed(redis_tls_base_url)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The conformance matrix (tests/test_user_code.py) as a table, when it ran."""
    from tests.user_crawl import CONFORMANCE_ROWS

    if CONFORMANCE_ROWS:
        terminalreporter.section("conformance matrix: 2-node cluster vs standalone Scrapy")
        terminalreporter.line(
            "| cell | items (cluster / standalone) | requests left in Redis | seconds |"
        )
        terminalreporter.line("|---|---|---|---|")
        for row in CONFORMANCE_ROWS:
            terminalreporter.line(row)


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A Kafka broker of one test module's own, which its tests may pause or stop."""
    with own_kafka_broker(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker


@pytest.fixture
def module_kafka(module_broker: KafkaBroker) -> Iterator[KafkaBroker]:
    """The module's own broker; running and answering again after each test."""
    yield module_broker
    if module_broker.pid is None:
        module_broker.start()
    else:
        module_broker.resume()
