"""Prometheus metrics, the startup line and the cluster summary: units, then two real nodes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import scrapy
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from redis.asyncio import Redis as AsyncRedis
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler.demo.nodes import REPO_ROOT
from crawler.demo.site import Site
from crawler.devservices import RedisServer
from crawler.extensions.cluster_logstats import (
    CLUSTER_SCRIPT,
    ClusterCounts,
    ClusterLogStatsSettings,
    leases_held,
    read_cluster,
    summary,
    unread_backlog,
)
from crawler.extensions.metrics import MetricsSettings, PrometheusMetrics, parse_port_range
from crawler.extensions.startup_log import describe_node
from crawler.metrics.cluster import ClusterReader, ClusterState
from crawler.metrics.node import Histogram, NodeMetrics
from crawler.metrics.server import serve
from crawler.metrics.stats import StatsMetrics
from crawler.node_context import NodeContext
from crawler.redis_connection import sync_client
from crawler.sessions.keys import SessionKeys
from tests.cluster import logs, running_nodes, tracebacks, wait_for_exit, wait_for_log

LABELS = {"spider": "pages", "node": "node-a", "crawl": "c1"}
METRICS_LINE = re.compile(r"Metrics on http://[^:]+:(\d+)/metrics")


def samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(found: list[Sample], name: str, **labels: str) -> float | None:
    for sample in found:
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
            return sample.value
    return None


def scrape(port: int) -> list[Sample]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return samples(response.read().decode())


def no_health(_ping: bool) -> dict[str, str]:
    return {}


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("9410-9450", (9410, 9450)), ("9410", (9410, 9410)), (" 0 ", (0, 0)), (9411, (9411, 9411))],
)
def test_port_range_parses(raw: object, expected: tuple[int, int]) -> None:
    assert parse_port_range(raw) == expected


@pytest.mark.parametrize("raw", ["abc", "9450-9410", "0-10", "70000", "9410-"])
def test_bad_port_range_names_the_setting(raw: str) -> None:
    with pytest.raises(ValueError, match=rf"METRICS_PORTS={raw!r}"):
        parse_port_range(raw)


def test_metrics_settings_read_once() -> None:
    settings = Settings(
        {
            "METRICS_ENABLED": True,
            "METRICS_HOST": "127.0.0.1",
            "METRICS_PORTS": "0",
            "CRAWLER_NODE_ID": "n7",
            "CRAWLER_CRAWL_ID": "c1",
        }
    )
    assert MetricsSettings.from_settings(settings) == MetricsSettings(
        "127.0.0.1", (0, 0), "n7", "c1", redis_url="", kafka=False
    )


def test_metrics_host_defaults_to_loopback_and_follows_the_environment() -> None:
    from settings.resolve import resolve_settings

    assert resolve_settings({})["METRICS_HOST"] == "127.0.0.1"
    every_interface = "0.0.0.0"  # noqa: S104 - what containers set
    assert resolve_settings({"METRICS_HOST": every_interface})["METRICS_HOST"] == every_interface


def test_metrics_disabled_is_not_configured() -> None:
    with pytest.raises(NotConfigured):
        MetricsSettings.from_settings(Settings({"METRICS_ENABLED": False}))


def test_empty_metrics_host_is_rejected() -> None:
    settings = Settings({"METRICS_ENABLED": True, "METRICS_HOST": " ", "METRICS_PORTS": "0"})
    with pytest.raises(ValueError, match=r"METRICS_HOST=' ' must be an address"):
        MetricsSettings.from_settings(settings)


def test_cluster_logstats_settings() -> None:
    with pytest.raises(NotConfigured, match="REDIS_URL"):
        ClusterLogStatsSettings.from_settings(Settings({"CLUSTER_LOGSTATS_ENABLED": True}))
    bad = Settings(
        {
            "CLUSTER_LOGSTATS_ENABLED": True,
            "REDIS_URL": "redis://h/0",
            "CLUSTER_LOGSTATS_INTERVAL": 0,
        }
    )
    with pytest.raises(ValueError, match=r"CLUSTER_LOGSTATS_INTERVAL=0.0 must be > 0"):
        ClusterLogStatsSettings.from_settings(bad)


# --------------------------------------------------------------------------- collector


def test_collector_turns_stats_into_metrics() -> None:
    stats: dict[str, object] = {
        "response_received_count": 12,
        "item_scraped_count": 10,
        "kafka/delivered": 9,
        "kafka/failed/_msg_timed_out": 2,
        "kafka/failed/msg_size_too_large": 1,
        "kafka/dead_lettered": 1,
        "kafka/dead_lettered_file": 2,
        "frontier/reclaimed": 4,
        "frontier/failed/download/TimeoutError": 3,
        "politeness/delayed": 5,
        "politeness/penalty/429": 2,
        "downloader/response_status_count/200": 11,
        "downloader/response_status_count/429": 2,
        "retry/reason_count/429 Unknown Status": 2,
        "log_count/WARNING": 3,
        "seeds/redis_error": 1,
        "frontier/redis_error": 6,
        "seeds/invalid/json": 2,
        "redis/clock_step/ahead": 1,
        "redis/master_switched": 1,
        "kafka/unproven_ack": 2,
        "memusage/max": 1.5e6,
        "start_time": object(),  # not numeric: left out
        "finish_reason": "finished",
        "some_flag": True,
    }
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatsMetrics(lambda: stats, LABELS))
    found = [s for metric in registry.collect() for s in metric.samples]

    expected = {
        ("crawler_pages_total", ()): 12,
        ("crawler_items_scraped_total", ()): 10,
        ("crawler_kafka_delivered_total", ()): 9,
        ("crawler_kafka_failed_total", (("reason", "_msg_timed_out"),)): 2,
        ("crawler_kafka_failed_total", (("reason", "msg_size_too_large"),)): 1,
        ("crawler_dead_letters_total", ()): 3,
        ("crawler_leases_reclaimed_total", ()): 4,
        ("crawler_frontier_failed_total", (("reason", "download/TimeoutError"),)): 3,
        ("crawler_politeness_delayed_total", ()): 5,
        ("crawler_politeness_cooldowns_total", (("reason", "429"),)): 2,
        ("crawler_responses_total", (("status", "200"),)): 11,
        ("crawler_responses_total", (("status", "429"),)): 2,
        ("crawler_retries_total", (("reason", "429 Unknown Status"),)): 2,
        ("crawler_log_messages_total", (("level", "WARNING"),)): 3,
        ("crawler_redis_errors_total", (("component", "seeds"),)): 1,
        ("crawler_redis_errors_total", (("component", "frontier"),)): 6,
        ("crawler_seeds_invalid_total", (("reason", "json"),)): 2,
        ("crawler_redis_clock_steps_total", (("direction", "ahead"),)): 1,
        ("crawler_redis_master_switches_total", ()): 1,
        ("crawler_kafka_unproven_acks_total", ()): 2,
    }
    for (name, extra), want in expected.items():
        assert value(found, name, **LABELS, **dict(extra)) == want, (name, extra)
    for sample in found:
        assert {k: sample.labels[k] for k in LABELS} == LABELS, sample
    assert {family.type for family in registry.collect()} == {"counter"}  # no untyped catch-all


def test_collector_on_empty_stats_has_zero_counters() -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatsMetrics(dict, LABELS))
    found = [s for metric in registry.collect() for s in metric.samples]
    assert value(found, "crawler_pages_total") == 0
    assert value(found, "crawler_kafka_failed_total") is None  # labelled: no reason yet


def test_histograms_are_cumulative_with_sum_and_count() -> None:
    histogram = Histogram("crawler_x_seconds", "x", (0.0, 0.1, 1.0))
    for seconds in (0.0, 0.05, 0.1, 0.5, 7.0):
        histogram.observe(seconds)
    found = histogram.family(["node"], ["n1"]).samples
    buckets = {s.labels["le"]: s.value for s in found if s.name == "crawler_x_seconds_bucket"}
    assert buckets == {"0.0": 1, "0.1": 3, "1.0": 4, "+Inf": 5}
    assert value(found, "crawler_x_seconds_count") == 5
    assert value(found, "crawler_x_seconds_sum") == pytest.approx(7.65)
    with pytest.raises(ValueError, match=r"crawler_y_seconds: buckets \[1, 0.5\] must rise"):
        Histogram("crawler_y_seconds", "y", (1, 0.5))


def test_cooldowns_count_down_to_zero() -> None:
    now = [100.0]
    metrics = NodeMetrics(clock=lambda: now[0])
    metrics.cooling("a.example:80", 30.0)
    metrics.politeness_wait.observe(0.25)
    now[0] += 10
    found = [s for family in metrics.collect(["node"], ["n1"]) for s in family.samples]
    assert value(found, "crawler_politeness_cooldown_seconds", site="a.example:80") == 20
    assert value(found, "crawler_politeness_wait_seconds_count") == 1
    assert value(found, "crawler_download_latency_seconds_count") == 0
    now[0] += 60
    found = [s for family in metrics.collect(["node"], ["n1"]) for s in family.samples]
    assert value(found, "crawler_politeness_cooldown_seconds", site="a.example:80") == 0
    now[0] += 600  # ten minutes after it ended, the site's series goes
    found = [s for family in metrics.collect(["node"], ["n1"]) for s in family.samples]
    assert value(found, "crawler_politeness_cooldown_seconds", site="a.example:80") is None


def test_librdkafka_lines_go_through_logging_at_their_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from crawler.kafka.health import LIBRDKAFKA_LOG
    from crawler.kafka.producer import producer_config

    assert producer_config("k:9092", {})["logger"] is LIBRDKAFKA_LOG
    getpid = (
        "[thrd:main]: Failed to acquire idempotence PID from broker k:9092/1: "
        "Broker: Coordinator load in progress: retrying"
    )
    lines = [
        (logging.WARNING, "GETPID", getpid),
        (logging.ERROR, "FAIL", "k:9092/1: Connect to ipv4#127.0.0.1:9092 failed"),
        (logging.WARNING, "CONFWARN", "Configuration property x is ignored"),
        (logging.ERROR, "GETPID", "Failed to acquire idempotence PID: fatal"),
    ]
    with caplog.at_level(logging.DEBUG, logger="crawler.kafka.librdkafka"):
        for level, facility, text in lines:
            LIBRDKAFKA_LOG.log(level, "%s [%s] %s", facility, "rdkafka#producer-1", text)
    assert [(r.levelno, r.getMessage().split(" ")[0]) for r in caplog.records] == [
        (logging.INFO, "GETPID"),
        (logging.DEBUG, "FAIL"),
        (logging.WARNING, "CONFWARN"),
        (logging.ERROR, "GETPID"),
    ]


# --------------------------------------------------------------------------- server


def test_serve_takes_the_next_free_port(busy_port: int) -> None:
    server = serve("127.0.0.1", (busy_port, busy_port + 20), CollectorRegistry(), no_health)
    try:
        assert busy_port < server.server_port <= busy_port + 20
    finally:
        server.shutdown()
        server.server_close()


def test_serve_fails_when_the_range_is_full(busy_port: int) -> None:
    with pytest.raises(ValueError, match=rf"METRICS_PORTS={busy_port}: no free port"):
        serve("127.0.0.1", (busy_port, busy_port), CollectorRegistry(), no_health)


def test_a_node_whose_metrics_ports_are_taken_is_not_started_with_one_line(busy_port: int) -> None:
    """Two nodes on one host with a fixed METRICS_PORTS: the second printed asyncio's "Task
    exception was never retrieved" and a RuntimeError's traceback, not the one-line refusal
    every other start-time refusal gets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS_", "KAFKA_"))}
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "pages", "-s", f"METRICS_PORTS={busy_port}"],
        cwd=REPO_ROOT,
        env={**env, "REDIS_URL": ""},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode != 0
    assert f"Not started: METRICS_PORTS={busy_port}: no free port" in result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def test_extension_serves_stats_and_stops_at_close() -> None:
    crawler = get_crawler(
        settings_dict={
            "METRICS_ENABLED": True,
            "METRICS_HOST": "127.0.0.1",
            "METRICS_PORTS": "0",
            "CRAWLER_NODE_ID": "node-x",
            "CRAWLER_CRAWL_ID": "c9",
        }
    )
    assert crawler.stats is not None
    crawler.stats.set_value("response_received_count", 3)
    extension = PrometheusMetrics.from_crawler(crawler)
    found = scrape(extension.port)
    labels = {"spider": crawler.spidercls.name, "node": "node-x", "crawl": "c9"}
    assert value(found, "crawler_pages_total", **labels) == 3
    assert value(found, "crawler_up", **labels) == 1

    extension.spider_closed(crawler.spidercls(), "finished")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            scrape(extension.port)
        except OSError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the metrics server still answers after spider close")


