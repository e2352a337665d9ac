"""Every Redis error class that means "not now" pauses the node and it resumes: nothing fails.

A Redis at ``maxmemory`` answers writes with ``-OOM``; one loading its data set with
``-LOADING``; a replica with ``-READONLY``; one running a long script with ``-BUSY``; one
that cannot persist with ``-MISCONF``; a failing-over cluster with ``-CLUSTERDOWN`` /
``-TRYAGAIN`` / ``-MASTERDOWN``. None of these is the request's fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest
import redis
import redis.asyncio
from redis.exceptions import (
    ClusterError,
    RedisClusterException,
    RedisClusterUnreachableError,
    ResponseError,
    SlotNotCoveredError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawler.cli.main import main
from crawler.demo.nodes import start_node, stop_node
from crawler.demo.site import Site
from crawler.devservices import RedisServer, RedisServerConfig, free_port
from crawler.redis_outage import WRITES_REFUSED, OutageGuard, outage_reason
from tests.cluster import logs, running_nodes, wait_for_exit, wait_for_log
from tests.faults import (
    FAST_LEASES,
    assert_nothing_lost,
    crawl_with_interruptions,
    wait_for_hits,
)

# Replies a real server sends; the script returns each as a Redis error reply.
FAIL_TWICE = """
local n = redis.call('INCR', KEYS[1])
if n <= 2 then return redis.error_reply(ARGV[1]) end
return n
"""

STARTUP = 5.0  # seconds a node takes to import Scrapy and open its spider here

OUTAGE_REPLIES = {
    "oom": "OOM command not allowed when used memory > 'maxmemory'.",
    "loading": "LOADING Redis is loading the dataset in memory",
    "readonly": "READONLY You can't write against a read only replica.",
    "busy": "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN.",
    "misconf": "MISCONF Redis is configured to save RDB snapshots, but it can't persist.",
    "clusterdown": "CLUSTERDOWN The cluster is down",
    "tryagain": "TRYAGAIN Multiple keys request during rehashing of slot",
    "masterdown": "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is 'no'.",
    "noreplicas": "NOREPLICAS Not enough good replicas to write.",
}


@pytest.mark.parametrize("reason", sorted(OUTAGE_REPLIES))
def test_each_outage_reply_pauses_then_resumes(
    reason: str, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    errors: list[str] = []
    guard = OutageGuard("frontier", errors.append, max_delay=0.05)

    async def run() -> int:
        client = redis.asyncio.Redis.from_url(redis_url)
        script = client.register_script(FAIL_TWICE)
        try:
            result: int = await guard.run(
                lambda: script(keys=["calls"], args=[OUTAGE_REPLIES[reason]])
            )
            return result
        finally:
            await client.aclose()

    with caplog.at_level(logging.WARNING, logger="crawler.redis_outage"):
        assert asyncio.run(run()) == 3
    assert errors == [reason, reason]
    paused = [r.getMessage() for r in caplog.records if "pausing" in r.getMessage()]
    assert len(paused) == 1 and f"({reason})" in paused[0], caplog.text
    assert any("Redis is back" in r.getMessage() for r in caplog.records), caplog.text


def test_a_command_error_is_not_an_outage(redis_url: str) -> None:
    guard = OutageGuard("frontier", lambda reason: None, max_delay=0.05)

    async def run() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        await client.set("text", "x")
        try:
            await guard.run(lambda: client.lpush("text", "y"))  # WRONGTYPE: a bug, not an outage
        finally:
            await client.aclose()

    with pytest.raises(ResponseError, match="WRONGTYPE"):
        asyncio.run(run())
    assert outage_reason(ResponseError("ERR unknown command 'FOO'")) is None
    assert outage_reason(ConnectionRefusedError()) == "connection"


def test_an_outage_is_timed_from_the_call_that_met_it(caplog: pytest.LogCaptureFixture) -> None:
    """An 8 s CLIENT PAUSE was said as 'Redis is back after 3.0s': the clock started when the
    call's 5 s socket timeout ended (an audit)."""
    calls = 0

    async def paused_then_back() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(0.4)  # the socket timeout
            raise RedisTimeoutError("Timeout reading from socket")
        return "ok"

    guard = OutageGuard("frontier", on_error=lambda reason: None)
    with caplog.at_level(logging.WARNING, logger="crawler.redis_outage"):
        assert asyncio.run(guard.run(paused_then_back)) == "ok"
    (back,) = [r.getMessage() for r in caplog.records if "is back after" in r.getMessage()]
    assert float(back.rsplit(" ", 1)[1].rstrip("s")) >= 0.4, back


