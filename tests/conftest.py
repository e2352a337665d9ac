"""Shared fixtures: real Redis and Kafka (one each per test session) and a local site."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator

import pytest
import redis

from crawler.demo.site import Site
from tests.services import kafka_service, redis_service

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


@pytest.fixture
def redis_url(redis_base_url: str) -> Iterator[str]:
    """A Redis URL on a database of its own, empty at the start of the test."""
    url = redis_base_url.rsplit("/", 1)[0] + f"/{next(_databases)}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    try:
        yield url
    finally:
        client.close()


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