def test_download_latency_is_observed_for_every_response_also_retried_or_redirected() -> None:
    """The histogram heard ``response_received``, which a response the retry or redirect
    middleware turns into a request never reaches: 20 observed of 26 responses (an audit),
    where docs/metrics.md says every response."""
    crawler = get_crawler(settings_dict={**SERVED, "CRAWLER_NODE_ID": "node-x"})
    extension = PrometheusMetrics.from_crawler(crawler)
    spider = crawler.spidercls()
    try:
        for status, latency in ((500, 0.2), (302, 0.02)):  # retried, redirected
            request = Request("http://site.test/", meta={"download_latency": latency})
            response = Response(request.url, status=status, request=request)
            crawler.signals.send_catch_log(
                signals.response_downloaded, response=response, request=request, spider=spider
            )
        found = scrape(extension.port)
        assert value(found, "crawler_download_latency_seconds_count", spider=spider.name) == 2
        assert value(found, "crawler_download_latency_seconds_sum", spider=spider.name) == (
            pytest.approx(0.22)
        )
    finally:
        extension.spider_closed(spider, "finished")


SERVED = {"METRICS_ENABLED": True, "METRICS_HOST": "127.0.0.1", "METRICS_PORTS": "0"}


def stops_within(port: int, seconds: float) -> bool:
    """Whether the metrics server on ``port`` stops answering within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("reason", ["finished", "shutdown"])
def test_a_node_that_finished_serves_one_more_scrape_before_it_stops(reason: str) -> None:
    """The last scrape before a node closed still saw requests queued (its queue emptied
    between two scrapes): Prometheus kept that value and CrawlerNoLiveNode fired, critical,
    for an hour after a crawl that finished. A finished node now waits (at most 1.5 scrape
    intervals, METRICS_FINAL_SCRAPE_WAIT) for a scrape of its final state; a stop does not."""
    crawler = get_crawler(settings_dict={**SERVED, "METRICS_FINAL_SCRAPE_WAIT": 30.0})
    extension = PrometheusMetrics.from_crawler(crawler)
    scrape(extension.port)
    time.sleep(0.4)
    scrape(extension.port)  # a scraper every 0.4 s: the wait is at most 0.6 s
    extension.spider_closed(crawler.spidercls(), reason)
    if reason == "shutdown":
        assert stops_within(extension.port, 2)
        return
    assert not stops_within(extension.port, 0.2)
    assert value(scrape(extension.port), "crawler_up") == 0  # the final state, scraped
    assert stops_within(extension.port, 2)


def test_a_node_never_scraped_twice_stops_at_once() -> None:
    crawler = get_crawler(settings_dict=SERVED)
    extension = PrometheusMetrics.from_crawler(crawler)
    scrape(extension.port)
    extension.spider_closed(crawler.spidercls(), "finished")
    assert stops_within(extension.port, 2)


@pytest.mark.parametrize("raw", ["-1", "abc"])
def test_the_final_scrape_wait_is_checked(raw: str) -> None:
    with pytest.raises(ValueError, match="METRICS_FINAL_SCRAPE_WAIT"):
        MetricsSettings.from_settings(Settings({**SERVED, "METRICS_FINAL_SCRAPE_WAIT": raw}))


class PlatformSpider(scrapy.Spider):
    name = "metered"
    session_platform = "metered"


def test_sessions_gauge_reads_the_sessions_key_prefix(
    redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.zadd("accounts-of:{metered}:accounts", {"a1": 0})
    redis_client.hset("accounts-of:{metered}:session:a1", "health", "healthy")
    crawler = get_crawler(
        PlatformSpider,
        settings_dict={
            "METRICS_ENABLED": True,
            "METRICS_HOST": "127.0.0.1",
            "METRICS_PORTS": "0",
            "REDIS_URL": redis_url,
            "SESSIONS_KEY_PREFIX": "accounts-of",
        },
    )
    extension = PrometheusMetrics.from_crawler(crawler)
    try:
        assert value(scrape(extension.port), "crawler_sessions", health="healthy") == 1
    finally:
        extension.spider_closed(PlatformSpider(), "finished")


def get_json(port: int, path: str) -> tuple[int, dict[str, str]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def node_crawler(redis_url: str) -> Crawler:
    """A crawler of a node with Redis, without Kafka, its metrics on a free port."""
    return get_crawler(
        settings_dict={
            "EXTENSIONS": {"crawler.node_context.NodeContext": 0},
            "REDIS_MAX_CONNECTIONS": 4,
            "FRONTIER_CLOSE_TIMEOUT": 1.0,
            "METRICS_ENABLED": True,
            "METRICS_HOST": "127.0.0.1",
            "METRICS_PORTS": "0",
            "REDIS_URL": redis_url,
            "KAFKA_BOOTSTRAP_SERVERS": "",
        }
    )


def test_health_endpoints_follow_redis(own_redis: RedisServer) -> None:
    crawler = node_crawler(own_redis.url)
    extension = PrometheusMetrics.from_crawler(crawler)
    context = crawler.get_extension(NodeContext)
    assert context is not None
    try:
        up = {"redis": "ok", "kafka": "off"}
        assert get_json(extension.port, "/healthz") == (200, up)
        assert get_json(extension.port, "/readyz") == (200, up)
        found = scrape(extension.port)
        assert value(found, "crawler_redis_up") == 1
        assert value(found, "crawler_queue_depth") == 0
        assert value(found, "crawler_kafka_up") is None  # Kafka is off
        own_redis.stop()
        down = {"redis": "down", "kafka": "off"}
        assert get_json(extension.port, "/readyz") == (503, down)  # asks Redis now
        # Liveness does no I/O: it says what the node's components met, and stays 200.
        assert get_json(extension.port, "/healthz") == (200, up)
        context.guard("frontier").failed(redis.ConnectionError("Connection refused"))
        assert get_json(extension.port, "/healthz") == (200, down)
        found = scrape(extension.port)
        assert value(found, "crawler_redis_up") == 0
        assert value(found, "crawler_queue_depth") is None
        own_redis.start()
        assert get_json(extension.port, "/readyz") == (200, up)
        context.guard("frontier").succeeded()
        assert get_json(extension.port, "/healthz") == (200, up)
    finally:
        extension.spider_closed(crawler.spidercls(), "finished")


def test_readyz_and_metrics_answer_within_their_redis_timeout_while_redis_is_frozen(
    own_redis: RedisServer,
) -> None:
    """A Redis that keeps its sockets but does not answer (SIGSTOP, a freeze): redis-py's default
    retries made each ask take 25 s, past every scrape and probe timeout."""
    crawler = node_crawler(own_redis.url)
    extension = PrometheusMetrics.from_crawler(crawler)
    assert own_redis.pid is not None
    try:
        assert get_json(extension.port, "/readyz")[0] == 200
        os.kill(own_redis.pid, signal.SIGSTOP)
        began = time.monotonic()
        assert get_json(extension.port, "/readyz") == (503, {"redis": "down", "kafka": "off"})
        assert value(scrape(extension.port), "crawler_redis_up") == 0
        assert time.monotonic() - began < 10  # two asks of a 2 s timeout, not 50 s
    finally:
        os.kill(own_redis.pid, signal.SIGCONT)
        extension.spider_closed(crawler.spidercls(), "finished")


def test_leases_held_counts_the_prefetched_leases_too() -> None:
    """The gauge read the lease tracker alone: 0 while a paused node held its prefetched leases,
    16 where the node's log line said 24."""
    crawler = get_crawler(
        settings_dict={"METRICS_ENABLED": True, "METRICS_HOST": "127.0.0.1", "METRICS_PORTS": "0"}
    )
    extension = PrometheusMetrics.from_crawler(crawler)
    context = NodeContext.__new__(NodeContext)
    context.leases_held = lambda: 24  # started and prefetched, as the scheduler counts them
    extension._context = lambda: context  # type: ignore[method-assign]
    try:
        assert value(scrape(extension.port), "crawler_leases_held") == 24
    finally:
        extension.spider_closed(crawler.spidercls(), "finished")


