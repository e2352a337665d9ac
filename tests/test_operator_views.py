"""What an operator sees and does, on a live crawl of three real nodes.

One crawl per module, with fast heartbeats (1 s, lease 4 s) so node states
change within seconds. The site is a binary tree of pages, so the frontier grows
while it is crawled, at a cluster-wide 10 pages/s. While it runs: the status's
ETA is a lower bound with the discovery rate, its rate matches the site's own
count, and ``queue``, ``leases`` and ``failed`` show the live frontier; a
SIGKILLed node goes live -> late -> dead -> gone. Then, with the nodes idle:
a seed pushed again is reported as crawled before and only its page is fetched
again; ``--recrawl`` crawls every page again; a purge is refused while nodes are
live, forced, and a new seed is crawled by the same nodes. The commands run as
processes (the polling of node states calls the status code in-process, to see
states that last under a second). Tests run in file order.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from crawler.cli.status import frontier_status
from crawler.demo.nodes import REPO_ROOT
from crawler.demo.site import Site, page_path
from crawler.devservices import free_port
from crawler.frontier.keys import FrontierKeys
from tests.cli_process import crawler_process, ok
from tests.cluster import logs, running_nodes
from tests.frontier_state import queued

SPIDER = "pages"
KEYS = FrontierKeys.for_spider(SPIDER)
PAGES = 150
RATE = 6  # pages/s for the whole cluster (POLITENESS_RATE): the crawl takes about 25 s (at 10, a
# CI run under load finished the crawl before the test looked at the node it kills)
FAST = {"FRONTIER_HEARTBEAT_INTERVAL": "1", "FRONTIER_LEASE_TIMEOUT": "4"}
CLI_ENV = {f"CRAWLER_SETTING_{name}": value for name, value in FAST.items()}
KILLED = "node-2"


def cli(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return crawler_process(*args, "--redis", redis_url, env=CLI_ENV)


def wait_until(condition: Callable[[], object], timeout: float, pause: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(pause)
    return False


@dataclass
class Views:
    site: Site
    redis_url: str
    workdir: Path
    closed_url: str
    first_seed: str
    growing: dict[str, Any]  # status --json while the frontier grew
    measured_per_minute: float  # the site's own count over the same minute of fetching
    queue: dict[str, Any]
    leases: dict[str, Any]
    failed: list[dict[str, Any]]
    states: list[str]  # the killed node's states, in the order seen
    all_view: str  # status --all once it was gone
    default_view: str
    finished: dict[str, Any]
    head: subprocess.CompletedProcess[str]


def idle(client: redis.Redis) -> bool:
    return queued(client, KEYS) == 0 and client.zcard(KEYS.leases) == 0


@pytest.fixture(scope="module")
def views(
    module_redis_url: str, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Views]:
    workdir = tmp_path_factory.mktemp("views")
    settings = {
        **FAST,
        "POLITENESS_RATE": str(RATE),
        "POLITENESS_BURST": "1",
        "FRONTIER_PREFETCH": "4",
        "CONCURRENT_REQUESTS": "2",  # few leases per node: the queue keeps a head to show
        "FRONTIER_RECLAIM_BATCH": "1",  # a dead node's leases come back one per heartbeat
        "LEDGER_INTERVAL": "1",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "0",  # idle nodes stay up for the later tests
        "KAFKA_TOPIC_TEMPLATE": f"views-{uuid.uuid4().hex[:8]}-{{spider}}-items",
        "KAFKA_SPOOL_DIR": str(workdir / "spool"),
        "CRAWLER_CRAWL_ID": "views",
        "RETRY_TIMES": "0",
    }
    env = {"REDIS_URL": module_redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    client = redis.Redis.from_url(module_redis_url)
    closed_url = f"http://127.0.0.1:{free_port()}/gone"
    with (
        pytest.MonkeyPatch.context() as patch,
        Site(PAGES) as site,
        running_nodes(3, workdir=workdir, env=env, settings=settings) as nodes,
    ):
        for name, value in CLI_ENV.items():
            patch.setenv(name, value)  # the in-process status reads the same timings
        assert wait_until(lambda: client.zcard(KEYS.nodes) == 3, 90), logs(workdir)
        first_seed = ok(cli(module_redis_url, "seed", SPIDER, site.url(0), closed_url))

        def status() -> dict[str, Any]:
            (row,) = orjson.loads(
                ok(cli(module_redis_url, "status", SPIDER, "--json", "--crawl", "views"))
            )
            return dict(row)

        growing: dict[str, Any] = {}

        def grown() -> bool:
            growing.update(status())
            return bool(growing["ledger"]["totals"].get("done", 0) >= 40)

        assert wait_until(grown, 60), logs(workdir)
        # The site's own rate over the last full ledger window of fetching.
        since = time.monotonic() - growing["ledger"]["active_seconds"]
        with site._lock:
            recent = sum(1 for at in site.hit_times if at >= since)
        measured = recent * 60 / growing["ledger"]["active_seconds"]
        queue = orjson.loads(ok(cli(module_redis_url, "queue", SPIDER, "--top", "5", "--json")))
        failed = [
            orjson.loads(line)
            for line in ok(cli(module_redis_url, "failed", SPIDER, "list", "--json")).splitlines()
        ]
        leases: dict[str, Any] = {}

        def killed_holds_leases() -> bool:
            leases.update(orjson.loads(ok(cli(module_redis_url, "leases", SPIDER, "--json"))))
            return any(n["node"] == KILLED and n["leases"] >= 4 for n in leases["nodes"])

        assert wait_until(killed_holds_leases, 30), (leases, logs(workdir))
        nodes[2].send_signal(signal.SIGKILL)
        states: list[str] = []

        def killed_state() -> str:
            snapshot = frontier_status(client, SPIDER, "views")["snapshot"]
            (node,) = [n for n in snapshot["nodes"] if n["node"] == KILLED]
            if not states or states[-1] != node["state"]:
                states.append(node["state"])
            return node["state"]

        assert wait_until(lambda: killed_state() == "gone", 30, pause=0.05), states
        all_view = ok(cli(module_redis_url, "status", SPIDER, "--all", "--crawl", "views"))
        default_view = ok(cli(module_redis_url, "status", SPIDER, "--crawl", "views"))
        finished: dict[str, Any] = {}

        def done() -> bool:
            finished.update(status())
            return bool(finished["state"] == "finished")

        assert wait_until(done, 90), (finished, logs(workdir))
        head = subprocess.run(  # noqa: S602 - the pipe is what is tested
            f"{sys.executable} -m crawler status {SPIDER} --redis {module_redis_url} | head -1; "
            'echo "exit=${PIPESTATUS[0]}"',
            shell=True,
            executable="/bin/bash",
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        yield Views(
            site=site,
            redis_url=module_redis_url,
            workdir=workdir,
            closed_url=closed_url,
            first_seed=first_seed,
            growing=growing,
            measured_per_minute=measured,
            queue=queue,
            leases=leases,
            failed=failed,
            states=states,
            all_view=all_view,
            default_view=default_view,
            finished=finished,
            head=head,
        )
    client.close()


def page_hits(site: Site) -> Counter[str]:
    with site._lock:
        return Counter({page_path(i): site.hits[page_path(i)] for i in range(site.pages)})


def crawled_again(views: Views, before: Counter[str], expected: Counter[str]) -> bool:
    """Every page's hits went up by ``expected`` and the frontier is idle again."""
    client = redis.Redis.from_url(views.redis_url)
    try:
        gained = page_hits(views.site) - before
        return gained == expected and idle(client)
    finally:
        client.close()


