"""Kafka outages of any length: the crawl pauses and resumes by itself, the spool replays, a
full spool disk pauses the crawl without tearing lines, a broker late at start dead-letters
nothing and its connection errors are summarised.

One broker for the module (started here: the tests SIGSTOP and stop it); every test leaves it
running and answering, and uses a topic template of its own.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
import redis

from crawler.cli.status import FrontierStatus, frontier_status
from crawler.cli.status_text import render
from crawler.demo.site import Site
from crawler.devservices import KafkaBroker, free_port
from crawler.kafka.reader import end_offsets, read_topic
from crawler.kafka.spool import decode_record
from tests.cluster import logs, running_nodes, tracebacks, wait_for_exit, wait_for_log
from tests.services import unavailable
from tests.test_metrics import METRICS_LINE, scrape, value
from tests.test_operations import crawler_cli, status_with_nothing_else

# Leases and idle close fast enough for short crawls (as the frontier fault tests use them).
FAST_LEASES = {
    "FRONTIER_LEASE_TIMEOUT": "4",
    "FRONTIER_HEARTBEAT_INTERVAL": "1",
    "FRONTIER_PREFETCH": "4",
    "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
}
PAUSED = "crawl paused until Kafka answers"
RESUMED = "Kafka answers again: crawl resumed"


@pytest.fixture
def kafka(module_kafka: KafkaBroker) -> KafkaBroker:
    return module_kafka


def wait_for_hits(site: Site, hits: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while sum(site.hits.values()) < hits:
        assert time.monotonic() < deadline, f"site saw {sum(site.hits.values())} of {hits} hits"
        time.sleep(0.05)


def seed(redis_url: str, url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.lpush("pages:start_urls", url)
    client.close()


def spool_lines(spool: Path) -> list[bytes]:
    return [line for seg in sorted(spool.glob("*.jsonl")) for line in seg.read_bytes().splitlines()]


def assert_every_line_whole(spool: Path) -> int:
    """Every spool line decodes (none torn); returns how many there are."""
    lines = spool_lines(spool)
    for line in lines:
        decode_record(line)
    return len(lines)


def assert_all_pages_delivered(kafka: KafkaBroker, topic: str, site: Site) -> None:
    """Every page's item is in the topic. Read twice at most: a read that began without the
    partitions' ends (a broker just back may not give them) stops at ``expected`` messages,
    and an outage's duplicates (timed-out messages the broker wrote after all) count among
    them (a CI run: 1 page missing of 700 the nodes had every one acknowledged)."""
    missing: set[str] = set()
    for _ in range(2):
        messages = read_topic(kafka.bootstrap_servers, topic, expected=site.pages, timeout=90)
        missing = site.all_urls() - {orjson.loads(m.value)["url"] for m in messages}
        if not missing:
            return
    assert not missing, f"{len(missing)} pages missing, e.g. {sorted(missing)[:3]}"


@pytest.mark.slow
def test_outage_many_times_max_outage_pauses_then_resumes_by_itself(
    redis_url: str, kafka: KafkaBroker, topic_template: str, tmp_path: Path
) -> None:
    """A 30 s outage with KAFKA_MAX_OUTAGE=2 and messages timing out after 3 s: everything in
    flight ends in the spool, no delivery can lift the pause; the broker answering does. While
    paused, `crawler status` said `running` with an ETA: the nodes say they are paused (status
    `paused`, no ETA; `crawler_paused` 1 on their metrics)."""
    spool = tmp_path / "spool"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    settings = {
        **FAST_LEASES,
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "KAFKA_MAX_OUTAGE": "2",
        "KAFKA_PRODUCER_CONFIG": '{"message.timeout.ms": 3000}',
        "KAFKA_SPOOL_DIR": str(spool),
        "KAFKA_SPOOL_REPLAY_INTERVAL": "2",
        "CONCURRENT_REQUESTS": "2",
        "METRICS_HOST": "127.0.0.1",
        "METRICS_PORTS": "0",
    }
    with (
        Site(700, delay=0.1) as site,
        running_nodes(2, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        seed(redis_url, site.url(0))
        wait_for_hits(site, 60)
        kafka.pause()
        stopped = time.monotonic()
        for index in range(2):
            assert wait_for_log(tmp_path / f"node-{index}.log", PAUSED, timeout=40), logs(tmp_path)
        time.sleep(1)  # requests already in flight finish; the nodes say they are paused
        paused_hits = sum(site.hits.values())
        client = redis.Redis.from_url(redis_url)
        status = frontier_status(client, "pages", "default")
        assert (status["state"], status["eta_seconds"]) == ("paused", None)
        assert sorted(status["paused"]) == ["node-0", "node-1"]
        assert status["paused"]["node-0"]["reason"] == "max_outage"
        text = render(status_with_nothing_else(status))
        assert "PAUSED (Kafka unreachable since " in text.splitlines()[1]
        assert text.count("PAUSED (Kafka unreachable since ") == 3  # the progress and each node
        for index in range(2):
            port = int(METRICS_LINE.findall((tmp_path / f"node-{index}.log").read_text())[0])
            assert value(scrape(port), "crawler_paused", reason="max_outage") == 1
        time.sleep(max(0.0, 30 - (time.monotonic() - stopped)))
        assert sum(site.hits.values()) == paused_hits  # nothing is crawled while paused
        assert paused_hits < site.pages, paused_hits
        assert assert_every_line_whole(spool / "pages") > 0  # in-flight messages timed out
        kafka.resume()
        for index in range(2):
            assert wait_for_log(tmp_path / f"node-{index}.log", RESUMED, timeout=40), logs(tmp_path)
            port = int(METRICS_LINE.findall((tmp_path / f"node-{index}.log").read_text())[0])
            assert value(scrape(port), "crawler_paused", reason="max_outage") == 0
        deadline = time.monotonic() + 10
        while frontier_status(client, "pages", "default")["paused"]:
            assert time.monotonic() < deadline, "the nodes still say they are paused"
            time.sleep(0.2)
        client.close()
        assert wait_for_exit(nodes, timeout=180) == [0, 0], logs(tmp_path)
    assert tracebacks(tmp_path) == [], logs(tmp_path)
    assert_all_pages_delivered(kafka, topic_template.format(spider="pages"), site)
    assert spool_lines(spool / "pages") == []
    text = "".join(p.read_text() for p in tmp_path.glob("node-*.log"))
    assert "'kafka/replayed':" in text
    assert "'kafka/crawl_paused/max_outage':" in text


def wait_for_status(
    redis_url: str, ready: Callable[[FrontierStatus], bool], timeout: float = 40
) -> FrontierStatus:
    client = redis.Redis.from_url(redis_url)
    try:
        deadline = time.monotonic() + timeout
        while True:
            status = frontier_status(client, "pages", "default")
            if ready(status) or time.monotonic() > deadline:
                return status
            time.sleep(0.5)
    finally:
        client.close()


def test_status_says_which_nodes_kafka_does_not_answer_before_any_pause(
    redis_url: str, kafka: KafkaBroker, topic_template: str, tmp_path: Path
) -> None:
    """Kafka away for less than KAFKA_MAX_OUTAGE: `crawler status` said nothing of it but
    "dead letters unknown" while the nodes spooled every item (an audit)."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    settings = {
        **FAST_LEASES,
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "KAFKA_MAX_OUTAGE": "600",
        "KAFKA_PRODUCER_CONFIG": '{"message.timeout.ms": 3000}',
        "KAFKA_SPOOL_DIR": str(tmp_path / "spool"),
        "CONCURRENT_REQUESTS": "2",
    }
    with (
        Site(400, delay=0.1) as site,
        running_nodes(1, workdir=tmp_path, env=env, settings=settings),
    ):
        seed(redis_url, site.url(0))
        wait_for_hits(site, 20)
        kafka.pause()
        try:
            away = wait_for_status(redis_url, lambda status: bool(status["kafka_away"]))
        finally:
            kafka.resume()
        assert list(away["kafka_away"]) == ["node-0"], logs(tmp_path)
        assert away["state"] == "running" and away["paused"] == {}
        text = render(status_with_nothing_else(away))
        assert "KAFKA UNREACHABLE since " in text and "(spooling its items, still crawling)" in text
        back = wait_for_status(redis_url, lambda status: not status["kafka_away"])
        assert back["kafka_away"] == {}, logs(tmp_path)


