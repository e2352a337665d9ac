"""Kafka delivery: dead letters, a broker outage mid-crawl, the spool after a stop."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis

from crawler.demo.site import Site
from crawler.devservices import KafkaBroker
from crawler.devservices._proc import log_tail
from crawler.frontier.keys import FrontierKeys
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer, producer_config
from crawler.kafka.reader import end_offsets, read_topic
from crawler.kafka.spool import DEAD_LETTER_DIR, decode_record
from tests.cli_process import crawler_process, ok
from tests.cluster import (
    delivery_evidence,
    logs,
    running_nodes,
    wait_for_exit,
    wait_for_log,
)
from tests.faults import FAST_LEASES, wait_for_hits
from tests.frontier_state import queued
from tests.services import own_kafka_broker


@pytest.fixture
def own_kafka(tmp_path: Path) -> Iterator[KafkaBroker]:
    """A Kafka broker this test may pause (SIGSTOP) and resume."""
    with own_kafka_broker(tmp_path / "k") as broker:
        yield broker


@contextlib.contextmanager
def faulty_node(
    bootstrap: str, topic_template: str, workdir: Path, spool: Path, **settings: str
) -> Iterator[tuple[Site, list[subprocess.Popen[bytes]]]]:
    """One Kafka-only node of the ``faulty`` spider (good and bad items) on a one-page site."""
    with (
        Site(1) as site,
        running_nodes(
            1,
            workdir=workdir,
            spider="faulty",
            env={"REDIS_URL": "", "KAFKA_BOOTSTRAP_SERVERS": bootstrap},
            settings={
                "SPIDER_MODULES": "crawler.spiders,tests.spiders",
                "KAFKA_TOPIC_TEMPLATE": topic_template,
                "KAFKA_SPOOL_DIR": str(spool),
                **settings,
            },
            arguments={"url": site.url(0)},
        ) as nodes,
    ):
        yield site, nodes


def test_bad_items_are_dead_lettered_and_the_crawl_goes_on(
    kafka_bootstrap: str, topic_template: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    with faulty_node(kafka_bootstrap, topic_template, tmp_path, spool) as (_site, nodes):
        assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)
    topic = topic_template.format(spider="faulty")

    good = read_topic(kafka_bootstrap, topic, expected=3, timeout=30)
    fragments = sorted(orjson.loads(m.value)["url"].split("#")[1] for m in good)
    assert fragments == ["good-1", "good-2", "good-3"]
    assert "好 2 😀".encode() in next(m.value for m in good if b"good-2" in m.value)
    assert "lone surrogate \ufffd".encode() in next(m.value for m in good if b"good-3" in m.value)

    dead = read_topic(kafka_bootstrap, f"{topic}.dlq", expected=2, timeout=30)
    reasons = {m.headers["dlq_reason"]: m for m in dead}
    assert set(reasons) == {b"unencodable", b"schema"}
    assert (
        reasons[b"schema"].headers["dlq_error"] == b"$.status: must be smaller than or equal to 599"
    )
    assert reasons[b"schema"].headers["dlq_original_topic"] == topic.encode()
    assert b"Unwritable object" in reasons[b"unencodable"].value

    (record,) = [
        decode_record(line)
        for path in (spool / "faulty" / DEAD_LETTER_DIR).glob("*.jsonl")
        for line in path.read_bytes().splitlines()
    ]
    assert record.reason.startswith("msg_size_too_large")
    assert record.message.topic == f"{topic}.dlq"
    log = (tmp_path / "node-0.log").read_text()
    for stat in (
        "'kafka/rejected/schema': 1",
        "'kafka/rejected/unencodable': 1",
        "'kafka/delivered': 3",
        "'kafka/coerced/lone_surrogate': 1",
        "'kafka/dead_lettered': 2",
        "'kafka/dead_lettered_file': 1",
        # Dead-lettered before sending: dropped; refused by Kafka (too large): scraped.
        "'item_dropped_count': 2",
        "'item_scraped_count': 4",
    ):
        assert stat in log
    # librdkafka refuses it before any broker does: the log names both limits (an audit)
    assert "raise librdkafka's message.max.bytes (KAFKA_PRODUCER_CONFIG" in log


@pytest.mark.slow
def test_broker_down_30s_mid_crawl_loses_nothing(
    redis_url: str, own_kafka: KafkaBroker, topic_template: str, tmp_path: Path
) -> None:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": own_kafka.bootstrap_servers}
    # DEBUG logs and librdkafka's idempotence log ("eos": producer ids, duplicate sequences)
    # are the evidence if a page goes missing.
    settings = {
        **FAST_LEASES,
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "LOG_LEVEL": "DEBUG",
        "KAFKA_PRODUCER_CONFIG": '{"debug": "eos"}',
    }
    with (
        Site(1000, delay=0.1) as site,
        running_nodes(3, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        client = redis.Redis.from_url(redis_url)
        client.lpush("pages:start_urls", site.url(0))
        client.close()
        wait_for_hits(site, 200)
        own_kafka.pause()
        paused_at = sum(site.hits.values())
        time.sleep(30)
        during_outage = sum(site.hits.values()) - paused_at
        own_kafka.resume()
        codes = wait_for_exit(nodes, timeout=300)
    assert codes == [0, 0, 0], logs(tmp_path)
    # The crawl went on while the broker was down: items waited in librdkafka's queue.
    assert during_outage >= 500, during_outage
    topic = topic_template.format(spider="pages")
    messages = read_topic(own_kafka.bootstrap_servers, topic, expected=1000)
    urls = Counter(orjson.loads(m.value)["url"] for m in messages)
    ends = end_offsets(own_kafka.bootstrap_servers, topic)
    print(
        f"pages=1000 received={len(urls)} duplicates={len(messages) - len(urls)} "
        f"records on the broker={sum(high - low for low, high in ends.values())}"
    )
    missing = site.all_urls() - set(urls)
    assert not missing, delivery_evidence(tmp_path, own_kafka.bootstrap_servers, topic, missing)


@pytest.mark.slow
def test_spool_after_a_stop_with_the_broker_down_is_replayed_at_the_next_start(
    redis_url: str, own_kafka: KafkaBroker, topic_template: str, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": own_kafka.bootstrap_servers}
    settings = {
        **FAST_LEASES,
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "KAFKA_SPOOL_DIR": str(spool),
        "KAFKA_FLUSH_TIMEOUT": "2",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "0",
    }
    topic = topic_template.format(spider="pages")
    producer = ItemProducer(producer_config(own_kafka.bootstrap_servers, {}))
    asyncio.run(producer.ensure_topics([topic, f"{topic}.dlq"], 1, 1))
    with Site(30) as site:
        with running_nodes(1, workdir=tmp_path / "first", env=env, settings=settings) as nodes:
            wait_for_log(tmp_path / "first" / "node-0.log", "Reading seeds", timeout=60)
            own_kafka.pause()
            client = redis.Redis.from_url(redis_url)
            client.lpush("pages:start_urls", site.url(0))
            client.close()
            wait_for_hits(site, 30)
            time.sleep(1)
            nodes[0].send_signal(signal.SIGTERM)
            assert wait_for_exit(nodes, timeout=60) == [0], logs(tmp_path / "first")
        segments = sorted((spool / "pages").glob("*.jsonl"))
        spooled = [
            decode_record(line) for seg in segments for line in seg.read_bytes().splitlines()
        ]
        assert {orjson.loads(r.message.value)["url"] for r in spooled} == site.all_urls()
        assert "spooled to" in (tmp_path / "first" / "node-0.log").read_text()

        own_kafka.resume()
        second = {**settings, "MAX_IDLE_TIME_BEFORE_CLOSE": "2"}
        with running_nodes(1, workdir=tmp_path / "second", env=env, settings=second) as nodes:
            assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path / "second")
    messages = read_topic(own_kafka.bootstrap_servers, topic, expected=30, timeout=60)
    assert {orjson.loads(m.value)["url"] for m in messages} == site.all_urls()
    assert list((spool / "pages").glob("*.jsonl")) == []
    assert "'kafka/replayed': 30" in (tmp_path / "second" / "node-0.log").read_text()


@pytest.mark.slow
def test_dead_letters_of_a_node_stopped_while_kafka_is_away_are_spooled_for_the_dlq(
    own_kafka: KafkaBroker, topic_template: str, tmp_path: Path
) -> None:
    """A graceful stop purges the dead letters waiting for the paused broker: they go to the
    spool, addressed to the dead-letter topic, and a replay delivers them there. Only the
    item too large for the dead-letter topic too is in the node's dead-letter file. They used
    to be written to that file (``schema; dlq: _purge_queue``), which nothing replays."""
    spool = tmp_path / "spool"
    bootstrap = own_kafka.bootstrap_servers
    topic = topic_template.format(spider="faulty")
    producer = ItemProducer(producer_config(bootstrap, {}))
    asyncio.run(producer.ensure_topics([topic, f"{topic}.dlq"], 1, 1))
    own_kafka.pause()
    with faulty_node(bootstrap, topic_template, tmp_path, spool, KAFKA_FLUSH_TIMEOUT="2") as (
        site,
        nodes,
    ):
        wait_for_hits(site, 1)
        time.sleep(2)
        nodes[0].send_signal(signal.SIGTERM)
        assert wait_for_exit(nodes, timeout=60) == [0], logs(tmp_path)
    (letter,) = [
        decode_record(line)
        for path in (spool / "faulty" / DEAD_LETTER_DIR).glob("*.jsonl")
        for line in path.read_bytes().splitlines()
    ]
    assert letter.reason == "msg_size_too_large; dlq: msg_size_too_large"
    spooled = [
        decode_record(line)
        for path in (spool / "faulty").glob("*.jsonl")
        for line in path.read_bytes().splitlines()
    ]
    assert Counter(r.message.topic for r in spooled) == {topic: 3, f"{topic}.dlq": 2}
    log = (tmp_path / "node-0.log").read_text()
    assert "'kafka/dead_letter_spooled'" in log and "kafka/spool_unreadable" not in log

    own_kafka.resume()
    env = {"CRAWLER_SETTING_SPIDER_MODULES": "crawler.spiders,tests.spiders"}
    listed = crawler_process("spool", "list", "faulty", "--dir", str(spool), env=env)
    assert "segment=dead-letters/" in ok(listed)
    replayed = crawler_process(
        "spool", "replay", "faulty", "--dir", str(spool), "--bootstrap", bootstrap, env=env
    )
    assert ok(replayed) == "replayed=3 spooled_again=0 dead_lettered=2 left=0 spool_errors=0\n"
    dead = read_topic(bootstrap, f"{topic}.dlq", expected=2, timeout=30)
    assert {m.headers["dlq_reason"] for m in dead} == {b"unencodable", b"schema"}
    assert {m.headers["dlq_original_topic"] for m in dead} == {topic.encode()}
    good = read_topic(bootstrap, topic, expected=3, timeout=30)
    fragments = sorted(orjson.loads(m.value)["url"].split("#")[1] for m in good)
    assert fragments == ["good-1", "good-2", "good-3"]


def test_kcat_reads_values_and_headers_byte_exact(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = f"kcat-{time.time_ns()}"
    value = "知乎 😀 Ünïcödé ✓".encode()

    producer = ItemProducer(producer_config(kafka_bootstrap, {}))
    # Stamped now (0): an old timestamp is deleted by the broker's 7-day retention.
    message = OutgoingMessage(topic, b"k1", value, [("item_type", b"page")], 0)
    assert producer.send(message, lambda error, _msg: None)
    producer._producer.flush(30)
    out = subprocess.run(
        ["kcat", "-b", kafka_bootstrap, "-t", topic, "-C", "-e", "-c", "1", "-f", "%k|%h|%s"],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    assert out == b"k1|item_type=page|" + value


@pytest.mark.slow
def test_kafka_down_past_max_outage_pauses_then_resumes_the_crawl(
    redis_url: str, own_kafka: KafkaBroker, topic_template: str, tmp_path: Path
) -> None:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": own_kafka.bootstrap_servers}
    settings = {
        **FAST_LEASES,
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "KAFKA_MAX_OUTAGE": "2",
        "CONCURRENT_REQUESTS": "4",
    }
    log = tmp_path / "node-0.log"
    with (
        Site(400, delay=0.05) as site,
        running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        client = redis.Redis.from_url(redis_url)
        client.lpush("pages:start_urls", site.url(0))
        client.close()
        wait_for_hits(site, 50)
        own_kafka.stop()
        assert wait_for_log(log, "crawl paused until Kafka answers", timeout=60), logs(tmp_path)
        time.sleep(1)  # requests already in flight finish
        paused_hits = sum(site.hits.values())
        time.sleep(3)
        assert sum(site.hits.values()) == paused_hits  # nothing new is crawled
        assert paused_hits < site.pages
        own_kafka.start()
        assert wait_for_log(log, "Kafka answers again: crawl resumed", timeout=120), logs(tmp_path)
        assert wait_for_exit(nodes, timeout=180) == [0], logs(tmp_path)
    messages = read_topic(
        own_kafka.bootstrap_servers, topic_template.format(spider="pages"), expected=site.pages
    )
    missing = site.all_urls() - {orjson.loads(m.value)["url"] for m in messages}
    # seen once in CI (a page's item not in the topic): keep what explains it
    broker_log = log_tail(own_kafka.log_path, 120)
    assert not missing, f"not in Kafka: {sorted(missing)}\n{logs(tmp_path)}\n{broker_log}"
    assert len(messages) >= site.pages
    assert "'kafka/crawl_paused/max_outage': 1" in log.read_text()


def test_a_topic_the_broker_refuses_for_good_stops_the_node_and_loses_nothing(
    kafka_bootstrap: str,
    topic_template: str,
    redis_url: str,
    redis_client: redis.Redis,
    tmp_path: Path,
) -> None:
    """A replication factor the cluster cannot give (settings.md says 3 in production; this
    broker is one) is no outage: the node stops at once, says which setting, and its pages go
    back to the queue. It used to retry forever, its items waiting and the node never closing."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    settings = {
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "KAFKA_TOPIC_REPLICATION": "3",
        "KAFKA_SPOOL_DIR": str(tmp_path / "spool"),
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
    }
    with Site(3) as site, running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes:
        redis_client.lpush("pages:start_urls", site.url(0))
        assert wait_for_exit(nodes, timeout=90) == [1], logs(tmp_path)
    log = (tmp_path / "node-0.log").read_text()
    assert "Closing spider (kafka_topic_refused)" in log
    assert "KAFKA_TOPIC_REPLICATION" in log
    # made at open, though nothing was spooled: `crawler spool list --dir <it>` refused a healthy
    # node's KAFKA_SPOOL_DIR as "not a folder" (an audit)
    assert (tmp_path / "spool" / "pages").is_dir()
    assert "'kafka/topic_refused/INVALID_REPLICATION_FACTOR'" in log
    # the page went back to the queue: it is crawled again once its items can be sent
    assert queued(redis_client, FrontierKeys.for_spider("pages")) >= 1