def test_a_call_sent_before_an_outage_ended_times_the_next_from_that_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A call sent during one outage and failing just after it ended began the next at its
    sending: 'Redis is back after 30.7s', then in the same second 'unavailable' and 'is back
    after 4.6s' (an audit, a Redis Cluster master killed)."""
    guard = OutageGuard("politeness", on_error=lambda reason: None)
    sent = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="crawler.redis_outage"):
        guard.failed(RedisConnectionError("refused"))
        time.sleep(0.3)
        guard.succeeded()
        guard.failed(RedisTimeoutError("Timeout reading from socket"), began=sent)
        guard.succeeded()
    backs = [r.getMessage() for r in caplog.records if "is back after" in r.getMessage()]
    assert [float(back.rsplit(" ", 1)[1].rstrip("s")) < 0.3 for back in backs] == [False, True]


@pytest.mark.parametrize(
    ("reply", "ended_by_a_read"),
    [(OUTAGE_REPLIES[reason], reason not in WRITES_REFUSED) for reason in sorted(OUTAGE_REPLIES)]
    + [(None, True)],  # a connection refused
)
def test_a_read_ends_only_an_outage_in_which_redis_answered_no_reads(
    reply: str | None, ended_by_a_read: bool
) -> None:
    """At maxmemory, read-only, unable to persist or short of replicas, Redis still answers
    reads: a read that goes through says nothing of the writes while one is retried (the seed
    reader's idle check while its hold's refresh waits, a cookie jar's version while a write
    waits); once none is (given up, cancelled), a read ends the outage (a review: the
    component stayed "down" for ever, and its stop budget with it)."""
    failure = ConnectionRefusedError() if reply is None else ResponseError(reply)

    async def scenario() -> tuple[bool, bool, bool]:
        guard = OutageGuard("seeds", lambda reason: None, max_delay=0.01)
        answers = asyncio.Event()

        async def write() -> str:
            if not answers.is_set():
                raise failure
            return "written"

        writing = asyncio.ensure_future(guard.run(write))
        await asyncio.sleep(0.05)
        guard.succeeded(reads_only=True)  # a read went through while the write is retried
        after_read = guard.down
        answers.set()
        assert await writing == "written"
        after_write = guard.down
        answers.clear()
        given_up = asyncio.ensure_future(guard.run(write))
        await asyncio.sleep(0.05)
        given_up.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await given_up
        guard.succeeded(reads_only=True)
        return after_read, after_write, guard.down

    assert asyncio.run(scenario()) == (not ended_by_a_read, False, False)


def test_a_slot_that_keeps_moving_past_redis_py_s_retries_is_an_outage() -> None:
    """A slot moved by hand mid-crawl (MIGRATE key by key): redis-py's cluster client retries
    ASK and TRYAGAIN about 16 times, then raises ClusterError('TTL exhausted.'), which no
    guard took for an outage: each node dropped a frontier write (its leases held for ever,
    pages never crawled) and both hung (an audit, 3 runs of 3)."""
    assert outage_reason(ClusterError("TTL exhausted.")) == "tryagain"


@pytest.mark.slow
def test_a_cluster_no_node_of_which_answers_is_an_outage() -> None:
    """redis-py's cluster client raises its own exceptions, no ConnectionError: a few seconds
    with no cluster node reachable failed a download, killed the frontier's write (its pages'
    leases held for ever, pages never crawled) and its heartbeat (an audit), and a node started
    before its cluster answered never crawled."""
    unreachable = RedisClusterUnreachableError("Redis Cluster cannot be connected")
    assert outage_reason(unreachable) == "connection"
    assert outage_reason(SlotNotCoveredError('Slot "7" is not covered by the cluster.')) == (
        "clusterdown"
    )
    # deterministic cluster errors are bugs or settings, not outages
    assert outage_reason(RedisClusterException("all keys must map to the same key slot")) is None


