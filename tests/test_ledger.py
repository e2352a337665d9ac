"""The crawl ledger adds up: pushes that timed out but ran are added once; runs that were
killed before their final push are named by ``crawler status``; failed requests retried by
hand are counted."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
import redis.asyncio
from scrapy.utils.test import get_crawler

from crawler.cli.spool import add_replayed_to_ledger
from crawler.cli.status import frontier_status
from crawler.cli.status_text import ledger_text, render
from crawler.devservices.ports import free_port
from crawler.extensions.ledger import LedgerExtension
from crawler.extensions.ledger_layout import LedgerKeys
from crawler.frontier.admin import FrontierAdmin
from crawler.frontier.keys import FrontierKeys
from crawler.lua import script_text, text
from crawler.redis_connection import server_time_ms
from tests.cluster import logs, running_nodes, wait_for_log
from tests.frontier_state import leases_ended, put_queued
from tests.one_node import crawl
from tests.test_operations import crawler_cli, status_with_nothing_else

KEYS = LedgerKeys.for_crawl("pages", "c1")


class RanThenTimedOut:
    """A script whose first ``times`` calls run in Redis and then time out on the client."""

    def __init__(self, script: Any, times: int) -> None:
        self.script = script
        self.times = times

    async def __call__(self, **kwargs: Any) -> Any:
        result = await self.script(**kwargs)
        if self.times > 0:
            self.times -= 1
            raise redis.exceptions.TimeoutError("Timeout reading from socket")
        return result


def _extension(redis_url: str, run: str) -> LedgerExtension:
    settings = {"REDIS_URL": redis_url, "CRAWLER_CRAWL_ID": "c1", "LEDGER_ENABLED": True}
    crawler = get_crawler(settings_dict={**settings, "LEDGER_INTERVAL": 5.0})
    extension = LedgerExtension(crawler)
    extension._keys = KEYS
    extension._run = run
    return extension


def test_a_push_that_timed_out_but_ran_is_added_once(
    redis_url: str, redis_client: redis.Redis
) -> None:
    extension = _extension(redis_url, "node-a:1")
    stats = extension.stats

    async def run() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        extension._script = RanThenTimedOut(
            client.register_script(script_text("crawler.frontier", "ledger_push")), 2
        )  # type: ignore[assignment]
        try:
            stats.set_value("frontier/done", 10)
            for _ in range(3):  # the first two attempts land, then time out here
                try:
                    await extension.push()
                except redis.exceptions.TimeoutError:
                    stats.inc_value("frontier/done", 5)  # work goes on meanwhile
            await extension.push(final=True)
        finally:
            await client.aclose()

    asyncio.run(run())
    assert stats.get_value("frontier/done") == 20
    assert redis_client.hget(KEYS.total, "done") == b"20"
    view = FrontierAdmin(redis_client, "pages").ledger("c1")
    assert (view["runs"], view["short_runs"]) == (1, [])
    assert ledger_text(view).startswith("adds up")


def test_a_spool_replay_is_not_counted_as_a_node_run(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """``crawler spool replay`` adds its messages to the ledger in a final push of its own: the
    ledger says so, and does not count it among the crawl's node runs."""
    extension = _extension(redis_url, "node-a:1")

    async def run() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        extension._script = client.register_script(script_text("crawler.frontier", "ledger_push"))
        try:
            extension.stats.set_value("frontier/done", 3)
            await extension.push(final=True)
        finally:
            await client.aclose()

    asyncio.run(run())
    add_replayed_to_ledger(redis_client, "pages", "c1", "node-a", {"items/replayed": 4})
    view = FrontierAdmin(redis_client, "pages").ledger("c1")
    assert (view["runs"], view["replays"], view["short_runs"]) == (1, 1, [])
    assert view["totals"]["items/replayed"] == 4
    assert ledger_text(view) == (
        "adds up (1 node run and 1 spool replay, none stopped without its final push)"
    )