def test_health_without_redis_is_ready() -> None:
    crawler = get_crawler(
        settings_dict={"METRICS_ENABLED": True, "METRICS_HOST": "127.0.0.1", "METRICS_PORTS": "0"}
    )
    extension = PrometheusMetrics.from_crawler(crawler)
    try:
        assert get_json(extension.port, "/readyz") == (200, {"redis": "off", "kafka": "off"})
    finally:
        extension.spider_closed(crawler.spidercls(), "finished")


# --------------------------------------------------------------------------- startup line


def test_startup_line_names_every_connection_without_secrets() -> None:
    settings = Settings(
        {
            "CRAWLER_NODE_ID": "n1",
            "CRAWLER_PROFILE": "prod",
            "CRAWLER_CRAWL_ID": "c1",
            "REDIS_URL": "redis://:hunter2@redis:6379/0",
            "KAFKA_BOOTSTRAP_SERVERS": "kafka:9092",
            "SCHEDULER": "crawler.frontier.scheduler.LeasingScheduler",
        }
    )
    line = describe_node(settings, "http://0.0.0.0:9410/metrics")
    assert line == (
        "Node n1 (profile prod, crawl c1): Redis redis://:***@redis:6379/0, Kafka kafka:9092, "
        "scheduler LeasingScheduler, metrics http://0.0.0.0:9410/metrics"
    )
    standalone = describe_node(Settings({"SCHEDULER": "scrapy.core.scheduler.Scheduler"}), None)
    assert "Redis off, Kafka off, scheduler Scheduler, metrics off" in standalone
    # KafkaPipeline turned off in ITEM_PIPELINES: the line said "Kafka kafka:9092" (an audit)
    unsent = describe_node(settings, None, kafka_pipeline=False)
    assert "Kafka off (KafkaPipeline is not in ITEM_PIPELINES), scheduler" in unsent