def test_redis_at_maxmemory_for_20s_mid_crawl_pauses_and_loses_nothing(
    own_redis: RedisServer,
    kafka_bootstrap: str,
    topic_template: str,
    slow_site: Site,
    tmp_path: Path,
) -> None:
    """Every write answered ``-OOM`` for 20 s: the crawl pauses and resumes, no request fails."""
    admin = redis.Redis.from_url(own_redis.url)

    def fill_redis(nodes: list[subprocess.Popen[bytes]]) -> int:
        wait_for_hits(slow_site, 250)
        admin.config_set("maxmemory", "1")
        try:
            time.sleep(20)
        finally:
            admin.config_set("maxmemory", "0")
        return 0  # no duplicate

    try:
        urls, codes, _ = crawl_with_interruptions(
            slow_site,
            redis_url=own_redis.url,
            kafka_bootstrap=kafka_bootstrap,
            topic_template=topic_template,
            workdir=tmp_path / "nodes",
            interrupt=fill_redis,
            timeout=180,
            # Leases outlive the outage: nothing is reclaimed, so nothing is fetched twice (45 s
            # for 20 s: on a loaded machine 30 s was once too short for the nodes' last beats).
            settings={"FRONTIER_LEASE_TIMEOUT": "45", "FRONTIER_HEARTBEAT_INTERVAL": "2"},
        )
        failed = admin.hlen("{pages}:failed")
    finally:
        admin.config_set("maxmemory", "0")
        admin.close()
    node_logs = logs(tmp_path / "nodes")
    assert codes == [0, 0, 0], node_logs
    assert failed == 0, node_logs
    whole = logs(tmp_path / "nodes", tail=0)
    assert "OutOfMemoryError" not in whole  # no request failed, no task died
    assert "(oom); pausing" in whole
    assert_nothing_lost(urls, slow_site, 0)


