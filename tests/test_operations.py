"""Operating the cluster: admin snapshot, ledger, and the status/top/seed/requeue/purge commands."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
import redis
from redis.asyncio import Redis as AsyncRedis
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings

from crawler.cli.main import main
from crawler.demo.nodes import REPO_ROOT
from crawler.demo.site import Site
from crawler.devservices import free_port
from crawler.extensions.ledger import LedgerSettings
from crawler.extensions.ledger_layout import LedgerKeys, ledger_fields
from crawler.frontier.admin import FrontierAdmin, discover_spiders
from crawler.frontier.client import FrontierClient, NewRequest
from crawler.frontier.keys import FrontierKeys
from tests.cluster import logs, running_nodes, wait_for_exit

KEYS = FrontierKeys.for_spider("pages")


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


def server_ms(client: redis.Redis) -> int:
    seconds, micros = client.time()
    return int(seconds * 1000 + micros // 1000)


# -- unit tests: snapshot, ledger fields, settings ---------------------------------------------


def test_snapshot_reads_every_part_of_the_shared_state(redis_client: redis.Redis) -> None:
    now = server_ms(redis_client)
    redis_client.zadd(KEYS.queue, {"000000000001": 0, "000000000002": -5})
    redis_client.zadd(KEYS.leases, {"000000000003": now - 1000, "000000000004": now + 60_000})
    redis_client.hset(KEYS.inflight, "000000000003", "node-a\t0")
    redis_client.hset(KEYS.inflight, "000000000004", "node-b\t-1")
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
    assert "rejected (scheme): 'ftp://h/2'" in out
    assert "rejected (url)" in out
    assert "Pushed 3 seeds to pages:start_urls, rejected 2" in out
    # Nodes pop from the right: submission order.
    popped = list(reversed(redis_client.lrange("pages:start_urls", 0, -1)))
    assert popped == [b"http://h/1", b"http://h/3", b'{"url": "http://h/4", "priority": 2}']


def test_seed_reads_stdin(redis_url: str, redis_client: redis.Redis) -> None:
    result = crawler_cli(
        redis_url, "seed", "pages", "-", "--json", stdin="http://h/a\nhttp://h/b\n"
    )
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout) == {"key": "pages:start_urls", "pushed": 2, "rejected": []}
    assert redis_client.llen("pages:start_urls") == 2


def test_requeue_returns_an_expired_lease(redis_url: str, redis_client: redis.Redis) -> None:
    async def lease_briefly() -> str:
        client = FrontierClient(AsyncRedis.from_url(redis_url), KEYS, "gone-node")
        try:
            await client.complete(None, "done", [NewRequest("fp1", -3.0, b'{"url": "http://h/"}')])
            (lease,) = await client.lease(1, lease_ms=1)
            return lease.id
        finally:
            await client.aclose()

    lease_id = asyncio.run(lease_briefly())
    time.sleep(0.05)
    assert redis_client.zcard(KEYS.queue) == 0
    result = crawler_cli(redis_url, "requeue", "pages", "--json", "--crawl", "c1")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout) == {"spider": "pages", "requeued": 1}
    assert redis_client.zrange(KEYS.queue, 0, -1, withscores=True) == [(lease_id.encode(), -3.0)]
    assert (redis_client.zcard(KEYS.leases), redis_client.hlen(KEYS.inflight)) == (0, 0)
    assert redis_client.hget(LedgerKeys.for_crawl("pages", "c1").total, "reclaimed") == b"1"
    again = crawler_cli(redis_url, "requeue", "pages")
    assert "Returned 0 expired leases of 'pages'" in again.stdout


def test_purge_asks_and_deletes_ledgers_too(redis_url: str, redis_client: redis.Redis) -> None:
    redis_client.zadd(KEYS.queue, {"000000000001": 0})
    redis_client.lpush("pages:start_urls", "http://h/")
    redis_client.hset(LedgerKeys.for_crawl("pages", "c1").total, "done", 1)
    redis_client.hset(LedgerKeys.for_crawl("pages", "c1").minute(1), "done", 1)
    redis_client.lpush("other:start_urls", "http://h/")

    refused = crawler_cli(redis_url, "purge", "pages", stdin="nope\n")
    assert refused.returncode == 1
    assert redis_client.exists(KEYS.queue) == 1

    kept = crawler_cli(redis_url, "purge", "pages", "--yes", "--keep-seeds", "--json")
    assert kept.returncode == 0, kept.stderr
    assert orjson.loads(kept.stdout)["deleted"] == 3
    assert redis_client.keys("*pages*") == [b"pages:start_urls"]

    crawler_cli(redis_url, "purge", "pages", "--yes")
    assert redis_client.keys("*") == [b"other:start_urls"]
    assert "Nothing to purge" in crawler_cli(redis_url, "purge", "pages", "--yes").stdout


# -- three real nodes --------------------------------------------------------------------------

FLAKY = ("/p/3.html", "/p/10.html", "/p/77.html")  # answer 500 once; Scrapy retries them


@pytest.fixture
def flaky_site() -> Iterator[Site]:
    with Site(300, delay=0.02, answer_once={path: (500, {}) for path in FLAKY}) as site:
        yield site


def wait_until(condition: Callable[[], object], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_live_crawl_status_top_and_ledger(
    redis_url: str, redis_client: redis.Redis, flaky_site: Site, tmp_path: Path
) -> None:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "CRAWLER_STANDALONE_FEED": str(tmp_path / "items.jsonl"),
        "LEDGER_INTERVAL": "1",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
        "CRAWLER_CRAWL_ID": "ops",
    }
    closed_port = free_port()
    seeds = [
        flaky_site.url(0),
        flaky_site.base_url + "/missing/1.html",  # 404
        f"http://127.0.0.1:{closed_port}/",  # connection refused: fails after retries
        "ftp://127.0.0.1/nope",  # rejected by `crawler seed`
    ]
    with running_nodes(3, workdir=tmp_path / "nodes", env=env, settings=settings) as nodes:
        assert wait_until(lambda: redis_client.zcard(KEYS.nodes) == 3, 60), logs(tmp_path / "nodes")
        seeded = crawler_cli(redis_url, "seed", "pages", *seeds)
        assert seeded.returncode == 1, seeded.stderr
        assert "rejected (scheme): 'ftp://127.0.0.1/nope'" in seeded.stdout
        redis_client.lpush("pages:start_urls", '{"url": ')  # a bad seed straight to Redis
        assert wait_until(lambda: redis_client.hlen(LedgerKeys.for_crawl("pages", "ops").total), 20)

        status = crawler_cli(redis_url, "status", "--json", "--crawl", "ops")
        assert status.returncode == 0, status.stderr
        (row,) = orjson.loads(status.stdout)
        assert len([node for node in row["snapshot"]["nodes"] if node["live"]]) == 3
        assert row["ledger"]["totals"]["seeded"] >= 1
        top = crawler_cli(redis_url, "top", "--once", "--crawl", "ops")
        assert top.returncode == 0, top.stderr
        assert "pages  [" in top.stdout
        assert all(f"node-{n}" in top.stdout for n in range(3))
        assert "\x1b[" not in top.stdout
        codes = wait_for_exit(nodes, timeout=180)
    assert codes == [0, 0, 0], logs(tmp_path / "nodes")
    errors = [line for line in logs(tmp_path / "nodes").splitlines() if "] ERROR:" in line]
    expected = (f"127.0.0.1:{closed_port}/", "Invalid seed")  # the dead port and the bad seed
    assert [line for line in errors if not any(text in line for text in expected)] == []

    totals = FrontierAdmin(redis_client, "pages").ledger("ops")["totals"]
    assert (redis_client.zcard(KEYS.queue), redis_client.zcard(KEYS.leases)) == (0, 0)
    assert totals["seeded"] == 4  # 3 valid from `crawler seed`, 1 bad pushed by hand
    assert totals["invalid_seeds"] == 1
    assert totals["done"] + totals["failed"] == (
        totals["leased"]
        - totals.get("requeued", 0)
        - totals.get("reclaimed", 0)
        - totals.get("released", 0)
    )
    assert totals["enqueued"] == totals["done"] + totals["failed"]
    # Every page, the 404 and the dead port, plus the retries (new requests of their own):
    # one per 500 answer and two for the dead port (RETRY_TIMES = 2).
    assert totals["enqueued"] == flaky_site.pages + 2 + len(FLAKY) + 2
    reasons = {field: n for field, n in totals.items() if field.startswith("failed/")}
    assert (
        reasons
        == {"failed/download/DownloadConnectionRefusedError": 1}
        == {
            f"failed/{reason}": n
            for reason, n in FrontierAdmin(redis_client, "pages")
            .snapshot()["failed_by_reason"]
            .items()
        }
    )
    assert totals["failed"] == 1
    assert redis_client.hlen(KEYS.failed) == 1
    assert totals["pages"] == sum(flaky_site.hits.values())
    assert totals["items/scraped"] == len((tmp_path / "items.jsonl").read_text().splitlines())

    text = crawler_cli(redis_url, "status", "pages", "--crawl", "ops")
    assert text.returncode == 0, text.stderr
    assert "finished" in text.stdout
    assert "download/" in text.stdout
    assert "invalid seeds  1: json 1" in text.stdout