# --------------------------------------------------------------------------- cluster summary


def test_leases_held_estimate() -> None:
    stats = {
        "frontier/leased": 20,
        "frontier/done": 10,
        "frontier/failed/download/TimeoutError": 2,
        "frontier/requeued/kafka/_msg_timed_out": 1,
        "frontier/lease_lost/gone": 1,
    }
    assert leases_held(stats) == 6
    assert leases_held({"frontier/done": 3}) == 0


def test_summary_line() -> None:
    stats = {
        "response_received_count": 130,
        "item_scraped_count": 120,
        "kafka/delivered": 118,
        "kafka/failed/_msg_timed_out": 2,
        "frontier/leased": 140,
        "frontier/done": 132,
    }
    line = summary("n1", stats, (100, 100), 30.0, ClusterCounts(1200, 3, 0))
    assert line == (
        "Node n1: 130 pages (at 60/min), 120 items (at 40/min), Kafka 118 delivered, 2 failed, "
        "8 leases held; shared queue 1200, 3 live nodes"
    )
    assert "Redis did not answer" in summary("n1", {}, (0, 0), 60.0, None)
    spilled = summary("n1", {}, (0, 0), 60.0, ClusterCounts(0, 1, 176))
    assert spilled.endswith("shared queue 0 (+176 in the Kafka backlog), 1 live nodes")
    late = summary("n1", {}, (0, 0), 60.0, ClusterCounts(0, 2, 0, late_nodes=1))
    assert late.endswith("shared queue 0, 2 live nodes, 1 late (no heartbeat for two intervals)")


