"""Operating the cluster: admin snapshot, ledger, and the seed/requeue/purge commands on
hand-made state (tests/test_operations_cluster.py runs every command against a real crawl)."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
import redis.asyncio
from redis.asyncio import Redis as AsyncRedis
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings

from crawler.cli.main import build_parser, main
from crawler.cli.status import FrontierStatus, SpiderStatus, frontier_status
from crawler.cli.status_text import eta_text, render
from crawler.demo.nodes import REPO_ROOT
from crawler.extensions.ledger import LedgerSettings
from crawler.extensions.ledger_layout import LedgerKeys, ledger_fields
from crawler.frontier.admin import FrontierAdmin, discover_spiders
from crawler.frontier.client import FrontierClient, NewRequest
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.seed_holds import SeedKeys
from crawler.frontier.seed_queue import SeedQueue
from crawler.frontier.start_claim import start_key
from tests.frontier_state import fingerprint_of, put_lease, put_queued, queue_entries, queued

KEYS = FrontierKeys.for_spider("pages")


def crawler_cli(
    redis_url: str, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args, "--redis", redis_url],
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def server_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds * 1000 + micros // 1000)


# -- unit tests: snapshot, ledger fields, settings ---------------------------------------------


def test_snapshot_reads_every_part_of_the_shared_state(redis_client: redis.Redis) -> None:
    now = server_ms(redis_client)
    put_queued(redis_client, KEYS, 0, [b'{"url": "http://h/1"}'])
    put_queued(redis_client, KEYS, 5, [b'{"url": "http://h/2"}'])
    put_lease(redis_client, KEYS, "000000000003", "node-a", deadline_ms=now - 1000)
    put_lease(redis_client, KEYS, "000000000004", "node-b", priority=1, deadline_ms=now + 60_000)
    redis_client.sadd(KEYS.dupefilter, "f1", "f2", "f3", "f4")
    for n, reason in enumerate(["download/TimeoutError", "download/TimeoutError", "decode/X"]):
        record = {"reason": reason, "node": "node-a", "at": 1.0, "request": {"url": "http://h/"}}
        redis_client.hset(KEYS.failed, f"f{n}", orjson.dumps(record))
    redis_client.lpush("pages:start_urls:invalid", orjson.dumps({"seed": "x", "reason": "url"}))
    redis_client.lpush("pages:start_urls", "http://h/1", "http://h/2")
    redis_client.zadd(KEYS.nodes, {"node-a": now - 5000, "node-b": now + 50_000})
    redis_client.hset("politeness:{h:80}", mapping={"factor": 0.5, "cooldown": now + 10_000})
    redis_client.hset("politeness:{other:443}", mapping={"tat": now})

    snap = FrontierAdmin(redis_client, "pages", node_ttl=60).snapshot()

    assert abs(snap["server_time"] * 1000 - now) < 5000
    assert (snap["queued"], snap["leased"], snap["expired"], snap["dedup"]) == (2, 2, 1, 4)
    assert snap["failed"] == 3
    assert snap["failed_by_reason"] == {"download/TimeoutError": 2, "decode/X": 1}
    assert (snap["invalid_seeds"], snap["invalid_by_reason"]) == (1, {"url": 1})
    assert snap["seeds_waiting"] == 2
    nodes = {node["node"]: node for node in snap["nodes"]}
    assert (nodes["node-a"]["live"], nodes["node-a"]["leases"]) == (False, 1)
    assert (nodes["node-b"]["live"], nodes["node-b"]["leases"]) == (True, 1)
    assert 9 < nodes["node-b"]["heartbeat_ago"] < 12
    sites = {site["site"]: site for site in snap["politeness"]}
    assert sites["h:80"]["factor"] == 0.5
    assert 8 < sites["h:80"]["cooldown_left"] <= 10
    assert (sites["other:443"]["factor"], sites["other:443"]["cooldown_left"]) == (1.0, 0.0)
    assert discover_spiders(redis_client) == ["pages"]


def test_a_nodes_heartbeat_age_is_its_own_whatever_the_commands_lease_settings(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The age was worked out from the command's FRONTIER_LEASE_TIMEOUT (60 s): a node beating
    every second with a 15 s lease timeout showed as "late, heartbeat 45.0s ago"."""

    async def beat() -> None:
        client = FrontierClient(redis.asyncio.Redis.from_url(redis_url), KEYS, "quick")
        await client.heartbeat([], 15_000, 15_000, 10, epoch="", interval_ms=1000)
        await client.aclose()

    asyncio.run(beat())
    (node,) = FrontierAdmin(redis_client, "pages", node_ttl=60, heartbeat_interval=5).snapshot()[
        "nodes"
    ]
    assert node["state"] == "live"
    assert 0 <= node["heartbeat_ago"] < 1
    assert 14 < node["expires_in"] <= 15
    time.sleep(2.2)  # two of its own intervals: late, though the command's are 5 s
    (node,) = FrontierAdmin(redis_client, "pages", node_ttl=60).snapshot()["nodes"]
    assert (node["state"], round(node["heartbeat_ago"])) == ("late", 2)