def private_redis(
    tmp_path: Path, *, appendonly: bool
) -> tuple[RedisServer, dict[str, str], dict[str, str]]:
    """A Redis of this test's own (started: it may be stopped and restarted), with the nodes'
    environment and settings for it (fast leases, items to a feed in ``tmp_path``)."""
    server = RedisServer(
        RedisServerConfig(port=free_port(), data_dir=tmp_path / "redis", appendonly=appendonly)
    )
    server.start()
    env = {"REDIS_URL": server.url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {**FAST_LEASES, "CRAWLER_STANDALONE_FEED": str(tmp_path / "items-%(node_id)s.jsonl")}
    return server, env, settings


@pytest.mark.slow
def test_redis_restarted_without_persistence_is_reported_not_finished(
    kafka_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Redis loses all its data mid-crawl: the nodes notice (the frontier's epoch is gone),
    re-enqueue what they hold, record the incident, and ``crawler status`` shows the loss.
    Before, they finished "100% finished, 0 failed" with pages never crawled."""
    server, env, settings = private_redis(tmp_path, appendonly=False)
    try:
        with Site(600, delay=0.1) as site:
            with running_nodes(3, workdir=tmp_path / "nodes", env=env, settings=settings) as nodes:
                client = redis.Redis.from_url(server.url)
                client.lpush("pages:start_urls", site.url(0))
                wait_for_hits(site, 150)
                server.stop()  # no AOF, no RDB: everything is gone
                server.start()
                codes = wait_for_exit(nodes, timeout=180)
            incidents = [orjson.loads(r) for r in client.lrange("{pages}:incidents", 0, -1)]
            capsys.readouterr()
            assert main(["status", "pages", "--redis", server.url]) == 0
            status = capsys.readouterr().out
            client.close()
            fetched = len(site.hits)
    finally:
        server.stop()
    node_logs = logs(tmp_path / "nodes")
    print(f"pages=600 fetched={fetched} incidents={incidents}")
    # a Kubernetes Job or a systemd unit took a crawl that lost pages for done (an audit)
    assert codes == [1, 1, 1], node_logs
    assert "The crawl ended after the frontier lost its data 1 time(s)" in node_logs
    assert {incident["node"] for incident in incidents} == {"node-0", "node-1", "node-2"}
    assert sum(incident["requeued"] for incident in incidents) > 0  # work in flight kept
    for log in sorted((tmp_path / "nodes").glob("node-*.log")):  # anywhere, not only its tail
        assert "lost its data" in log.read_text(), node_logs
    assert "INCOMPLETE: frontier data lost" in status, status
    assert "re-enqueued the" in status, status


def test_a_forced_purge_resets_running_nodes_and_a_new_seed_is_crawled(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Purged under a live node, then seeded again: the node crawls the seed's site again.
    Before, its seen-cache still dropped the links (0 enqueued), and purge gave no warning."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        **FAST_LEASES,
        "MAX_IDLE_TIME_BEFORE_CLOSE": "0",
        "CRAWLER_STANDALONE_FEED": str(tmp_path / "items.jsonl"),
    }
    with (
        Site(20) as site,
        running_nodes(1, workdir=tmp_path / "nodes", env=env, settings=settings) as nodes,
    ):
        redis_client.lpush("pages:start_urls", site.url(0))
        wait_for_hits(site, 20)
        time.sleep(2)  # crawled: every page is in the dedup set and the node's seen-cache
        refused = main(["purge", "pages", "--yes", "--redis", redis_url])
        assert refused == 1
        assert main(["purge", "pages", "--yes", "--force", "--redis", redis_url]) == 0
        log = tmp_path / "nodes" / "node-0.log"
        assert wait_for_log(log, "purged by an operator", timeout=30), logs(tmp_path / "nodes")
        redis_client.lpush("pages:start_urls", site.url(0))
        wait_for_hits(site, 40, timeout=60)  # every page again
        assert nodes[0].poll() is None
    node_log = logs(tmp_path / "nodes")
    assert "lost its data" not in node_log  # a purge is not a loss: no incident
    assert not redis_client.exists("{pages}:incidents")


def test_a_node_without_redis_says_so_at_once_and_stops_within_5s(tmp_path: Path) -> None:
    """Started with Redis unreachable: one line with the reason within 5 s, and Ctrl-C stops it
    within 5 s with exit code 0 and no ERROR for leases it never had. Before: 21 s, and
    "ERROR: Could not return 0 leases at close"."""
    port = free_port()  # nothing listens there
    env = {"REDIS_URL": f"redis://127.0.0.1:{port}/0", "KAFKA_BOOTSTRAP_SERVERS": ""}
    log = tmp_path / "node.log"
    node = start_node("pages", env=env, settings={}, log_path=log, node_id="lonely")
    try:
        assert wait_for_log(log, "Redis unavailable (connection)", timeout=5 + STARTUP), (
            log.read_text()
        )
        time.sleep(2)
        stopping = time.monotonic()
        node.send_signal(signal.SIGINT)
        code = node.wait(30)
        took = time.monotonic() - stopping
    finally:
        stop_node(node)
    text = log.read_text()
    print(f"stopped in {took:.1f}s")
    assert code == 0, text
    assert took < 5, text
    assert "Could not return" not in text
    assert "Traceback" not in text


def test_a_node_stopped_during_a_redis_outage_stops_within_seconds(tmp_path: Path) -> None:
    """SIGTERM while Redis is away: the downloads waiting on the cluster's rate limiter and
    the writes retrying give up at the stop's outage budget (FRONTIER_CLOSE_TIMEOUT's 3 s), and
    the node exits; its leases come back to the others when they expire. Before, it waited for
    Redis to come back."""
    server, env, settings = private_redis(tmp_path, appendonly=True)
    try:
        with (
            Site(400, delay=0.2) as site,
            running_nodes(1, workdir=tmp_path / "nodes", env=env, settings=settings) as nodes,
        ):
            client = redis.Redis.from_url(server.url)
            client.lpush("pages:start_urls", site.url(0))
            client.close()
            wait_for_hits(site, 20)
            server.stop()
            assert wait_for_log(tmp_path / "nodes" / "node-0.log", "Redis unavailable", 20)
            time.sleep(2)  # downloads now wait on the limiter, writes retry
            stopping = time.monotonic()
            nodes[0].send_signal(signal.SIGTERM)
            try:
                code: int | None = nodes[0].wait(45)
            except subprocess.TimeoutExpired:
                code = None
            took = time.monotonic() - stopping
    finally:
        server.stop()
    node_logs = logs(tmp_path / "nodes")
    print(f"stopped in {took:.1f}s")
    assert code == 0, node_logs
    assert took < 15, node_logs
    assert "Traceback" not in node_logs  # no loop crashed, no download error at the stop