# -- while the crawl runs ---------------------------------------------------------------------


def test_the_first_seeds_are_new(views: Views) -> None:
    assert f"new: {views.site.url(0)}" in views.first_seed
    assert f"new: {views.closed_url}" in views.first_seed
    assert "Pushed 2 seeds to pages:start_urls (2 new, 0 crawled before), rejected 0" in (
        views.first_seed
    )


def test_eta_is_a_lower_bound_with_the_discovery_rate_while_the_frontier_grows(
    views: Views,
) -> None:
    row = views.growing
    assert row["state"] == "running"
    assert row["eta_lower_bound"] is True
    assert row["enqueued_per_minute"] > 0
    assert row["eta_seconds"] is not None and row["eta_seconds"] > 0


def test_the_page_rate_is_the_rate_the_site_saw(views: Views) -> None:
    """Over the seconds nodes fetched in (not since they started, idle before the seed)."""
    rate = views.growing["pages_per_minute"]
    assert 0.7 * views.measured_per_minute <= rate <= 1.3 * views.measured_per_minute, (
        rate,
        views.measured_per_minute,
    )
    assert rate <= RATE * 60 * 1.3


def test_queue_shows_the_live_head_and_the_site(views: Views) -> None:
    site = views.site.base_url.removeprefix("http://")
    assert views.queue["queued"] > 0, (views.queue, views.growing)
    assert 1 <= len(views.queue["head"]) <= 5
    assert {row["site"] for row in views.queue["head"]} == {site}
    assert all(row["url"].startswith(views.site.base_url) for row in views.queue["head"])
    # the crawl goes on: `queued` is the queue's length when the count began, the sites are
    # counted over the queue walked after it (a CI run: 32 counted, 29 at the start)
    assert views.queue["sites"] == {site: views.queue["scanned"]}


