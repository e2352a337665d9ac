"""Every ``crawler`` command against the real state of a real cluster.

One crawl per module: three nodes crawl a local site into Kafka, seeded by
``crawler seed``. A page answers 429, so every node pauses for its Retry-After
with requests leased: the status and top taken then show a crawl in flight. A
schema refuses ten pages (real dead letters), a seed's port is closed (a failed
request), three pages answer 500 once (retries). Then, with Kafka unreachable,
a node is SIGKILLed holding leases (``crawler requeue``) and another is stopped
and leaves a spool (``crawler spool``), which a topic refusing every message
dead-letters (``crawler dead-letters drop``). The commands run as processes,
as an operator runs them, and the tests run in file order.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from redis.asyncio import Redis as AsyncRedis

from crawler.demo.nodes import REPO_ROOT, start_node, stop_node
from crawler.demo.site import Site, page_title
from crawler.devservices import free_port
from crawler.extensions.ledger_layout import LedgerKeys
from crawler.frontier.admin import FrontierAdmin, Snapshot
from crawler.frontier.keys import FrontierKeys
from crawler.kafka.dead_letters import DeadLetterQueues, Span
from crawler.kafka.reader import read_topic
from crawler.sessions import Health, RedisSessionStore
from tests.cli_process import crawler_process, ok
from tests.cluster import LOCAL_SITE_SETTINGS, logs, running_nodes, wait_for_exit
from tests.frontier_state import leases_ended

SPIDER = "pages"
KEYS = FrontierKeys.for_spider(SPIDER)
PAGES = 300
FLAKY = ("/p/3.html", "/p/10.html", "/p/77.html")  # answer 500 once; Scrapy retries them
LIMITED = "/p/40.html"  # answers 429 once: every node waits out its Retry-After
RETRY_AFTER = 10  # seconds: the window in which the status is taken mid-crawl
REJECTED = range(20, 30)  # pages whose titles the crawl's schema refuses
GROUP = "crawler-dead-letters"
STOPPED_ITEMS = 5  # pages the node with Kafka unreachable fetches before it is stopped


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return crawler_process(*args, stdin=stdin)


def wait_until(condition: Callable[[], object], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def create_topics(bootstrap: str, topics: dict[str, dict[str, str]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=3, config=config) for name, config in topics.items()]
    )
    for future in futures.values():
        future.result(timeout=30)


def topic_spans(bootstrap: str, topic: str) -> list[Span]:
    """Offsets each partition of ``topic`` keeps (for failure messages)."""
    with DeadLetterQueues(bootstrap, "diagnostics") as queues:
        return queues.spans(topic, everything=True)


@dataclass
class Cluster:
    redis_url: str
    bootstrap: str
    workdir: Path

    def status(self, template: str, *args: str, crawl: str = "ops") -> str:
        return ok(
            cli(
                "status",
                *args,
                "--redis",
                self.redis_url,
                "--crawl",
                crawl,
                "--bootstrap",
                self.bootstrap,
                "--topic-template",
                template,
            )
        )

    def status_row(self, template: str, crawl: str = "ops") -> dict[str, Any]:
        (row,) = orjson.loads(self.status(template, SPIDER, "--json", crawl=crawl))
        return dict(row)

    def dead_letters(self, action: str, topic: str, *args: str) -> subprocess.CompletedProcess[str]:
        return cli("dead-letters", action, topic, "--bootstrap", self.bootstrap, *args)


@dataclass
class Crawl:
    site: Site
    template: str  # the nodes' KAFKA_TOPIC_TEMPLATE
    topic: str
    closed_port: int
    seeded: subprocess.CompletedProcess[str]
    during: dict[str, Any]  # `status --json` while every node waited out the 429
    top: subprocess.CompletedProcess[str]
    exit_codes: list[int | None]


@pytest.fixture(scope="module")
def cluster(
    module_redis_url: str, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Cluster:
    return Cluster(module_redis_url, kafka_bootstrap, tmp_path_factory.mktemp("operations"))


@pytest.fixture
def redis_db(cluster: Cluster) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(cluster.redis_url)
    try:
        yield client
    finally:
        client.close()


def rejecting_schema(directory: Path) -> Path:
    """The builtin page schema, refusing the titles of the REJECTED pages."""
    schema = orjson.loads((REPO_ROOT / "crawler" / "schemas" / "page.json").read_bytes())
    schema["properties"]["title"]["not"] = {"pattern": "page 2[0-9]$"}
    directory.mkdir(parents=True)
    (directory / "page.json").write_bytes(orjson.dumps(schema))
    return directory


@pytest.fixture(scope="module")
def crawl(cluster: Cluster) -> Iterator[Crawl]:
    workdir = cluster.workdir / "crawl"
    template = f"ops-{uuid.uuid4().hex[:8]}-{{spider}}-items"
    answers: dict[str, tuple[int, dict[str, str]]] = {path: (500, {}) for path in FLAKY}
    answers[LIMITED] = (429, {"Retry-After": str(RETRY_AFTER)})
    closed_port = free_port()
    settings = {
        "KAFKA_TOPIC_TEMPLATE": template,
        "ITEM_SCHEMA_DIRS": str(rejecting_schema(workdir / "schemas")),
        "KAFKA_SPOOL_DIR": str(workdir / "spool"),
        "LEDGER_INTERVAL": "1",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
        "CRAWLER_CRAWL_ID": "ops",
    }
    env = {"REDIS_URL": cluster.redis_url, "KAFKA_BOOTSTRAP_SERVERS": cluster.bootstrap}
    client = redis.Redis.from_url(cluster.redis_url)
    with (
        Site(PAGES, delay=0.02, answer_once=answers) as site,
        running_nodes(3, workdir=workdir / "nodes", env=env, settings=settings) as nodes,
    ):
        assert wait_until(lambda: client.zcard(KEYS.nodes) == 3, 90), logs(workdir / "nodes")
        seed_file = workdir / "seeds.txt"
        seed_file.write_text(f'{site.base_url}/missing/1.html\n\n{{"url": 5}}\n')
        seeded = cli(
            "seed",
            SPIDER,
            site.url(0),
            "ftp://127.0.0.1/nope",
            "-",
            "--file",
            str(seed_file),
            "--redis",
            cluster.redis_url,
            stdin=f'{{"url": "http://127.0.0.1:{closed_port}/", "priority": 1}}\n',
        )
        client.lpush(f"{SPIDER}:start_urls", '{"url": ')  # a bad seed straight to Redis
        admin = FrontierAdmin(client, SPIDER)
        paused = wait_until(
            lambda: any(site["cooldown_left"] for site in admin.snapshot()["politeness"]), 120
        )
        assert paused, logs(workdir / "nodes")
        seen: list[dict[str, Any]] = []

        def paused_with_leases() -> bool:
            seen[:] = [cluster.status_row(template)]
            snap, totals = seen[0]["snapshot"], seen[0]["ledger"]["totals"]
            return (
                sum(node["live"] for node in snap["nodes"]) == 3
                and snap["leased"] > 0
                and any(site["cooldown_left"] > 0 for site in snap["politeness"])
                and totals.get("seeded") == 4
                and totals.get("done", 0) > 0
            )

        assert wait_until(paused_with_leases, 120), (seen, logs(workdir / "nodes"))
        top = cli(
            "top",
            "--once",
            "--redis",
            cluster.redis_url,
            "--crawl",
            "ops",
            "--bootstrap",
            cluster.bootstrap,
            "--topic-template",
            template,
        )
        exit_codes = wait_for_exit(nodes, timeout=180)
        client.close()
        yield Crawl(
            site=site,
            template=template,
            topic=template.format(spider=SPIDER),
            closed_port=closed_port,
            seeded=seeded,
            during=seen[0],
            top=top,
            exit_codes=exit_codes,
        )


# -- the crawl ----------------------------------------------------------------------------------


def test_seed_validates_and_pushes_args_stdin_and_file(crawl: Crawl, cluster: Cluster) -> None:
    assert crawl.seeded.returncode == 1, crawl.seeded.stderr  # some seeds were rejected
    out = crawl.seeded.stdout
    assert "invalid (scheme): 'ftp://127.0.0.1/nope'" in out
    assert "invalid (url): '{\"url\": 5}'" in out
    assert "Pushed 3 seeds to pages:start_urls (3 new, 0 crawled before), rejected 2" in out


def test_status_during_the_crawl(crawl: Crawl) -> None:
    row = crawl.during
    snap, totals = row["snapshot"], row["ledger"]["totals"]
    assert [node["node"] for node in snap["nodes"]] == ["node-0", "node-1", "node-2"]
    assert all(node["live"] and node["heartbeat_ago"] < 60 for node in snap["nodes"])
    assert snap["leased"] > 0
    assert sum(node["leases"] for node in snap["nodes"]) > 0
    sites = {site["site"]: site for site in snap["politeness"]}
    site = sites[crawl.site.base_url.removeprefix("http://")]
    assert 0 < site["cooldown_left"] <= RETRY_AFTER
    assert site["factor"] < 1
    assert 0 < row["progress"] < 1
    assert (totals["seeded"], totals["invalid_seeds"]) == (4, 1)
    assert row["dead_letters"]["state"] == "known"
    assert row["sessions"] is None


def test_top_once_during_the_crawl(crawl: Crawl) -> None:
    out = ok(crawl.top)
    assert "pages  [" in out
    assert all(f"node-{n}  live" in out for n in range(3))
    assert "dead letters " in out
    assert "\x1b[" not in out


def test_status_after_the_crawl_adds_up(crawl: Crawl, cluster: Cluster) -> None:
    assert crawl.exit_codes == [0, 0, 0], logs(cluster.workdir / "crawl" / "nodes")
    expected_errors = (f"127.0.0.1:{crawl.closed_port}/", "Invalid seed", "dead-lettered (schema)")
    log_text = logs(cluster.workdir / "crawl" / "nodes")
    errors = [line for line in log_text.splitlines() if "] ERROR:" in line]
    assert [line for line in errors if not any(text in line for text in expected_errors)] == []

    (row,) = orjson.loads(cluster.status(crawl.template, "--json"))  # every spider found
    snap, totals = row["snapshot"], row["ledger"]["totals"]
    assert (snap["queued"], snap["leased"], snap["seeds_waiting"], snap["nodes"]) == (0, 0, 0, [])
    assert snap["failed_by_reason"] == {"download/DownloadConnectionRefusedError": 1}
    assert snap["invalid_by_reason"] == {"json": 1}
    assert (row["progress"], row["eta_seconds"]) == (1.0, 0.0)
    # Every page, the 404 and the dead port, and the retries (requests of their own): one per
    # 500 and for the 429, two for the dead port (RETRY_TIMES = 2).
    assert totals["enqueued"] == PAGES + 2 + len(FLAKY) + 1 + 2
    assert totals["done"] + totals["failed"] == totals["enqueued"]
    assert totals["leased"] == leases_ended(totals)
    assert (totals["failed"], totals["seeded"], totals["invalid_seeds"]) == (1, 4, 1)
    assert totals["pages"] == sum(crawl.site.hits.values())
    assert totals["items/delivered"] == PAGES - len(REJECTED)
    assert totals["items/dead_lettered"] == len(REJECTED)
    dlq = f"{crawl.topic}.dlq"
    assert row["dead_letters"] == {
        "state": "known",
        "group": GROUP,
        "unhandled": len(REJECTED),
        "topics": {dlq: len(REJECTED)},
        "error": None,
    }
    assert row["sessions"] is None

    text = cluster.status(crawl.template, SPIDER)
    assert "finished" in text.splitlines()[1]
    assert "  nodes          none" in text
    assert "  failures       1: download/DownloadConnectionRefusedError 1" in text
    assert "  invalid seeds  1: json 1" in text
    assert f"  dead letters   10 unhandled: {dlq} 10 (group {GROUP})" in text
    assert "  sessions       none (the spider has no session_platform)" in text


def test_consume_prints_the_delivered_items(crawl: Crawl, cluster: Cluster) -> None:
    delivered = PAGES - len(REJECTED)
    out = ok(
        cli(
            "consume",
            crawl.topic,
            "--bootstrap",
            cluster.bootstrap,
            "--from-beginning",
            "--count",
            str(delivered),
            "--idle-exit",
            "30",
            "--json",
        )
    )
    rows = [orjson.loads(line) for line in out.splitlines()]
    rejected = {crawl.site.url(n) for n in REJECTED}
    in_kafka = topic_spans(cluster.bootstrap, crawl.topic)
    assert {row["value"]["url"] for row in rows} == crawl.site.all_urls() - rejected, in_kafka
    assert len(rows) == delivered
    assert {row["headers"]["crawl_id"] for row in rows} == {"ops"}


def test_dead_letters_of_the_crawl_list_and_replay(crawl: Crawl, cluster: Cluster) -> None:
    dlq = f"{crawl.topic}.dlq"
    rows = [
        orjson.loads(line)
        for line in ok(cluster.dead_letters("list", crawl.topic, "--json")).splitlines()
    ]
    assert sorted(row["value"]["title"] for row in rows) == sorted(page_title(n) for n in REJECTED)
    assert {row["headers"]["dlq_reason"] for row in rows} == {"schema"}
    assert all(row["headers"]["dlq_error"].startswith("$.title: ") for row in rows)

    refused = cluster.dead_letters("drop", crawl.topic)
    assert refused.returncode == 1
    assert f"10 unhandled dead letters in {dlq}" in refused.stdout

    replayed = ok(cluster.dead_letters("replay", crawl.topic))
    assert replayed == f"replayed=10 failed=0 ({dlq}, group {GROUP})\n"
    back = read_topic(cluster.bootstrap, crawl.topic, expected=PAGES)
    assert sorted(orjson.loads(m.value)["url"] for m in back) == sorted(crawl.site.all_urls()), (
        topic_spans(cluster.bootstrap, crawl.topic)
    )

    assert ok(cluster.dead_letters("list", crawl.topic, "--all")).endswith(
        f"10 dead letters of {dlq} listed, 0 unhandled (group {GROUP})\n"
    )
    assert cluster.status_row(crawl.template)["dead_letters"]["topics"] == {dlq: 0}


def test_status_when_kafka_does_not_answer(crawl: Crawl, cluster: Cluster) -> None:
    dead = f"127.0.0.1:{free_port()}"
    base = ("status", SPIDER, "--redis", cluster.redis_url, "--crawl", "ops")
    (row,) = orjson.loads(ok(cli(*base, "--bootstrap", dead, "--kafka-timeout", "1", "--json")))
    assert row["dead_letters"]["state"] == "unknown"
    assert row["dead_letters"]["unhandled"] is None
    assert f"Kafka at {dead}" in row["dead_letters"]["error"]
    assert row["snapshot"]["failed"] == 1  # the rest of the status is there
    text = ok(cli(*base, "--bootstrap", dead, "--kafka-timeout", "1"))
    assert f"  dead letters   unknown (Kafka at {dead}, listing topics: " in text


def test_sessions_commands_and_sessions_in_status(cluster: Cluster, redis_db: redis.Redis) -> None:
    redis_option = ("--redis", cluster.redis_url)
    imported = cli(
        "sessions",
        "import",
        "zhihu",
        "alice",
        "--cookie-header",
        "-",
        "--domain",
        ".zhihu.com",
        *redis_option,
        stdin="z_c0=secret-a; d_c0=x\n",
    )
    assert "imported 2 cookies (d_c0, z_c0) for zhihu/alice" in ok(imported)
    netscape = cluster.workdir / "cookies.txt"
    netscape.write_text(
        "# Netscape HTTP Cookie File\n.zhihu.com\tTRUE\t/\tTRUE\t0\tz_c0\tsecret-b\n"
    )
    ok(cli("sessions", "import", "zhihu", "bob", "--netscape", str(netscape), *redis_option))

    async def captcha_for_bob() -> Health | None:  # what the middleware does on a captcha
        client = AsyncRedis.from_url(cluster.redis_url)
        try:
            return await RedisSessionStore(client).mark("zhihu", "bob", Health.RISKY, "captcha")
        finally:
            await client.aclose()

    assert asyncio.run(captcha_for_bob()) is Health.RISKY

    listed = ok(cli("sessions", "list", "zhihu", "--json", *redis_option))
    rows = {row["account"]: row for row in map(orjson.loads, listed.splitlines())}
    assert (rows["alice"]["health"], rows["bob"]["health"]) == ("healthy", "risky")
    assert rows["bob"]["cooldown_until"] is not None
    assert "secret" not in listed

    status = ("status", "zhihu", "--redis", cluster.redis_url)
    (row,) = orjson.loads(ok(cli(*status, "--json")))
    assert row["sessions"] == {
        "platform": "zhihu",
        "accounts": 2,
        "by_health": {"healthy": 1, "risky": 1},
        "resting": 1,
    }
    text = ok(cli(*status))  # no --bootstrap and no KAFKA_BOOTSTRAP_SERVERS
    assert "  sessions       zhihu: 2 accounts: healthy 1, risky 1 (1 resting)" in text
    assert "  dead letters   - (no Kafka: give --bootstrap or set KAFKA_BOOTSTRAP_SERVERS)" in text

    assert "invalidated zhihu/bob" in ok(
        cli("sessions", "invalidate", "zhihu", "bob", *redis_option)
    )
    assert "  sessions       zhihu: 1 account: healthy 1" in ok(cli(*status))
    assert redis_db.exists("sessions:{zhihu}:session:bob") == 0


# -- nodes with Kafka unreachable: a killed one, a stopped one ------------------------------------


@dataclass
class Outage:
    site: Site
    template: str
    env: dict[str, str]
    settings: dict[str, str]
    killed_leases: int  # leases the killed node held, all expired


def node_leases(snapshot: Snapshot, node: str) -> int:
    return sum(info["leases"] for info in snapshot["nodes"] if info["node"] == node)


@pytest.fixture(scope="module")
def outage(crawl: Crawl, cluster: Cluster) -> Iterator[Outage]:
    workdir = cluster.workdir / "outage"
    workdir.mkdir()
    template = f"ops2-{uuid.uuid4().hex[:8]}-{{spider}}-items"
    env = {"REDIS_URL": cluster.redis_url, "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}"}
    settings = {
        **LOCAL_SITE_SETTINGS,
        "KAFKA_TOPIC_TEMPLATE": template,
        "KAFKA_CREATE_TOPICS": "False",
        "KAFKA_FLUSH_TIMEOUT": "1",
        "KAFKA_SPOOL_DIR": str(workdir / "spool"),
        "LEDGER_INTERVAL": "1",
        "CRAWLER_CRAWL_ID": "ops2",
        "FRONTIER_LEASE_TIMEOUT": "3",
        "FRONTIER_HEARTBEAT_INTERVAL": "1",
    }
    client = redis.Redis.from_url(cluster.redis_url)
    admin = FrontierAdmin(client, SPIDER, node_ttl=3)
    with Site(200, delay=0.2) as site:
        ok(cli("seed", SPIDER, site.url(0), "--redis", cluster.redis_url))
        node = start_node(
            SPIDER,
            env=env,
            settings=settings,
            log_path=workdir / "node-killed.log",
            node_id="node-killed",
        )
        try:
            # Its items wait for Kafka, so it keeps the leases of their pages.
            held = wait_until(lambda: node_leases(admin.snapshot(), "node-killed") >= 5, 90)
            assert held, (workdir / "node-killed.log").read_text()
            node.kill()
        finally:
            stop_node(node)
        leased = admin.snapshot()["leased"]
        assert wait_until(lambda: admin.snapshot()["expired"] == leased, 60)
        client.close()
        yield Outage(site, template, env, settings, leased)


def test_requeue_returns_the_leases_of_a_killed_node(
    outage: Outage, cluster: Cluster, redis_db: redis.Redis
) -> None:
    row = cluster.status_row(outage.template, crawl="ops2")
    snap = row["snapshot"]
    (node,) = [info for info in snap["nodes"] if info["node"] == "node-killed"]
    assert (node["live"], node["leases"]) == (False, outage.killed_leases)
    assert snap["expired"] == snap["leased"] == outage.killed_leases
    queued = snap["queued"]

    requeue = ("requeue", SPIDER, "--redis", cluster.redis_url, "--crawl", "ops2")
    assert orjson.loads(ok(cli(*requeue, "--json"))) == {
        "spider": SPIDER,
        "requeued": outage.killed_leases,
        "seeds": 0,  # seeds held by the killed node: it held none
    }
    admin = FrontierAdmin(redis_db, SPIDER)
    after = admin.snapshot()
    assert (after["leased"], after["queued"]) == (0, queued + outage.killed_leases)
    assert admin.ledger("ops2")["totals"]["reclaimed"] == outage.killed_leases
    assert f"Returned 0 expired leases of {SPIDER!r}" in ok(cli(*requeue))


@pytest.fixture(scope="module")
def spool_dir(outage: Outage, cluster: Cluster) -> Path:
    """The spool a node leaves when it is stopped while Kafka does not answer."""
    client = redis.Redis.from_url(cluster.redis_url)
    total = LedgerKeys.for_crawl(SPIDER, "ops2").total

    def scraped() -> int:
        """Pages fetched: their items wait for Kafka in the pipeline (item_scraped, and so
        ``items/scraped``, comes only once an item is delivered or spooled)."""
        return int(client.hget(total, "pages") or 0)

    before = scraped()
    log = cluster.workdir / "outage" / "node-stopped.log"
    node = start_node(
        SPIDER, env=outage.env, settings=outage.settings, log_path=log, node_id="node-stopped"
    )
    try:
        assert wait_until(lambda: scraped() >= before + STOPPED_ITEMS, 90), log.read_text()
    finally:
        code = stop_node(node)
        client.close()
    assert code == 0, log.read_text()
    return Path(outage.settings["KAFKA_SPOOL_DIR"])


def test_spool_replay_into_a_refusing_topic_then_drop_its_dead_letters(
    outage: Outage, spool_dir: Path, cluster: Cluster
) -> None:
    topic = outage.template.format(spider=SPIDER)
    dlq = f"{topic}.dlq"
    spool = ("spool", "list", SPIDER, "--dir", str(spool_dir))
    segments = orjson.loads(ok(cli(*spool, "--json")))
    spooled = sum(segment["messages"] for segment in segments)
    assert spooled >= STOPPED_ITEMS
    assert {segment["state"] for segment in segments} == {"sealed"}
    assert {name for segment in segments for name in segment["topics"]} == {topic}
    assert {name for segment in segments for name in segment["reasons"]} == {"_purge_queue"}

    # The topic takes no message over 64 bytes: every replayed item is dead-lettered.
    create_topics(cluster.bootstrap, {topic: {"max.message.bytes": "64"}, dlq: {}})
    replayed = cli(
        "spool", "replay", SPIDER, "--dir", str(spool_dir), "--bootstrap", cluster.bootstrap
    )
    assert replayed.stdout == (
        f"replayed=0 spooled_again=0 dead_lettered={spooled} left=0 spool_errors=0\n"
    ), replayed.stderr
    assert replayed.returncode == 0
    assert list(spool_dir.glob("*/*.jsonl")) == []

    rows = [
        orjson.loads(line)
        for line in ok(cluster.dead_letters("list", topic, "--json")).splitlines()
    ]
    assert len(rows) == spooled
    assert {row["headers"]["dlq_reason"] for row in rows} == {"msg_size_too_large"}
    row = cluster.status_row(outage.template, crawl="ops2")
    assert row["dead_letters"]["topics"] == {dlq: spooled}

    dropped = orjson.loads(ok(cluster.dead_letters("drop", topic, "--yes", "--json")))
    assert dropped == {"dlq": dlq, "group": GROUP, "dropped": spooled}
    assert ok(cluster.dead_letters("list", topic)) == (
        f"0 dead letters of {dlq} listed, 0 unhandled (group {GROUP})\n"
    )


def test_purge_asks_then_deletes_everything_of_the_spider(
    spool_dir: Path, cluster: Cluster, redis_db: redis.Redis
) -> None:
    purge = ("purge", SPIDER, "--redis", cluster.redis_url)
    refused = cli(*purge, stdin="nope\n")
    assert refused.returncode == 1
    assert "Not purged." in refused.stdout
    assert redis_db.exists(KEYS.queue_count) == 1

    result = orjson.loads(ok(cli(*purge, "--yes", "--json")))
    assert {"{pages}:ledger:ops", "{pages}:ledger:ops2", KEYS.queue_count} <= set(result["keys"])
    assert result["deleted"] == len(result["keys"])
    assert [key for key in redis_db.scan_iter("*pages*")] == []
    assert ok(cli("status", "--redis", cluster.redis_url)) == (
        "No spider state in this Redis database.\n"
    )
