"""``crawler queue``, ``crawler failed`` and ``crawler leases`` on a small real frontier."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson
import pytest
import redis

from crawler.cli.main import main
from crawler.demo.nodes import REPO_ROOT
from crawler.extensions.ledger_layout import LedgerKeys
from crawler.frontier import codec
from crawler.frontier.client import FrontierClient, Lease, NewRequest
from crawler.frontier.inspect import FailedRecord, PartInspector
from crawler.frontier.keys import FrontierKeys
from crawler.redis_connection import async_client, sync_client
from tests.aio import run
from tests.frontier_state import fingerprint_of, queue_entries

KEYS = FrontierKeys.for_spider("pages")
LEASE_MS = 60_000


def request(url: str, priority: int = 0, depth: int = 0) -> NewRequest:
    body = codec.dumps({"url": url, "priority": priority, "meta": {"depth": depth}})
    return NewRequest(fingerprint=fingerprint_of(url), score=-float(priority), body=body)


async def enqueue(redis_url: str, *requests: NewRequest) -> None:
    client = FrontierClient(async_client(redis_url), KEYS, "seeder")
    await client.complete(None, "done", list(requests))
    await client.aclose()


async def lease(redis_url: str, node: str, count: int) -> list[Lease]:
    client = FrontierClient(async_client(redis_url), KEYS, node)
    leases = await client.lease(count, LEASE_MS)
    await client.aclose()
    return leases


async def fail(redis_url: str, node: str, lease_id: str, body: bytes, reason: str) -> None:
    client = FrontierClient(async_client(redis_url), KEYS, node)
    failed_request = codec.loads(body)
    failed_request["meta"]["retry_times"] = 2  # as Scrapy's RetryMiddleware leaves it
    record = {
        "reason": reason,
        "node": node,
        "at": 1.0,
        "request": failed_request,
        "error": "it broke",
    }
    await client.complete(lease_id, "failed", [], orjson.dumps(record))
    await client.aclose()


def cli(capsys: pytest.CaptureFixture[str], redis_url: str, *args: str) -> tuple[int, str]:
    code = main([*args, "--redis", redis_url])
    return code, capsys.readouterr().out


def cli_json(capsys: pytest.CaptureFixture[str], redis_url: str, *args: str) -> Any:
    code, out = cli(capsys, redis_url, *args, "--json")
    assert code == 0, out
    return orjson.loads(out)


def crawler_cli(redis_url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args, "--redis", redis_url],
        cwd=REPO_ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def five_failures(redis_url: str) -> None:
    """Five failed requests: three download timeouts, two spider exceptions."""
    run(enqueue(redis_url, *(request(f"http://a.test/{n}", priority=n) for n in range(5))))
    for n, taken in enumerate(run(lease(redis_url, "node-a", 5))):
        reason = "download/TimeoutError" if n < 3 else "spider_exception/KeyError"
        run(fail(redis_url, "node-a", taken.id, taken.body, reason))


# -- queue -------------------------------------------------------------------------------------


def test_queue_shows_the_head_in_lease_order_and_counts_per_site(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run(
        enqueue(
            redis_url,
            request("http://a.test/low", priority=0, depth=2),
            request("http://b.test:8080/top", priority=9, depth=1),
            request("http://a.test/mid", priority=5, depth=3),
            request("http://a.test/other", priority=0, depth=1),
        )
    )
    shown = cli_json(capsys, redis_url, "queue", "pages", "--top", "2")
    assert [(r["priority"], r["url"], r["depth"], r["site"]) for r in shown["head"]] == [
        (9, "http://b.test:8080/top", 1, "b.test:8080"),
        (5, "http://a.test/mid", 3, "a.test"),
    ]
    assert shown["sites"] == {"a.test": 3, "b.test:8080": 1}
    assert (shown["queued"], shown["scanned"]) == (4, 4)

    only_a = cli_json(capsys, redis_url, "queue", "pages", "--site", "a.test")
    assert [r["url"] for r in only_a["head"]] == [
        "http://a.test/mid",
        "http://a.test/low",
        "http://a.test/other",
    ]

    code, out = cli(capsys, redis_url, "queue", "pages", "--top", "1", "--scan", "2")
    assert code == 0
    assert "9  http://b.test:8080/top" in out
    assert "counted 2 of 4 queued requests" in out


def test_queue_says_how_many_requests_wait_in_the_kafka_backlog(
    redis_url: str, redis_client: redis.Redis, capsys: pytest.CaptureFixture[str]
) -> None:
    """Requests spilled to the Kafka backlog (FRONTIER_QUEUE_MAX) are not in Redis's queue:
    the command says how many there are, not as if the queue were all of the crawl's work."""
    run(enqueue(redis_url, request("http://a.test/queued")))
    redis_client.set(KEYS.backlog, 7)
    shown = cli_json(capsys, redis_url, "queue", "pages")
    assert (shown["queued"], shown["spilled"]) == (1, 7)
    code, out = cli(capsys, redis_url, "queue", "pages")
    assert code == 0
    assert out.splitlines()[0] == (
        "pages: 1 queued (+7 in the Kafka backlog, read back as the queue drains: not shown); "
        "the first 1 in lease order"
    )