def test_leases_are_listed_by_live_node(views: Views) -> None:
    holders = {node["node"] for node in views.leases["nodes"] if node["leases"]}
    assert KILLED in holders and holders <= {"node-0", "node-1", "node-2"}
    assert views.leases["leases"] == sum(node["leases"] for node in views.leases["nodes"])


def test_failed_lists_the_unreachable_seed(views: Views) -> None:
    assert [record["request"]["url"] for record in views.failed] == [views.closed_url]
    assert views.failed[0]["reason"].startswith("download/")


def test_a_killed_node_goes_live_late_dead_then_gone(views: Views) -> None:
    assert views.states == ["live", "late", "dead", "gone"]
    assert f"    {KILLED}" in views.all_view
    assert f"    {KILLED}" not in views.default_view
    assert "2 live, 1 dead (1 gone: --all)" in views.default_view


def test_status_into_head_ends_quietly(views: Views) -> None:
    assert views.head.stdout.splitlines()[0].startswith("pages  (crawl ")
    assert views.head.stdout.splitlines()[-1] in ("exit=0", "exit=141")
    assert views.head.stderr == ""


def test_the_crawl_finished_every_page(views: Views) -> None:
    assert views.finished["state"] == "finished"
    assert views.finished["eta_seconds"] == 0.0
    assert set(page_hits(views.site)) == {page_path(i) for i in range(PAGES)}
    assert min(page_hits(views.site).values()) >= 1


# -- with the nodes idle ----------------------------------------------------------------------


def test_a_seed_pushed_again_is_reported_and_only_its_page_is_fetched(views: Views) -> None:
    before = page_hits(views.site)
    out = ok(cli(views.redis_url, "seed", SPIDER, views.site.url(0)))
    assert f"crawled before: {views.site.url(0)}: its page is fetched again" in out
    assert "--recrawl" in out
    assert "(0 new, 1 crawled before)" in out
    assert wait_until(lambda: crawled_again(views, before, Counter({"/": 1})), 30)
    time.sleep(2)  # the links it leads to were crawled: none is fetched
    assert page_hits(views.site) - before == Counter({"/": 1})


@pytest.mark.slow
def test_recrawl_fetches_every_page_again(views: Views) -> None:
    before = page_hits(views.site)
    out = ok(cli(views.redis_url, "seed", SPIDER, "--recrawl", views.site.url(0)))
    assert "Forgot every URL the crawl had seen; 2 live nodes reset" in out, out
    assert f"new: {views.site.url(0)}" in out
    everything = Counter({page_path(i): 1 for i in range(PAGES)})
    assert wait_until(lambda: crawled_again(views, before, everything), 60), (
        page_hits(views.site) - before
    )


def test_recrawl_is_refused_while_work_is_queued(views: Views) -> None:
    client = redis.Redis.from_url(views.redis_url)
    try:
        # A lease of a node that is not running, for a minute: work left in the crawl.
        seconds, _ = client.time()
        client.zadd(KEYS.leases, {"ffffffffffff": (seconds + 60) * 1000})
        client.hset(KEYS.inflight, "ffffffffffff", "ghost\t0")
        refused = cli(views.redis_url, "seed", SPIDER, "--recrawl", views.site.url(0))
        assert refused.returncode == 1
        assert "not recrawled" in refused.stderr
        assert "0 queued and 1 leased requests" in refused.stderr
        assert client.exists(KEYS.dupefilter)  # nothing forgotten
        assert client.llen(f"{SPIDER}:start_urls") == 0  # nothing pushed
    finally:
        client.zrem(KEYS.leases, "ffffffffffff")
        client.hdel(KEYS.inflight, "ffffffffffff")
        client.close()


def test_purge_is_refused_then_forced_and_the_same_nodes_crawl_a_new_seed(views: Views) -> None:
    refused = cli(views.redis_url, "purge", SPIDER, "--yes")
    assert refused.returncode == 1
    assert "2 nodes of 'pages' are live (node-0, node-1)" in refused.stderr
    forced = ok(cli(views.redis_url, "purge", SPIDER, "--yes", "--force"))
    assert "; 2 live nodes reset" in forced
    before = page_hits(views.site)
    out = ok(cli(views.redis_url, "seed", SPIDER, views.site.url(0)))
    assert f"new: {views.site.url(0)}" in out
    everything = Counter({page_path(i): 1 for i in range(PAGES)})
    assert wait_until(lambda: crawled_again(views, before, everything), 60), (
        page_hits(views.site) - before,
        logs(views.workdir),
    )
