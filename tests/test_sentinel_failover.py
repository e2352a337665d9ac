"""A planned Sentinel failover (``SENTINEL FAILOVER``): a node's connections follow the new
master as soon as the sentinels announce it, not when the old master turns replica (about
10 s later, the writes of those seconds lost). Each test has its own master, replica and
sentinel: a failover changes which server is the master."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio

from crawler import redis_master_watch
from crawler.demo.site import Site
from crawler.devservices import LocalSentinel, RedisSentinelConfig, free_port
from crawler.devservices.redis_sentinel import SERVICE
from crawler.redis_connection import async_client, sync_client
from crawler.redis_master_watch import (
    FailoverFollower,
    HoldingPool,
    Switch,
    follow_master,
    parsed_switch,
    service_of_event,
)
from crawler.redis_url import RedisConfig
from tests.aio import run
from tests.cluster import crawl_site_once

KEY = "{failover}:written"


@pytest.fixture
def sentinel_with_replica(tmp_path: Path) -> Iterator[LocalSentinel]:
    setup = LocalSentinel(
        RedisSentinelConfig(
            master_port=free_port(),
            sentinel_port=free_port(),
            data_dir=tmp_path,
            replica_port=free_port(),
        )
    )
    setup.start()
    try:
        yield setup
    finally:
        setup.stop()


def _server(setup: LocalSentinel, port: int | None) -> redis.Redis:
    assert port is not None
    return redis.Redis(host=setup.config.host, port=port, decode_responses=True)


def _role(client: redis.Redis) -> str:
    return str(client.info("replication")["role"])


def test_the_switch_message_is_read() -> None:
    assert parsed_switch(b"crawler 127.0.0.1 7001 127.0.0.1 7002") == Switch(
        "crawler", ("127.0.0.1", 7001), ("127.0.0.1", 7002)
    )
    for damaged in (b"", b"crawler 127.0.0.1 7001", b"crawler a b c d", "x 1 2 3 4 5"):
        assert parsed_switch(damaged) is None
    assert service_of_event(b"master crawler 127.0.0.1 7001") == "crawler"
    assert service_of_event("slave 127.0.0.1:7002 127.0.0.1 7002 @ crawler 127.0.0.1 7001") == (
        "crawler"
    )
    assert service_of_event(b"1") is None
    assert service_of_event(b"slave 127.0.0.1:7002 127.0.0.1 7002 @") is None


BEGUN = ("+try-failover", b"master crawler 127.0.0.1 1")


async def _answers_within(seconds: float, client: redis.asyncio.Redis) -> bool:
    try:
        await asyncio.wait_for(client.ping(), seconds)
    except TimeoutError:
        return False
    return True


@pytest.mark.parametrize(
    "ended",
    [
        ("-failover-abort-no-good-slave", b"master crawler 127.0.0.1 1"),
        ("+failover-end-for-timeout", b"master crawler 127.0.0.1 1"),
    ],
)
def test_commands_wait_from_the_failover_s_start_to_its_end(
    redis_sentinel_url: str, ended: tuple[str, bytes]
) -> None:
    """Held from ``+try-failover``; a failover given up lets them go on. Another service's
    messages change nothing."""

    async def scenario() -> None:
        client = async_client(redis_sentinel_url)
        assert isinstance(client, redis.asyncio.Redis)
        assert isinstance(client.connection_pool, HoldingPool)
        follower = FailoverFollower("crawler", client.connection_pool, lambda _: None)
        try:
            await follower.heard("+try-failover", b"master other 127.0.0.1 1")
            assert await _answers_within(1.0, client)
            await follower.heard(*BEGUN)
            assert not await _answers_within(0.5, client)
            waiting = asyncio.ensure_future(client.ping())
            await follower.heard(ended[0], ended[1].replace(b"crawler", b"other"))
            await asyncio.sleep(0.2)
            assert not waiting.done()
            await follower.heard(*ended)
            assert await asyncio.wait_for(waiting, 5.0)
            # two sentinels try (an unplanned failover); the one that gives up ends no hold
            await follower.heard(*BEGUN, "s1:26379")
            await follower.heard(*BEGUN, "s2:26379")
            await follower.heard(*ended, "s2:26379")
            assert not await _answers_within(0.5, client)
            await follower.heard(*ended, "s1:26379")
            assert await _answers_within(5.0, client)
        finally:
            follower.release()
            await client.aclose()

    run(scenario())


def test_commands_are_held_for_hold_max_at_most(
    redis_sentinel_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(redis_master_watch, "HOLD_MAX", 0.5)

    async def scenario() -> None:
        client = async_client(redis_sentinel_url)
        assert isinstance(client, redis.asyncio.Redis)
        assert isinstance(client.connection_pool, HoldingPool)
        follower = FailoverFollower("crawler", client.connection_pool, lambda _: None)
        try:
            await follower.heard(*BEGUN)
            assert await asyncio.wait_for(client.ping(), 5.0)
        finally:
            follower.release()
            await client.aclose()

    run(scenario())
    assert "Redis Sentinel began a failover of 'crawler'" in caplog.text
    assert "named no new master of 'crawler' within 0.5s: Redis commands go on" in caplog.text


def test_no_acknowledged_write_is_lost_in_a_planned_failover(
    sentinel_with_replica: LocalSentinel,
) -> None:
    """A client increments a counter without a pause through ``SENTINEL FAILOVER``: once the
    old master is a replica of the new one, the counter is at least the number of increments
    answered. redis-py alone goes on writing to the old master for about 10 s after the
    replica was promoted, and those increments vanish when it becomes a replica; moving at
    ``+switch-master`` alone still loses those of the third of a second before it."""
    setup = sentinel_with_replica
    config = RedisConfig.from_url(setup.url)
    old, new = _server(setup, setup.config.master_port), _server(setup, setup.config.replica_port)
    sentinel = _server(setup, setup.config.sentinel_port)

    async def scenario() -> tuple[int, list[Switch]]:
        client = async_client(config)
        assert isinstance(client, redis.asyncio.Redis)
        switches: list[Switch] = []
        following = asyncio.ensure_future(follow_master(config, client, switches.append))
        answered = 0
        try:
            while not any(int(c["sub"]) for c in sentinel.client_list()):
                await asyncio.sleep(0.05)  # until the watch has subscribed
            sentinel.sentinel_failover(config.service)
            deadline = time.monotonic() + 30
            while _role(old) == "master":
                assert time.monotonic() < deadline, "the old master is still a master after 30 s"
                with contextlib.suppress(redis.ConnectionError):  # not answered: not counted
                    await client.incr(KEY)
                    answered += 1
            return answered, switches
        finally:
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
            await client.aclose()

    try:
        answered, switches = run(scenario())
        assert [(s.old[1], s.new[1]) for s in switches] == [
            (setup.config.master_port, setup.config.replica_port)
        ]
        assert int(new.get(KEY) or 0) >= answered
    finally:
        for client in (old, new, sentinel):
            client.close()


def test_a_sentinel_that_is_away_is_listened_to_once_it_answers(tmp_path: Path) -> None:
    """The watch waits for a sentinel that does not answer yet, and never raises."""
    port = free_port()
    config = RedisConfig.from_url(f"redis+sentinel://127.0.0.1:{port}/crawler/0")

    async def scenario() -> None:
        client = async_client(config)
        assert isinstance(client, redis.asyncio.Redis)
        following = asyncio.ensure_future(follow_master(config, client, lambda _: None))
        await asyncio.sleep(1.5)
        assert not following.done()
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)
        await client.aclose()

    run(scenario())


@pytest.mark.slow
@pytest.mark.parametrize("failover", ["planned", "master_killed"])
def test_nodes_crawl_through_a_failover_fetching_every_page_once(
    sentinel_with_replica: LocalSentinel, tmp_path: Path, failover: str
) -> None:
    """Two nodes crawl while the operator runs ``SENTINEL FAILOVER`` (or the master is
    killed): they hold their commands through it and go on with the new master, no write of
    theirs lost (no ``writes_lost``, so nothing crawled again) and every page fetched once."""
    setup = sentinel_with_replica
    sentinel = _server(setup, setup.config.sentinel_port)
    settings = {
        "CRAWLER_STANDALONE_FEED": "",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
        "KAFKA_TOPIC_TEMPLATE": f"items-{uuid.uuid4().hex[:8]}-{{spider}}",
        # slow enough to crawl on past the moment the old master is made a replica (~10 s)
        "CONCURRENT_REQUESTS": "2",
    }
    env = {"REDIS_URL": setup.url, "KAFKA_BOOTSTRAP_SERVERS": ""}

    def fail_over_midway(site: Site) -> None:
        deadline = time.monotonic() + 60
        while sum(site.hits.values()) < site.pages // 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        if failover == "planned":
            sentinel.sentinel_failover(SERVICE)
        else:
            setup.master.stop()

    with Site(200, delay=0.3) as site:
        failing_over = threading.Thread(target=fail_over_midway, args=(site,))
        failing_over.start()
        try:
            client = sync_client(setup.url)
            node_logs = crawl_site_once(
                site,
                lambda url: client.lpush("pages:start_urls", url),
                nodes=2,
                workdir=tmp_path / "nodes",
                env=env,
                settings=settings,
            )
            client.close()
        finally:
            failing_over.join()
            sentinel.close()
    assert node_logs.count("Redis Sentinel began a failover of 'crawler'") == 2, node_logs
    assert node_logs.count("'redis/master_switched': 1") == 2, node_logs
    assert "writes_lost" not in node_logs