def test_a_node_that_does_not_read_the_backlog_says_so_when_requests_wait_there() -> None:
    """A node without FRONTIER_QUEUE_MAX beside nodes with it: once they stopped it idled for
    ever, logging 'shared queue 0, 1 live nodes' while 176 requests waited in Kafka (an
    audit)."""
    said = unread_backlog("pages", ClusterCounts(0, 1, 176), queue_max=0)
    assert said is not None
    assert "176 requests of 'pages' wait in the Kafka backlog" in said
    assert "FRONTIER_QUEUE_MAX" in said
    assert unread_backlog("pages", ClusterCounts(0, 1, 176), queue_max=1000) is None
    assert unread_backlog("pages", ClusterCounts(5, 1, 0), queue_max=0) is None


def test_read_cluster_counts_queue_and_live_nodes(
    redis_url: str, redis_client: redis.Redis
) -> None:
    now_ms = int(time.time() * 1000)
    redis_client.set("{pages}:queue:count", 3)
    redis_client.set("{pages}:backlog", 7)
    nodes = {"alive": now_ms + 60_000, "dead": now_ms - 60_000, "killed": now_ms + 40_000}
    redis_client.zadd("{pages}:nodes", nodes)
    # A node killed 20 s ago (heartbeats every 5 s) counts until its entry runs out, a lease
    # timeout after its last beat: the summary said "3 live nodes" 55 s after a kill -9 while
    # `crawler status` called it late (an audit). Late, as there: two heartbeats missed.
    redis_client.hset("{pages}:beats", "alive", f"{now_ms - 1_000} 5000 60000")
    redis_client.hset("{pages}:beats", "killed", f"{now_ms - 20_000} 5000 60000")

    async def read() -> ClusterCounts | None:
        client = AsyncRedis.from_url(redis_url)
        try:
            return await read_cluster(client.register_script(CLUSTER_SCRIPT), "pages", 1, 5.0)
        finally:
            await client.aclose()

    assert asyncio.run(read()) == ClusterCounts(3, 1, 7, late_nodes=1)