def test_snapshot_of_an_empty_database(redis_client: redis.Redis) -> None:
    snap = FrontierAdmin(redis_client, "nothing").snapshot()
    assert (snap["queued"], snap["leased"], snap["failed"], snap["nodes"]) == (0, 0, 0, [])
    assert discover_spiders(redis_client) == []


def test_ledger_reads_totals_and_recent_minutes(redis_client: redis.Redis) -> None:
    keys = LedgerKeys.for_crawl("pages", "c1")
    minute = server_ms(redis_client) // 60_000
    started = (minute - 1) * 60_000 + 30_000
    redis_client.hset(keys.total, mapping={"done": 50, "pages": 60, "started_ms": started})
    redis_client.hset(keys.minute(minute - 1), mapping={"done": 20, "pages": 25})
    redis_client.hset(keys.minute(minute), mapping={"done": 30, "pages": 35})
    redis_client.hset(keys.minute(minute - 10), mapping={"done": 99})  # outside the window

    view = FrontierAdmin(redis_client, "pages").ledger("c1", minutes=5)

    assert view["totals"] == {"done": 50, "pages": 60}
    assert view["recent"] == {"done": 50, "pages": 60}
    assert 30 <= view["window_seconds"] <= 95  # from the crawl's start, not the window's


def test_ledger_fields_sum_stats_by_family() -> None:
    stats = {
        "seeds/received": 5,
        "seeds/invalid/url": 1,
        "seeds/invalid/json": 2,
        "frontier/failed/download/TimeoutError": 3,
        "frontier/requeued/kafka/_msg_timed_out": 4,
        "kafka/dead_lettered": 1,
        "kafka/dead_lettered_file": 2,
        "downloader/response_count": 9,
        "start_time": "not a number",
        "log_count/INFO": 7,
    }
    fields = ledger_fields(stats)
    assert fields["seeded"] == 5
    assert fields["invalid_seeds"] == 3
    assert fields["failed"] == 3
    assert fields["failed/download/TimeoutError"] == 3
    assert fields["requeued"] == 4
    assert fields["items/dead_lettered"] == 3
    assert fields["pages"] == 9
    assert fields["done"] == 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"LEDGER_INTERVAL": "0"}, r"LEDGER_INTERVAL=0.0 must be > 0"),
        ({"CRAWLER_CRAWL_ID": "a:b"}, r"CRAWLER_CRAWL_ID='a:b' must be non-empty"),
    ],
)
def test_ledger_settings_name_the_bad_setting(overrides: dict[str, str], message: str) -> None:
    settings = Settings({"LEDGER_ENABLED": True, "LEDGER_INTERVAL": 5, "REDIS_URL": "redis://h"})
    settings.setdict(overrides)
    with pytest.raises(ValueError, match=message):
        LedgerSettings.from_settings(settings)


def test_ledger_is_off_without_redis() -> None:
    settings = Settings({"LEDGER_ENABLED": True, "LEDGER_INTERVAL": 5, "REDIS_URL": ""})
    with pytest.raises(NotConfigured, match="REDIS_URL"):
        LedgerSettings.from_settings(settings)