class TimesOutFor:
    """A script whose first ``times`` calls on key ``key`` run in Redis, then time out here."""

    def __init__(self, script: Any, key: str, times: int) -> None:
        self.script = script
        self.key = key
        self.times = times

    async def __call__(self, **kwargs: Any) -> Any:
        result = await self.script(**kwargs)
        if self.times > 0 and kwargs["keys"][0] == self.key:
            self.times -= 1
            raise redis.exceptions.TimeoutError("Timeout reading from socket")
        return result


@pytest.mark.parametrize("timed_out", ["own", "other"])
def test_a_node_credits_a_replay_of_another_crawls_spool_to_that_crawl(
    redis_url: str, redis_client: redis.Redis, timed_out: str
) -> None:
    """Messages of crawl c0 a node of c1 replayed are c0's ``items/replayed`` (and, delivered,
    its ``items/delivered``), pushed as a spool replay of c0's, added once however often a push
    is sent again: the node's own push or c0's timing out after it ran."""
    extension = _extension(redis_url, "node-a:1")
    extension._replay_run = "node-a:replay-1"
    extension._spider = "pages"
    stats = extension.stats
    c0 = LedgerKeys.for_crawl("pages", "c0")

    async def run() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        script = client.register_script(script_text("crawler.frontier", "ledger_push"))
        key = KEYS.total if timed_out == "own" else c0.total
        extension._script = TimesOutFor(script, key, 2)  # type: ignore[assignment]
        try:
            stats.set_value("kafka/delivered", 5)
            stats.set_value("kafka/replayed", 5)
            stats.set_value("kafka/replay_of_crawl/delivered/c0", 3)
            for _ in range(2):
                with pytest.raises(redis.exceptions.TimeoutError):
                    await extension.push()
                stats.inc_value("kafka/replayed", 1)
                stats.inc_value("kafka/delivered", 1)
                stats.inc_value("kafka/replay_of_crawl/delivered/c0", 1)
            stats.inc_value("kafka/replay_dead_lettered", 1)
            stats.inc_value("kafka/replay_of_crawl/dead_lettered/c0", 1)
            await extension.push(final=True)
        finally:
            await client.aclose()

    asyncio.run(run())
    own = redis_client.hmget(KEYS.total, ["items/replayed", "items/delivered"])
    assert own == [b"2", b"2"]  # 7 + 1 replayed, 6 of them c0's; 7 delivered, 5 c0's
    view = FrontierAdmin(redis_client, "pages").ledger("c0")
    assert (view["totals"]["items/replayed"], view["totals"]["items/delivered"]) == (6, 5)
    assert (view["runs"], view["replays"], view["short_runs"]) == (0, 1, [])


def put_runs(client: redis.Redis, runs: dict[str, tuple[int, int, str]]) -> int:
    """Record node runs as ``ledger_push.lua`` does, each run -> (its last push, how many ms
    ago, its state), pushing every 5 s; returns Redis's time now (ms)."""
    now = server_time_ms(client, KEYS.total)
    for run, (push, ago, state) in runs.items():
        for field, value in (("push", push), ("at", now - ago), ("state", state), ("every", 5000)):
            client.hset(KEYS.runs, f"{run}:{field}", value)
    return now


def test_a_run_killed_before_its_final_push_is_named(redis_client: redis.Redis) -> None:
    now = put_runs(
        redis_client,
        {
            "node-a:1": (9, 60_000, "running"),
            "node-b:2": (4, 60_000, "final"),
            "node-c:3": (2, 1000, "running"),
            # silent as long as node-a:1, but its node beats: Redis was away, it pushes again
            "node-d:4": (7, 60_000, "running"),
        },
    )
    redis_client.zadd("{pages}:nodes", {"node-d": now + 30_000, "node-a": now - 20_000})
    view = FrontierAdmin(redis_client, "pages").ledger("c1")
    assert (view["runs"], view["short_runs"]) == (4, ["node-a:1"])
    assert "SHORT: 1 of 4 node runs" in ledger_text(view)
    assert "node-a:1" in ledger_text(view)