def test_cluster_reader_counts_queue_leases_nodes_and_sessions(
    redis_url: str, redis_client: redis.Redis
) -> None:
    now_ms = int(time.time() * 1000)
    redis_client.set("{zhihu}:queue:count", 2)
    redis_client.zadd("{zhihu}:leases", {"c": now_ms + 60_000, "d": now_ms - 60_000})
    redis_client.zadd("{zhihu}:nodes", {"alive": now_ms + 60_000, "dead": now_ms - 60_000})
    redis_client.zadd("sessions:{zhihu}:accounts", {"a1": 0, "a2": 0, "a3": 0})
    redis_client.hset("sessions:{zhihu}:session:a1", "health", "healthy")
    redis_client.hset("sessions:{zhihu}:session:a2", "health", "banned")
    redis_client.hset("sessions:{zhihu}:session:a3", "health", "banned")
    reader = ClusterReader(sync_client(redis_url), "zhihu", SessionKeys("zhihu"))
    try:
        assert reader.read() == ClusterState(
            queue=2,
            leases=2,
            expired_leases=1,
            live_nodes=1,
            sessions={"healthy": 1, "expired": 0, "risky": 0, "banned": 2, "retired": 0},
        )
    finally:
        reader.close()
    without_sessions = ClusterReader(sync_client(redis_url), "pages", None)
    try:
        assert without_sessions.read() == ClusterState(0, 0, 0, 0, {})
    finally:
        without_sessions.close()