# -- the commands ------------------------------------------------------------------------------


def test_seed_pushes_valid_seeds_in_order_and_rejects_the_rest(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_file = tmp_path / "seeds.txt"
    seed_file.write_text('http://h/3\n\n{"url": "http://h/4", "priority": 2}\n{"url": 5}\n')
    code = main(
        ["seed", "pages", "http://h/1", "ftp://h/2", "--file", str(seed_file), "--redis", redis_url]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "invalid (scheme): 'ftp://h/2'" in out
    assert "invalid (url)" in out
    assert "Pushed 3 seeds to pages:start_urls (3 new, 0 crawled before), rejected 2" in out
    # Nodes pop from the right: submission order.
    popped = list(reversed(redis_client.lrange("pages:start_urls", 0, -1)))
    assert popped == [b"http://h/1", b"http://h/3", b'{"url": "http://h/4", "priority": 2}']


def test_seed_reads_stdin(redis_url: str, redis_client: redis.Redis) -> None:
    result = crawler_cli(
        redis_url, "seed", "pages", "-", "--json", stdin="http://h/a\nhttp://h/b\n"
    )
    assert result.returncode == 0, result.stderr
    report = orjson.loads(result.stdout)
    assert {k: report[k] for k in ("key", "pushed", "new", "seen", "rejected")} == {
        "key": "pages:start_urls",
        "pushed": 2,
        "new": 2,
        "seen": 0,
        "rejected": [],
    }
    assert [(s["seed"], s["outcome"]) for s in report["seeds"]] == [
        ("http://h/a", "new"),
        ("http://h/b", "new"),
    ]
    assert redis_client.llen("pages:start_urls") == 2


def test_requeue_returns_an_expired_lease(redis_url: str, redis_client: redis.Redis) -> None:
    async def lease_briefly() -> None:
        client = FrontierClient(AsyncRedis.from_url(redis_url), KEYS, "gone-node")
        try:
            await client.complete(
                None, "done", [NewRequest(fingerprint_of("h"), -3.0, b'{"url": "http://h/"}')]
            )
            assert len(await client.lease(1, lease_ms=1)) == 1
        finally:
            await client.aclose()

    asyncio.run(lease_briefly())
    time.sleep(0.05)
    assert queued(redis_client, KEYS) == 0
    result = crawler_cli(redis_url, "requeue", "pages", "--json", "--crawl", "c1")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout) == {"spider": "pages", "requeued": 1, "seeds": 0}
    assert queue_entries(redis_client, KEYS) == [(3, b'{"url": "http://h/"}')]
    assert (redis_client.zcard(KEYS.leases), redis_client.hlen(KEYS.inflight)) == (0, 0)
    assert redis_client.hget(LedgerKeys.for_crawl("pages", "c1").total, "reclaimed") == b"1"
    again = crawler_cli(redis_url, "requeue", "pages")
    assert "Returned 0 expired leases of 'pages'" in again.stdout


def test_seeds_held_by_a_dead_node_are_work_left_and_requeue_returns_them(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A node killed between taking seeds and writing their requests leaves them in its hold
    (``{<seed key>}:taken:<node>``). Before, status said the crawl was finished (it read
    neither the holds nor the takers) and only a node starting later returned them."""
    redis_client.lpush("pages:start_urls", "http://h/1", "http://h/2", "http://h/3")
    seed_keys = SeedKeys("pages:start_urls", "pages:start_urls:invalid", (KEYS,))

    async def take() -> None:
        client = AsyncRedis.from_url(redis_url)
        try:
            dead = SeedQueue(client, seed_keys, node_id="dead", hold_ms=1)
            live = SeedQueue(client, seed_keys, node_id="live", hold_ms=60_000)
            assert len(await dead.take(2, 0.1)) == 2  # and then it is killed: no done()
            assert len(await live.take(1, 0.1)) == 1
        finally:
            await client.aclose()

    asyncio.run(take())
    time.sleep(0.05)  # the dead node's hold expires
    status = frontier_status(redis_client, "pages", "c1")
    assert status["state"] == "stalled"  # work left, no live node; before: finished
    snap = status["snapshot"]
    assert (snap["seeds_waiting"], snap["seeds_held"], snap["seeds_held_expired"]) == (0, 3, 2)
    assert eta_text(status) == "STALLED: work left, no live node"
    assert ", 0 seeds waiting, 3 seeds held (2 expired)" in render(status_with_nothing_else(status))

    result = crawler_cli(redis_url, "requeue", "pages", "--json", "--crawl", "c1")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout) == {"spider": "pages", "requeued": 0, "seeds": 2}
    # back in the seed key, the first taken next in line (nodes take from the right)
    assert redis_client.lrange("pages:start_urls", 0, -1) == [b"http://h/2", b"http://h/1"]
    assert not redis_client.exists(seed_keys.taken("dead"))
    after = FrontierAdmin(redis_client, "pages").snapshot()
    assert (after["seeds_waiting"], after["seeds_held"], after["seeds_held_expired"]) == (2, 1, 0)
    text = crawler_cli(redis_url, "requeue", "pages").stdout
    assert "Returned 0 expired leases of 'pages' to the queue, 0 held seeds" in text


def test_purge_asks_and_deletes_ledgers_too(redis_url: str, redis_client: redis.Redis) -> None:
    put_queued(redis_client, KEYS, 0, [b"{}"])
    redis_client.lpush("pages:start_urls", "http://h/")
    redis_client.hset(LedgerKeys.for_crawl("pages", "c1").total, "done", 1)
    redis_client.hset(LedgerKeys.for_crawl("pages", "c1").minute(1), "done", 1)
    redis_client.lpush("other:start_urls", "http://h/")

    refused = crawler_cli(redis_url, "purge", "pages", stdin="nope\n")
    assert refused.returncode == 1
    assert queued(redis_client, KEYS) == 1

    redis_client.config_resetstat()
    kept = crawler_cli(redis_url, "purge", "pages", "--yes", "--keep-seeds", "--json")
    assert kept.returncode == 0, kept.stderr
    # UNLINK: Redis frees a large key (an exact dedup of 2M URLs: DEL held it 0.8 s, an
    # audit) in the background, not while every node waits
    commands = redis_client.info("commandstats")
    assert "cmdstat_del" not in commands and commands["cmdstat_unlink"]["calls"] == 5
    assert orjson.loads(kept.stdout)["deleted"] == 5  # queue levels, count, list; 2 ledger keys
    assert redis_client.keys("*pages*") == [b"pages:start_urls"]

    crawler_cli(redis_url, "purge", "pages", "--yes")
    assert redis_client.keys("*") == [b"other:start_urls"]
    assert "Nothing to purge" in crawler_cli(redis_url, "purge", "pages", "--yes").stdout


@pytest.mark.parametrize(
    "command",
    [
        ("seed", "pagse", "http://h/1"),
        ("status", "pagse"),
        ("requeue", "pagse"),
        ("purge", "pagse", "--yes"),
    ],
)
def test_an_unknown_spider_is_refused_with_the_projects_spiders(
    redis_url: str, redis_client: redis.Redis, command: tuple[str, ...]
) -> None:
    result = crawler_cli(redis_url, *command)
    assert result.returncode == 1
    assert "no spider 'pagse' in this project" in result.stderr
    assert "pages" in result.stderr and "zhihu" in result.stderr  # what it has
    # a runspider spider is not in SPIDER_MODULES: what to do then (audit AS: 19 keys left)
    assert "`scrapy purge pagse` purges it" in result.stderr
    assert result.stdout == ""
    assert not redis_client.exists("pagse:start_urls")  # a typo strands no seed


def test_status_into_a_closed_pipe_is_quiet(redis_url: str, redis_client: redis.Redis) -> None:
    """``crawler status | head -1``: the reader is gone before the output is written."""
    redis_client.lpush("pages:start_urls", "http://h/1")
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write now fails with EPIPE
    try:
        result = subprocess.run(
            [sys.executable, "-m", "crawler", "status", "--redis", redis_url],
            cwd=REPO_ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


def test_purge_refuses_while_nodes_are_live_unless_forced(
    redis_url: str, redis_client: redis.Redis
) -> None:
    put_queued(redis_client, KEYS, 0, [b"{}"])
    redis_client.zadd(KEYS.nodes, {"node-a": server_ms(redis_client) + 60_000, "old": 1})
    refused = crawler_cli(redis_url, "purge", "pages", "--yes")
    assert refused.returncode == 1
    assert "1 nodes of 'pages' are live (node-a)" in refused.stderr
    assert queued(redis_client, KEYS) == 1

    # node-a is not running: it never beats in the purge's epoch (0.6 s: 3 heartbeats of 0.2 s)
    fast = {"CRAWLER_SETTING_FRONTIER_HEARTBEAT_INTERVAL": "0.2"}
    forced = crawler_cli(redis_url, "purge", "pages", "--yes", "--force", env=fast)
    assert forced.returncode == 0, forced.stderr
    assert "0 live nodes reset, 1 did not answer in time (node-a)" in forced.stdout
    assert not redis_client.exists(KEYS.queue_count, KEYS.queue_levels, KEYS.queue_list("0"))
    epoch = redis_client.get(KEYS.epoch)
    assert isinstance(epoch, bytes)
    assert epoch.startswith(b"purged:")  # running nodes reset at their next heartbeat


def status_with_nothing_else(frontier: FrontierStatus) -> SpiderStatus:
    """A full status around ``frontier``: no sessions, no Kafka."""
    return SpiderStatus(
        **frontier,
        sessions=None,
        dead_letters={"state": "off", "group": "g", "unhandled": None, "topics": {}, "error": None},
    )


def test_nodes_go_live_late_dead_then_gone(redis_url: str, redis_client: redis.Redis) -> None:
    """Heartbeats every 5 s, lease 60 s: late after two missed heartbeats, dead after the
    lease, and out of the view once its leases were reclaimed (still shown with --all)."""
    now = server_ms(redis_client)
    redis_client.zadd(
        KEYS.nodes,
        {"fresh": now + 59_000, "late": now + 45_000, "dead": now - 1000, "gone": now - 9000},
    )
    put_lease(redis_client, KEYS, "l1", "dead", deadline_ms=now + 1000)
    status = frontier_status(redis_client, "pages", "c1")
    states = {node["node"]: node["state"] for node in status["snapshot"]["nodes"]}
    assert states == {"fresh": "live", "late": "late", "dead": "dead", "gone": "gone"}
    text = render(status_with_nothing_else(status))
    assert "1 live, 1 late, 2 dead (1 gone: --all)" in text
    assert "    dead " in text and "    gone " not in text
    assert "    gone " in render(status_with_nothing_else(status), show_all=True)


def test_a_crawl_whose_start_requests_are_being_written_is_not_finished(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A plain spider's slow start(): the node that claimed the writing was live, nothing was
    queued yet, and status said finished (a script polling for it stopped early)."""
    now = server_ms(redis_client)
    redis_client.zadd(KEYS.nodes, {"node-a": now + 59_000})
    claim = start_key(KEYS, "c1")
    redis_client.hset(claim, mapping={"state": "writing", "node": "node-a", "since": now})
    redis_client.pexpire(claim, 60_000)
    status = frontier_status(redis_client, "pages", "c1")
    assert (status["state"], status["start_writer"]) == ("running", "node-a")
    assert "start requests: being written by node-a" in render(status_with_nothing_else(status))
    redis_client.zadd(KEYS.nodes, {"node-a": now - 1000})  # it died: the claim waits to expire
    assert frontier_status(redis_client, "pages", "c1")["state"] == "stalled"
    redis_client.hset(claim, "state", "done")
    done = frontier_status(redis_client, "pages", "c1")
    assert (done["state"], done["start_writer"]) == ("finished", None)


def test_seeds_pushed_for_a_spider_that_reads_none_are_no_work_left(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A plain spider (its start requests written: it is fed by start_urls or start(), not from
    Redis) with a seed pushed to <spider>:start_urls: status said STALLED, work left, no live
    node, for ever, asking for nodes that would never take it (an audit)."""
    redis_client.lpush("pages:start_urls", "http://e.com/")
    redis_client.hset(start_key(KEYS, "c1"), mapping={"state": "done", "node": "node-a"})
    status = frontier_status(redis_client, "pages", "c1")
    assert (status["state"], status["seeds_unread"]) == ("finished", 1)
    text = render(status_with_nothing_else(status))
    assert "1 seeds in pages:start_urls that no node reads (pages is not fed from Redis" in text


def test_rates_count_the_minutes_nodes_fetched_in_and_are_zero_with_no_live_node(
    redis_url: str, redis_client: redis.Redis
) -> None:
    keys = LedgerKeys.for_crawl("pages", "c1")
    now = server_ms(redis_client)
    minute = now // 60_000
    redis_client.hset(keys.total, mapping={"done": 100, "started_ms": now - 300_000})
    # One busy minute, three idle ones: 120 pages are 120/min, not 24/min over 5 minutes.
    redis_client.hset(keys.minute(minute - 2), mapping={"pages": 120, "done": 120, "enqueued": 60})
    put_queued(redis_client, KEYS, 0, [b"{}", b"{}"])
    redis_client.zadd(KEYS.nodes, {"node-a": now + 59_000})
    running = frontier_status(redis_client, "pages", "c1")
    assert running["state"] == "running"
    assert running["pages_per_minute"] == 120.0
    assert running["eta_lower_bound"]  # 60 new requests a minute: the frontier still grows
    assert eta_text(running) == "ETA >= 0:00:01 (still finding 60.0 new/min)"

    redis_client.zadd(KEYS.nodes, {"node-a": now + 45_000})  # no heartbeat for 15 s: late
    late = frontier_status(redis_client, "pages", "c1")
    assert (late["state"], late["pages_per_minute"], late["eta_seconds"]) == ("stalled", 0.0, None)
    # nodes alive but unable to write (Redis at maxmemory) read as gone (an audit)
    assert eta_text(late) == (
        "STALLED: work left, no live node (1 late: no heartbeat for 15s: stopped, frozen, or "
        "alive and unable to write to Redis, as at its maxmemory (-OOM): see their logs)"
    )

    redis_client.zadd(KEYS.nodes, {"node-a": now - 1000})  # the only node died
    stalled = frontier_status(redis_client, "pages", "c1")
    assert (stalled["state"], stalled["pages_per_minute"], stalled["eta_seconds"]) == (
        "stalled",
        0.0,
        None,
    )
    assert eta_text(stalled) == "STALLED: work left, no live node"
    # it said "over 0s of fetching" where --json said 60 (an audit)
    rates = render(status_with_nothing_else(stalled)).split("rates")[1].split("\n")[0]
    assert re.search(r"\(no live node; nodes fetched for 60s in the last \d+s\)$", rates), rates


def test_failures_and_invalid_seeds_say_they_are_of_every_crawl(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """`status --crawl af4` showed another crawl's failures and invalid seeds beside af4's
    ledger, without a word of whose (an audit)."""
    redis_client.hset(KEYS.failed, "000000000001", b'{"reason": "download/X"}')
    redis_client.rpush("pages:start_urls:invalid", b'{"reason": "json"}')
    text = render(status_with_nothing_else(frontier_status(redis_client, "pages", "af4")))
    assert (
        "  failures       1: download/X 1 (records of every crawl of the spider: crawler failed "
        "pages list)" in text
    )
    assert (
        "  invalid seeds  1: json 1 (records of every crawl of the spider: "
        "pages:start_urls:invalid)" in text
    )


def test_the_eta_waits_for_the_leases_of_late_nodes(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A node killed with 20 leases: with nothing queued, status gave `ETA >= 0:00:03` from the
    live node's rate for 60 s, while the crawl waited for those leases to expire (an audit)."""
    keys = LedgerKeys.for_crawl("pages", "c1")
    now = server_ms(redis_client)
    minute = now // 60_000
    redis_client.hset(keys.total, mapping={"done": 100, "started_ms": now - 300_000})
    redis_client.hset(keys.minute(minute - 1), mapping={"pages": 120, "done": 120})
    redis_client.zadd(KEYS.nodes, {"node-a": now + 59_000, "node-k": now + 30_000})
    for n in range(20):
        put_lease(redis_client, KEYS, f"l{n}", "node-k", deadline_ms=now + 30_000)
    status = frontier_status(redis_client, "pages", "c1")
    assert status["state"] == "running"
    assert (status["late_leases"], round(status["late_leases_back_in"])) == (20, 30)
    # 30 s, then the 20 leases at the live node's 120 a minute
    assert status["eta_seconds"] is not None and 39 <= status["eta_seconds"] <= 41
    assert eta_text(status).endswith(
        "(20 leases of late or dead nodes, back in the queue in ~30s as they expire)"
    )
    redis_client.zadd(KEYS.nodes, {"node-k": now - 1_000})  # dead: its leases expired
    dead = frontier_status(redis_client, "pages", "c1")
    assert (dead["late_leases"], dead["late_leases_back_in"]) == (20, 0.0)
    assert eta_text(dead).endswith(
        "(20 leases of late or dead nodes, expired: back in the queue at a live node's next "
        "heartbeat)"
    )


def test_no_eta_while_live_nodes_fetch_no_page(redis_url: str, redis_client: redis.Redis) -> None:
    """The rates count the minutes nodes fetched in, so they froze when live nodes stopped
    fetching (every site in cooldown, a node stuck): the ETA stayed as it was. After two whole
    minutes without a page there is none, and the status says why."""
    keys = LedgerKeys.for_crawl("pages", "c1")
    now = server_ms(redis_client)
    minute = now // 60_000
    redis_client.hset(keys.total, mapping={"done": 100, "started_ms": now - 300_000})
    redis_client.hset(keys.minute(minute - 4), mapping={"pages": 120, "done": 120})
    put_queued(redis_client, KEYS, 0, [b"{}", b"{}"])
    redis_client.zadd(KEYS.nodes, {"node-a": now + 59_000})
    quiet = frontier_status(redis_client, "pages", "c1")
    assert quiet["state"] == "running"
    assert quiet["eta_seconds"] is None
    assert 180 <= quiet["ledger"]["quiet_seconds"] < 240
    assert eta_text(quiet) == (
        "ETA ?: no page fetched for 3 min by the 1 live node (see crawler leases, and the sites' "
        "politeness below)"
    )


def leaf_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command a user can run, with its parser (``dead-letters list``, ``seed``...)."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, parser
    for action in subparsers:
        for name, sub in action.choices.items():
            yield from leaf_commands(sub, (*path, name))


def test_every_command_takes_json() -> None:
    commands = dict(leaf_commands(build_parser()))
    assert len(commands) >= 20
    without = [
        " ".join(path)
        for path, parser in commands.items()
        if not any("--json" in a.option_strings and a.nargs == 0 for a in parser._actions)
    ]
    assert without == []


def test_top_json_prints_the_status_once(redis_url: str, redis_client: redis.Redis) -> None:
    redis_client.lpush("pages:start_urls", "http://h/1")
    result = crawler_cli(redis_url, "top", "pages", "--once", "--json")
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    (row,) = orjson.loads(line)
    assert row["snapshot"]["spider"] == "pages" and row["snapshot"]["seeds_waiting"] == 1


def test_sessions_invalidate_json_says_what_it_did(redis_url: str) -> None:
    result = crawler_cli(redis_url, "sessions", "invalidate", "zhihu", "nobody", "--json")
    assert result.returncode == 1
    assert orjson.loads(result.stdout) == {
        "platform": "zhihu",
        "account": "nobody",
        "invalidated": False,
    }
    assert "no session for zhihu/nobody" in result.stderr


# -- the seed key a spider reads: its redis_key, SEEDS_KEY, SEEDS_TYPE --------------------------

EXAMPLE_SPIDERS = {"CRAWLER_SETTING_SPIDER_MODULES": "tests.userproject.example"}


def status_of(redis_url: str, spider: str, env: dict[str, str]) -> dict[str, object]:
    result = crawler_cli(redis_url, "status", spider, "--json", env=env)
    assert result.returncode == 0, result.stderr
    status: dict[str, object] = orjson.loads(result.stdout)[0]
    return status


def test_status_and_purge_use_the_spiders_redis_key(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """scrapy-redis's example spider ``myspider_redis`` reads ``myspider:start_urls``."""
    redis_client.lpush("myspider:start_urls", "http://h/1")
    redis_client.lpush("myspider_redis:start_urls:invalid", "{}")  # SEEDS_INVALID_KEY
    status = status_of(redis_url, "myspider_redis", EXAMPLE_SPIDERS)
    snapshot = status["snapshot"]
    assert isinstance(snapshot, dict)
    assert (snapshot["seeds_waiting"], status["state"]) == (1, "stalled")  # no node runs

    kept = crawler_cli(
        redis_url, "purge", "myspider_redis", "--yes", "--keep-seeds", env=EXAMPLE_SPIDERS
    )
    assert kept.returncode == 0, kept.stderr
    assert redis_client.keys("*") == [b"myspider:start_urls"]
    purged = crawler_cli(redis_url, "purge", "myspider_redis", "--yes", env=EXAMPLE_SPIDERS)
    assert purged.returncode == 0, purged.stderr
    assert redis_client.keys("*") == []

    redis_client.lpush("myspider:start_urls", "http://h/1")
    scrapy_purge = subprocess.run(
        [sys.executable, "-m", "scrapy", "purge", "myspider_redis", "--yes"],
        cwd=REPO_ROOT,
        env={**os.environ, "REDIS_URL": redis_url, **EXAMPLE_SPIDERS},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert scrapy_purge.returncode == 0, scrapy_purge.stderr
    assert redis_client.keys("*") == []


@pytest.mark.parametrize(
    ("seeds_type", "push"),
    [
        ("set", lambda client: client.sadd("pages:start_urls", "http://h/1", "http://h/2")),
        ("zset", lambda client: client.zadd("pages:start_urls", {"http://h/1": 1, "http://h/": 2})),
    ],
)
def test_status_counts_seeds_of_a_set_or_sorted_set(
    redis_url: str, redis_client: redis.Redis, seeds_type: str, push: Any
) -> None:
    push(redis_client)
    env = {"CRAWLER_SETTING_SEEDS_TYPE": seeds_type}
    snapshot = status_of(redis_url, "pages", env)["snapshot"]
    assert isinstance(snapshot, dict)
    assert snapshot["seeds_waiting"] == 2
    every = crawler_cli(redis_url, "status", "--json", env=env)  # every spider found in Redis
    assert every.returncode == 0, every.stderr
    top = crawler_cli(redis_url, "top", "pages", "--once", env=env)
    assert top.returncode == 0, top.stderr


def test_status_reads_scrapy_redis_s_start_urls_key_setting(
    redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.lpush("legacy:pages", "http://h/1")
    env = {"CRAWLER_SETTING_REDIS_START_URLS_KEY": "legacy:%(name)s"}
    snapshot = status_of(redis_url, "pages", env)["snapshot"]
    assert isinstance(snapshot, dict)
    assert snapshot["seeds_waiting"] == 1


def test_purge_deletes_the_seed_keys_the_settings_name(
    redis_url: str, redis_client: redis.Redis
) -> None:
    env = {
        "CRAWLER_SETTING_SEEDS_KEY": "feed:%(name)s",
        "CRAWLER_SETTING_SEEDS_INVALID_KEY": "feed:%(name)s:bad",
    }
    redis_client.lpush("feed:pages", "http://h/1")
    redis_client.lpush("feed:pages:bad", "{}")
    redis_client.lpush("pages:start_urls", "http://h/other")  # not this configuration's
    status = status_of(redis_url, "pages", env)["snapshot"]
    assert isinstance(status, dict)
    assert (status["seeds_waiting"], status["invalid_seeds"]) == (1, 1)
    purged = crawler_cli(redis_url, "purge", "pages", "--yes", "--json", env=env)
    assert purged.returncode == 0, purged.stderr
    assert redis_client.keys("*") == [b"pages:start_urls"]