@pytest.mark.slow  # 36 s: a Kafka outage's long scenario, as the others of this file
@pytest.mark.parametrize(
    "create_topics",
    [pytest.param(False, id="topic_unchecked"), pytest.param(True, id="topic_checked")],
)
def test_a_crawl_that_ends_while_kafka_pauses_it_closes_with_its_items_in_the_spool(
    redis_url: str, kafka: KafkaBroker, topic_template: str, tmp_path: Path, create_topics: bool
) -> None:
    """Scrapy looks at idleness only while the engine runs: a node paused for Kafka never
    closed, the crawl over (nothing queued or leased) and every item in the spool, until Kafka
    answered again. It closes as an idle node does, the spool left for the next start, and
    says so. The crawl was then `finished` (100%, the ledger adding up) with its items only in
    the spool, and a replay was in no ledger: now it is `finished_spooled` until replayed.
    With KAFKA_CREATE_TOPICS (the default) the items waited on their topic's first check for
    as long as Kafka was away, never spooled, so the paused node never closed: once the crawl
    is paused they go on to the spool as every other item does."""
    spool = tmp_path / "spool"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    settings = {
        **FAST_LEASES,
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "KAFKA_CREATE_TOPICS": str(create_topics),
        "KAFKA_MAX_OUTAGE": "3",  # the pages are fetched by then
        "KAFKA_PRODUCER_CONFIG": '{"message.timeout.ms": 2000}',
        "KAFKA_SPOOL_DIR": str(spool),
        "MAX_IDLE_TIME_BEFORE_CLOSE": "8",  # the pause comes before the idle close would
    }
    with Site(3) as site, running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes:
        assert wait_for_log(tmp_path / "node-0.log", "Frontier {pages}", timeout=60)
        kafka.pause()
        try:
            seed(redis_url, site.url(0))
            assert wait_for_log(tmp_path / "node-0.log", PAUSED, timeout=60), logs(tmp_path)
            assert wait_for_exit(nodes, timeout=60) == [0], logs(tmp_path)
        finally:
            kafka.resume()
    assert assert_every_line_whole(spool / "pages") == 3  # every item, for the next start
    text = (tmp_path / "node-0.log").read_text()
    assert "'finish_reason': 'finished'" in text
    assert "The crawl is over while Kafka is away" in text
    assert "3 items left in the spool" in text and "crawler spool replay pages" in text

    client = redis.Redis.from_url(redis_url)
    status = frontier_status(client, "pages", "default")
    assert status["state"] == "finished_spooled"
    assert (status["spooled"], status["spooled_nodes"]) == (3, ["node-0"])
    text = render(status_with_nothing_else(status))
    assert "FINISHED, BUT 3 ITEMS ONLY IN A SPOOL" in text
    assert "3 items in the spool of node(s) node-0 (not in Kafka yet:" in text
    replay = crawler_cli(
        redis_url, "spool", "replay", "pages", "--dir", str(tmp_path / "spool"), "--json",
        env={"KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers},
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert orjson.loads(replay.stdout)["replayed"] == 3
    status = frontier_status(client, "pages", "default")
    client.close()
    assert (status["state"], status["spooled"]) == ("finished", 0)
    assert status["ledger"]["totals"]["items/replayed"] == 3
    assert "in the spool" not in render(status_with_nothing_else(status))


@pytest.mark.slow
def test_broker_down_at_start_dead_letters_nothing_and_summarises_connection_errors(
    redis_url: str, kafka: KafkaBroker, topic_template: str, tmp_path: Path
) -> None:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    settings = {**FAST_LEASES, "KAFKA_TOPIC_TEMPLATE": topic_template}
    topic = topic_template.format(spider="pages")
    kafka.stop()
    with (
        Site(200, delay=0.05) as site,
        running_nodes(2, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        seed(redis_url, site.url(0))
        wait_for_hits(site, 20)
        time.sleep(20)  # the nodes keep trying to reach the broker
        kafka.start()
        assert wait_for_exit(nodes, timeout=180) == [0, 0], logs(tmp_path)
    dead = end_offsets(kafka.bootstrap_servers, f"{topic}.dlq")
    dead_letters = sum(high - low for low, high in dead.values())
    refused = [p.read_text().count("Connection refused") for p in sorted(tmp_path.glob("node-*"))]
    print(f"dead letters={dead_letters} 'Connection refused' lines per node={refused}")
    assert tracebacks(tmp_path) == [], logs(tmp_path)
    assert_all_pages_delivered(kafka, topic, site)
    assert dead_letters == 0, dead
    for index in range(2):
        text = (tmp_path / f"node-{index}.log").read_text()
        assert "_unknown_topic" not in text
        assert "kafka/dead_lettered" not in text
        assert text.count("Connection refused") <= 3, text.count("Connection refused")
        assert "Kafka unreachable" in text
        assert "Kafka answers again after" in text
        assert "'kafka/connection_errors':" in text


@pytest.fixture
def tiny_spool(tmp_path: Path) -> Iterator[Path]:
    """A 48 KiB tmpfs: the spool's disk fills up for real (ENOSPC from the kernel)."""
    mount_point = tmp_path / "spool"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        unavailable(f"cannot mount a tiny tmpfs for the spool: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.mark.slow
def test_full_spool_disk_pauses_the_crawl_tears_no_line_and_closes_cleanly(
    redis_url: str, kafka: KafkaBroker, topic_template: str, tmp_path: Path, tiny_spool: Path
) -> None:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    settings = {
        **FAST_LEASES,
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "KAFKA_MAX_OUTAGE": "600",  # the pause must come from the full disk
        "KAFKA_PRODUCER_CONFIG": '{"message.timeout.ms": 3000}',
        "KAFKA_SPOOL_DIR": str(tiny_spool),
        "KAFKA_FLUSH_TIMEOUT": "2",
        "CONCURRENT_REQUESTS": "4",
    }
    first, second = tmp_path / "first", tmp_path / "second"
    with Site(400, delay=0.05) as site:
        with running_nodes(1, workdir=first, env=env, settings=settings) as nodes:
            seed(redis_url, site.url(0))
            wait_for_hits(site, 40)
            kafka.pause()
            assert wait_for_log(first / "node-0.log", PAUSED, timeout=60), logs(first)
            assert "the spool cannot be written" in (first / "node-0.log").read_text()
            assert assert_every_line_whole(tiny_spool / "pages") > 0
            nodes[0].send_signal(signal.SIGTERM)
            assert wait_for_exit(nodes, timeout=60) == [0], logs(first)
        assert tracebacks(first) == [], logs(first)
        text = (first / "node-0.log").read_text()
        assert "'kafka/spool_error':" in text
        assert "'kafka/crawl_paused/spool_error': 1" in text
        assert_every_line_whole(tiny_spool / "pages")
        kafka.resume()
        again = {**settings, "MAX_IDLE_TIME_BEFORE_CLOSE": "2"}
        with running_nodes(1, workdir=second, env=env, settings=again) as nodes:
            assert wait_for_exit(nodes, timeout=180) == [0], logs(second)
    assert tracebacks(second) == [], logs(second)
    assert_all_pages_delivered(kafka, topic_template.format(spider="pages"), site)
    assert spool_lines(tiny_spool / "pages") == []


def test_items_go_to_the_spool_when_kafka_is_away_from_the_start(
    redis_url: str, tmp_path: Path
) -> None:
    """Kafka unreachable when the node started: every item waited for its topic's check until
    KAFKA_MAX_OUTAGE, then in librdkafka for message.timeout.ms (5 minutes each by default),
    while the node held its leases and fetched nothing, and `crawler status` said "spooling its
    items, still crawling" (an audit: a 100-page crawl took 10.5 minutes). Once Kafka has not
    answered for message.timeout.ms they go on, to the spool, and the crawl goes on."""
    spool = tmp_path / "spool"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}"}
    settings = {
        **FAST_LEASES,
        "KAFKA_MAX_OUTAGE": "600",
        "KAFKA_PRODUCER_CONFIG": '{"message.timeout.ms": 2000}',
        "KAFKA_SPOOL_DIR": str(spool),
    }
    with (
        Site(120) as site,
        running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        seed(redis_url, site.url(0))
        assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)
    assert {site.base_url + path for path in site.hits} == site.all_urls()
    assert assert_every_line_whole(spool / "pages") == site.pages
    assert "crawl paused" not in logs(tmp_path, tail=0)