def test_a_ledger_whose_runs_have_not_made_their_final_push_says_so_far(
    redis_client: redis.Redis,
) -> None:
    """``crawler status`` said the ledger "adds up" while a live node's last interval, or a
    node killed a moment ago, was not in it yet: 15 done of 26 beside "finished" (an audit)."""
    put_runs(redis_client, {"node-a:1": (3, 1000, "running"), "node-b:2": (4, 60_000, "final")})
    view = FrontierAdmin(redis_client, "pages").ledger("c1")
    assert (view["short_runs"], view["open_runs"]) == ([], ["node-a:1"])
    assert ledger_text(view) == (
        "adds up so far (2 node runs, none stopped without its final push; 1 has not made it "
        "yet: its counts since its last push are not in: node-a:1)"
    )


def test_a_ledger_of_many_killed_runs_names_five(redis_client: redis.Redis) -> None:
    """Pods killed for weeks under new names: the status line named every run of them (30
    after 30 pod lives in an audit, each a line's worth); five, and how many more."""
    put_runs(redis_client, {f"pod-{i}:r{i}": (3, 60_000, "running") for i in range(30)})
    view = FrontierAdmin(redis_client, "pages").ledger("c1")
    assert len(view["short_runs"]) == 30
    text = ledger_text(view)
    assert text.startswith("SHORT: 30 of 30 node runs stopped without their final push")
    assert sum(run in text for run in view["short_runs"]) == 5
    assert text.endswith(" and 25 more (--json names them all)")


def test_a_killed_run_is_named_when_its_node_id_runs_again(redis_client: redis.Redis) -> None:
    """A pod restarted in place keeps its name, so its node id: the id is alive again, but
    the killed run never pushes again. Only a node id's newest run may push again."""
    now = put_runs(
        redis_client, {"node-a:1": (9, 60_000, "running"), "node-a:2": (1, 1000, "running")}
    )
    redis_client.zadd("{pages}:nodes", {"node-a": now + 30_000})
    view = FrontierAdmin(redis_client, "pages").ledger("c1")
    assert (view["runs"], view["short_runs"]) == (2, ["node-a:1"])


@pytest.mark.parametrize("number", [1, 2])
def test_the_push_script_adds_each_number_once(redis_client: redis.Redis, number: int) -> None:
    push = redis_client.register_script(script_text("crawler.frontier", "ledger_push"))
    args: list[str | int] = ["r:1", number, KEYS.minute_prefix, 60, "running", 5000, "done", 3]
    assert push(keys=[KEYS.total, KEYS.runs], args=args) == 1
    assert push(keys=[KEYS.total, KEYS.runs], args=args) == 0
    older: list[str | int] = ["r:1", number - 1, KEYS.minute_prefix, 60, "running", 5000, "done", 7]
    assert push(keys=[KEYS.total, KEYS.runs], args=older) == 0
    assert redis_client.hget(KEYS.total, "done") == b"3"
    assert int(redis_client.hget(KEYS.total, "started_ms") or 0) > 0


def test_a_run_is_in_the_ledger_from_its_start(redis_url: str, tmp_path: Path) -> None:
    """Killed before its first push (an interval after start), a run was in no ledger, and
    `crawler status` said the ledger added up without it."""
    keys = LedgerKeys.for_crawl("pages", "c-start")
    client = redis.Redis.from_url(redis_url)
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "LEDGER_INTERVAL": "60",
        "CRAWLER_CRAWL_ID": "c-start",
        "CRAWLER_STANDALONE_FEED": "",
        "METRICS_ENABLED": "False",
    }
    try:
        with running_nodes(1, workdir=tmp_path, env=env, settings=settings) as (node,):
            assert wait_for_log(tmp_path / "node-0.log", "Ledger ", timeout=30), logs(tmp_path)
            deadline = time.monotonic() + 10
            while not client.hlen(keys.runs) and time.monotonic() < deadline:
                time.sleep(0.1)
            runs = client.hgetall(keys.runs)
            node.kill()
    finally:
        client.close()
    fields = {text(field).rsplit(":", 1)[1] for field in runs}
    assert fields >= {"state", "push"}, logs(tmp_path)