def test_queue_of_an_unknown_spider_is_refused_on_stderr(redis_url: str) -> None:
    result = crawler_cli(redis_url, "queue", "pagez")
    assert result.returncode != 0
    assert "no spider 'pagez'" in result.stderr
    assert result.stdout == ""


# -- failed ------------------------------------------------------------------------------------


def test_failed_list_prints_records_and_filters_by_reason_prefix(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    five_failures(redis_url)
    code, out = cli(capsys, redis_url, "failed", "pages", "list")
    assert code == 0
    assert out.count("download/TimeoutError") == 3
    assert "1970-01-01 00:00:01  node-a  download/TimeoutError  http://a.test/4  it broke" in out
    assert "5 failed requests of 'pages' listed" in out

    code, out = cli(capsys, redis_url, "failed", "pages", "list", "--reason", "spider_exception")
    assert "download/" not in out
    assert "2 failed requests of 'pages' (reason spider_exception*) listed" in out

    code, out = cli(capsys, redis_url, "failed", "pages", "list", "--reason", "download", "--json")
    records = [orjson.loads(line) for line in out.splitlines()]
    assert {r["reason"] for r in records} == {"download/TimeoutError"}
    assert sorted(r["request"]["url"] for r in records) == [
        "http://a.test/2",
        "http://a.test/3",
        "http://a.test/4",
    ]
    assert {r["node"] for r in records} == {"node-a"}
    assert all(r["id"] and r["error"] == "it broke" for r in records)


@pytest.mark.parametrize("compress", [None, "False"])
def test_retry_puts_failed_requests_back_and_a_node_leases_them(
    redis_url: str,
    redis_client: redis.Redis,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    compress: str | None,
) -> None:
    """Stored as FRONTIER_COMPRESS says (compressed by default), as a node stores requests."""
    if compress is not None:
        monkeypatch.setenv("CRAWLER_SETTING_FRONTIER_COMPRESS", compress)
    five_failures(redis_url)
    seen_before = redis_client.smembers(KEYS.dupefilter)
    counts = cli_json(capsys, redis_url, "failed", "pages", "retry", "--reason", "download/")
    assert counts == {"spider": "pages", "retried": 3, "skipped": 0}
    assert redis_client.hlen(KEYS.failed) == 2
    ledger = LedgerKeys.for_crawl("pages", "default").total  # CRAWLER_CRAWL_ID
    assert redis_client.hget(ledger, "retried") == b"3"  # enqueued + retried == done + failed
    assert redis_client.smembers(KEYS.dupefilter) == seen_before  # dedup untouched

    taken = run(lease(redis_url, "node-b", 10))
    urls = [codec.loads(t.body)["url"] for t in taken]
    assert urls == ["http://a.test/4", "http://a.test/3", "http://a.test/2"]  # by priority
    assert all(len(t.id) == 12 and int(t.id, 16) > 5 for t in taken)  # fresh ids from seq
    # no retry_times: retried afresh; marked with its record's reason (a spider's own retry
    # count starts over, and what it recorded of the failure is not counted twice)
    (first,) = [codec.loads(t.body)["meta"] for t in taken[:1]]
    assert first == {"depth": 0, "failure_retried": first["failure_retried"]}
    assert first["failure_retried"].startswith("download/")
    stored_as = {t.body.startswith(codec.COMPRESSED) for t in taken}
    assert stored_as == {compress is None}


def test_a_retry_in_another_part_is_counted_in_part_0s_ledger(redis_client: redis.Redis) -> None:
    part = FrontierKeys.for_spider("pages", part=1, count=2)
    stored = orjson.dumps({"reason": "download/X", "request": {"url": "http://a.test/"}})
    redis_client.hset(part.failed, "000000000001", stored)
    record = FailedRecord("000000000001", stored, orjson.loads(stored))
    ledger = LedgerKeys.for_crawl("pages", "c1").total
    assert PartInspector(redis_client, part).retry(record, ledger=ledger)
    assert not PartInspector(redis_client, part).retry(record, ledger=ledger)  # gone: not counted
    assert redis_client.hget(ledger, "retried") == b"1"
    assert redis_client.hlen(part.failed) == 0


def test_a_request_retried_again_keeps_its_earlier_failure_reasons(
    redis_client: redis.Redis,
) -> None:
    """A page retried after a download failure whose retry's callback raised: its meta said only
    the last reason, so a spider that had recorded something at the first failure could not
    know it (the zhihu spider counted such a list twice: a review)."""
    part = FrontierKeys.for_spider("pages", part=0, count=1)
    meta = {"failure_retried": "download/ConnectionLost", "failure_retried_before": ["zhihu/x"]}
    stored = orjson.dumps(
        {"reason": "spider_exception/KeyError", "request": {"url": "http://a.test/", "meta": meta}}
    )
    redis_client.hset(part.failed, "000000000001", stored)
    record = FailedRecord("000000000001", stored, orjson.loads(stored))
    assert PartInspector(redis_client, part).retry(record, compress=False)
    ((_, body),) = queue_entries(redis_client, part)
    assert codec.loads(body)["meta"] == {
        "failure_retried": "spider_exception/KeyError",
        "failure_retried_before": ["zhihu/x", "download/ConnectionLost"],
    }


def test_drop_asks_first_then_deletes(redis_url: str, redis_client: redis.Redis) -> None:
    five_failures(redis_url)
    refused = crawler_cli(redis_url, "failed", "pages", "drop", "--reason", "spider", stdin="n\n")
    assert refused.returncode == 1
    assert "Drop 2 failed requests of 'pages' (reason spider*)?" in refused.stdout
    assert redis_client.hlen(KEYS.failed) == 5

    agreed = crawler_cli(redis_url, "failed", "pages", "drop", "--reason", "spider", stdin="y\n")
    assert agreed.returncode == 0, agreed.stderr
    assert "Dropped 2 failed requests of 'pages'" in agreed.stdout
    assert redis_client.hlen(KEYS.failed) == 3

    forced = crawler_cli(redis_url, "failed", "pages", "drop", "--yes", "--json")
    assert orjson.loads(forced.stdout) == {"spider": "pages", "dropped": 3}
    assert redis_client.hlen(KEYS.failed) == 0


# -- leases ------------------------------------------------------------------------------------


def test_leases_are_grouped_by_node_with_age_and_urls(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run(enqueue(redis_url, *(request(f"http://a.test/{n}", priority=-n) for n in range(7))))
    run(lease(redis_url, "node-a", 2))
    run(lease(redis_url, "node-b", 5))
    shown = cli_json(capsys, redis_url, "leases", "pages")
    nodes = {n["node"]: n for n in shown["nodes"]}
    assert {name: n["leases"] for name, n in nodes.items()} == {"node-a": 2, "node-b": 5}
    assert nodes["node-a"]["urls"] == ["http://a.test/0", "http://a.test/1"]
    assert len(nodes["node-b"]["urls"]) == 3  # the first few
    assert all(0 <= n["oldest_age"] < 30 and n["expired"] == 0 for n in nodes.values())
    assert shown["lease_timeout"] == 60.0

    code, out = cli(capsys, redis_url, "leases", "pages")
    assert code == 0
    assert "node-b" in out and "5 leases" in out
    assert "estimated" in out


def test_lease_ages_use_the_lease_timeout_each_node_beats_with(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node started with a shorter lease timeout than the command reads: its fresh leases are
    fresh, not as old as the difference; a node that never beat falls back on the setting."""
    short_ms = 20_000
    run(enqueue(redis_url, *(request(f"http://a.test/{n}") for n in range(3))))

    async def lease_and_beat() -> None:
        client = FrontierClient(async_client(redis_url), KEYS, "node-short")
        held = await client.lease(2, short_ms)
        await client.heartbeat(
            [lease.id for lease in held], 30_000, short_ms, 0, "", interval_ms=5_000
        )
        await client.aclose()

    run(lease_and_beat())
    run(lease(redis_url, "node-silent", 1))
    shown = cli_json(capsys, redis_url, "leases", "pages")
    nodes = {n["node"]: n for n in shown["nodes"]}
    assert nodes["node-short"]["oldest_age"] < 30
    assert nodes["node-short"]["lease_timeout"] == 20.0
    assert nodes["node-silent"]["oldest_age"] < 30  # leased for LEASE_MS, the command's 60 s
    assert nodes["node-silent"]["lease_timeout"] is None
    code, out = cli(capsys, redis_url, "leases", "pages")
    assert code == 0
    assert "lease timeout 20s" in out


# -- Redis Cluster -----------------------------------------------------------------------------


def test_every_command_on_a_redis_cluster(
    redis_cluster_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    five_failures(redis_cluster_url)
    run(enqueue(redis_cluster_url, request("http://b.test/queued", priority=1)))
    run(lease(redis_cluster_url, "node-c", 1))
    run(enqueue(redis_cluster_url, request("http://b.test/next")))

    retried = cli_json(capsys, redis_cluster_url, "failed", "pages", "retry", "--reason", "spider")
    assert retried["retried"] == 2
    queue = cli_json(capsys, redis_cluster_url, "queue", "pages")
    assert [r["url"] for r in queue["head"]] == [
        "http://a.test/1",
        "http://b.test/next",  # priority 0, as a.test/0, whose new id is larger
        "http://a.test/0",
    ]
    assert queue["sites"] == {"a.test": 2, "b.test": 1}
    leases = cli_json(capsys, redis_cluster_url, "leases", "pages")
    assert [(n["node"], n["urls"]) for n in leases["nodes"]] == [
        ("node-c", ["http://b.test/queued"])
    ]
    failed = [
        orjson.loads(line)
        for line in cli(capsys, redis_cluster_url, "failed", "pages", "list", "--json")[
            1
        ].splitlines()
    ]
    assert len(failed) == 3
    dropped = cli_json(capsys, redis_cluster_url, "failed", "pages", "drop", "--yes")
    assert dropped["dropped"] == 3
    cluster = sync_client(redis_cluster_url)
    try:
        assert cluster.hlen(KEYS.failed) == 0
    finally:
        cluster.close()