def test_cluster_reader_counts_requests_waiting_in_the_kafka_backlog_as_queued(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """With FRONTIER_QUEUE_MAX the rest of the queue waits in Kafka: crawler_queue_depth counts
    it (as crawler status does), so CrawlerNoLiveNode fires for a crawl whose work is all
    there; crawler_backlog_depth says how much of it is."""
    redis_client.set("{pages}:queue:count", 1)
    redis_client.set("{pages}:backlog", 5)
    reader = ClusterReader(sync_client(redis_url), "pages", None)
    try:
        assert reader.read() == ClusterState(6, 0, 0, 0, {}, backlog=5)
    finally:
        reader.close()


def test_read_cluster_without_redis_is_none(busy_port: int) -> None:
    async def read() -> ClusterCounts | None:
        client = AsyncRedis.from_url(f"redis://127.0.0.1:{busy_port}/0", socket_timeout=0.5)
        try:
            return await read_cluster(client.register_script(CLUSTER_SCRIPT), "pages", 1, 5.0)
        finally:
            await client.aclose()

    assert asyncio.run(read()) is None


# --------------------------------------------------------------------------- real nodes


def test_two_nodes_serve_metrics_during_a_crawl(
    redis_url: str,
    redis_client: redis.Redis,
    kafka_bootstrap: str,
    topic_template: str,
    tmp_path: Path,
) -> None:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    settings = {
        "METRICS_HOST": "127.0.0.1",
        "METRICS_PORTS": "0",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "5",
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "CLUSTER_LOGSTATS_INTERVAL": "1",
        "CONCURRENT_REQUESTS_PER_DOMAIN": "2",  # make the crawl last a few seconds
    }
    node_logs = [tmp_path / f"node-{index}.log" for index in range(2)]
    with (
        Site(300, delay=0.05) as site,
        running_nodes(2, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        for path in node_logs:
            assert wait_for_log(path, "scheduler LeasingScheduler", timeout=60), logs(tmp_path)
        ports = []
        for path in node_logs:
            match = METRICS_LINE.search(path.read_text())
            assert match, logs(tmp_path)
            ports.append(int(match.group(1)))
        redis_client.lpush("pages:start_urls", site.url(0))

        history: list[list[list[Sample]]] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and all(node.poll() is None for node in nodes):
            try:
                history.append([scrape(port) for port in ports])
            except OSError:
                break  # a node closed: the crawl is over
            time.sleep(0.2)
        codes = wait_for_exit(nodes, timeout=120)

        assert codes == [0, 0], logs(tmp_path)
        assert tracebacks(tmp_path) == [], logs(tmp_path)

    def total(scraped: list[list[Sample]], name: str) -> float:
        return sum(value(node, name) or 0.0 for node in scraped)

    pages = [total(scraped, "crawler_pages_total") for scraped in history]
    assert len(set(pages)) >= 3, pages  # it grew, several times, while the nodes crawled
    assert pages == sorted(pages)
    assert 0 < pages[-1] <= site.pages + 5  # every page once (robots.txt is off in dev)
    assert total(history[-1], "crawler_kafka_delivered_total") > 0

    def up(scraped: list[list[Sample]]) -> list[float | None]:
        return [value(node, "crawler_up") for node in scraped]

    # The last scrape may come after a node closed its spider (crawler_up 0, metrics still
    # served): check the last one taken while both nodes were crawling.
    crawling = [scraped for scraped in history if up(scraped) == [1, 1]]
    assert crawling, [up(scraped) for scraped in history]
    for index, node_samples in enumerate(crawling[-1]):
        node_labels = {"spider": "pages", "node": f"node-{index}", "crawl": "default"}
        assert value(node_samples, "crawler_up", **node_labels) == 1
        assert value(node_samples, "crawler_kafka_delivered_total", **node_labels) is not None
        # a node's graceful stop unregisters it before its crawler_up is 0: not only the last
        live = [value(scraped[index], "crawler_live_nodes", **node_labels) for scraped in crawling]
        assert 2 in live, live
        assert value(node_samples, "crawler_redis_up", **node_labels) == 1
        assert value(node_samples, "crawler_kafka_up", **node_labels) == 1
        for sample in node_samples:
            if sample.name.startswith("crawler_"):
                assert {k: sample.labels.get(k) for k in node_labels} == node_labels, sample
        assert value(node_samples, "process_resident_memory_bytes")

    for index, path in enumerate(node_logs):
        text = path.read_text()
        assert f"Node node-{index} (profile dev, crawl default): Redis {redis_url}, " in text
        assert f"Kafka {kafka_bootstrap}, scheduler LeasingScheduler, " in text
        assert f"metrics http://127.0.0.1:{ports[index]}/metrics" in text
        assert re.search(rf"Node node-{index}: \d+ pages .* live nodes", text), text[-3000:]
        assert f"Metrics server on port {ports[index]} stopped" in text