def test_a_failed_request_retried_by_hand_keeps_the_ledger_adding_up(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """``crawler failed retry`` puts a failed request back into the queue: it is leased and
    finishes once more without being enqueued again. Before, the ledger did not count it, and
    ``enqueued == done + failed`` broke after the next run."""
    dead_port = f"http://127.0.0.1:{free_port()}/"
    settings = {"RETRY_TIMES": "1", "DOWNLOAD_TIMEOUT": "5"}
    first = crawl("pages", [dead_port], workdir=tmp_path / "1", redis_url=redis_url,
                  settings=settings)  # fmt: skip
    assert len(first.failed) == 1
    retried = crawler_cli(redis_url, "failed", "pages", "retry", "--json")
    assert retried.returncode == 0, retried.stderr
    assert orjson.loads(retried.stdout)["retried"] == 1
    second = crawl("pages", [], workdir=tmp_path / "2", redis_url=redis_url, settings=settings)
    assert (len(second.failed), second.leftover) == (1, 0)  # it failed again

    status = frontier_status(redis_client, "pages", "default")
    totals = status["ledger"]["totals"]
    assert status["state"] == "finished"
    assert totals["enqueued"] + totals.get("retried", 0) == totals["done"] + totals["failed"]
    assert totals["retried"] == 1
    assert totals["leased"] == leases_ended(totals)
    assert ledger_text(status["ledger"]).startswith("adds up")
    assert ", 1 retried (crawler failed retry)," in render(status_with_nothing_else(status))


def test_status_of_a_crawl_no_live_node_runs_names_the_crawls_they_run(
    redis_client: redis.Redis,
) -> None:
    """Nodes started with -s CRAWLER_CRAWL_ID=c1: `crawler status pages` showed 0 done, 0.0%,
    ETA ? while a node held 20 leases, with no word of the crawl id (an audit)."""
    now = put_runs(redis_client, {"node-a:1": (3, 1000, "running")})
    redis_client.zadd("{pages}:nodes", {"node-a": now + 30_000})
    # node-a (a pod keeps its name) ran the crawls default and c0 before: runs that stay
    for crawl_id, state in (("default", "running"), ("c0", "final")):
        runs = LedgerKeys.for_crawl("pages", crawl_id).runs
        ago = now - 86_400_000
        for field, value in (("push", 9), ("at", ago), ("every", 5000), ("state", state)):
            redis_client.hset(runs, f"node-a:0:{field}", value)
    admin = FrontierAdmin(redis_client, "pages")
    assert admin.ledger("c1")["live_crawls"] == []
    assert admin.ledger("default")["live_crawls"] == ["c1"]
    text = render(status_with_nothing_else(frontier_status(redis_client, "pages", "default")))
    assert "no live node runs crawl 'default'; the live nodes run c1" in text
    assert "crawler status pages --crawl c1" in text


def test_status_of_a_crawl_nothing_ever_ran_is_not_finished(redis_client: redis.Redis) -> None:
    """`crawler status pages --crawl nosuch` (a typo), or a crawl whose nodes were refused at
    start, said `finished`, 0 done, exit 0: a script waiting for `finished` took it (an
    audit)."""
    status = frontier_status(redis_client, "pages", "nosuch")
    assert status["state"] == "not_started"
    assert "NOT STARTED: no request of this crawl was ever enqueued" in render(
        status_with_nothing_else(status)
    )
    redis_client.hset(LedgerKeys.for_crawl("pages", "ran").total, "enqueued", 1)
    redis_client.hset(LedgerKeys.for_crawl("pages", "ran").total, "done", 1)
    assert frontier_status(redis_client, "pages", "ran")["state"] == "finished"


def test_progress_counts_the_seeds_waiting_as_work_left(redis_client: redis.Redis) -> None:
    """20,000 seeds pushed, a few hundred crawled: status said 99.2% and ETA 0:00:00 while
    70% of the seeds waited (an audit): each is a request at least, not yet in the frontier."""
    keys = LedgerKeys.for_crawl("pages", "default")
    redis_client.hset(keys.total, mapping={"enqueued": 100, "done": 90})
    put_queued(redis_client, FrontierKeys.for_spider("pages"), 0, [b"{}"] * 10)
    redis_client.lpush("pages:start_urls", *[f"http://h/{n}" for n in range(900)])
    status = frontier_status(redis_client, "pages", "default")
    assert status["progress"] == 90 / 1000
