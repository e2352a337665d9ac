"""Prometheus metrics, the startup line and the cluster summary: units, then two real nodes."""

from __future__ import annotations

import asyncio
import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from redis.asyncio import Redis as AsyncRedis
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler.demo.site import Site
from crawler.extensions.cluster_logstats import (
    CLUSTER_SCRIPT,
    ClusterLogStatsSettings,
    leases_held,
    read_cluster,
    summary,
)
from crawler.extensions.metrics import (
    MetricsSettings,
    PrometheusMetrics,
    StatsMetrics,
    parse_port_range,
    serve,
)
from crawler.extensions.startup_log import describe_node
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
        "127.0.0.1", (0, 0), "n7", "c1"
    )


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
        "seeds/redis_error": 1,
        "frontier/redis_error": 6,
        "seeds/invalid/json": 2,
        "memusage/max": 1.5e6,
        "start_time": object(),  # not numeric: left out
        "finish_reason": "finished",
        "some_flag": True,
    }
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatsMetrics(lambda: stats, LABELS, lambda: True))
    found = [s for metric in registry.collect() for s in metric.samples]

    expected = {
        ("crawler_up", ()): 1,
        ("crawler_pages_total", ()): 12,
        ("crawler_items_scraped_total", ()): 10,
        ("crawler_kafka_delivered_total", ()): 9,
        ("crawler_kafka_failed_total", (("reason", "_msg_timed_out"),)): 2,
        ("crawler_kafka_failed_total", (("reason", "msg_size_too_large"),)): 1,
        ("crawler_dead_letters_total", ()): 3,
        ("crawler_leases_reclaimed_total", ()): 4,
        ("crawler_frontier_failed_total", (("reason", "download/TimeoutError"),)): 3,
        ("crawler_limiter_waits_total", ()): 5,
        ("crawler_redis_errors_total", (("component", "seeds"),)): 1,
        ("crawler_redis_errors_total", (("component", "frontier"),)): 6,
        ("crawler_seeds_invalid_total", (("reason", "json"),)): 2,
        ("crawler_stat", (("stat", "memusage/max"),)): 1.5e6,
        ("crawler_stat", (("stat", "kafka/failed/_msg_timed_out"),)): 2,
    }
    for (name, extra), want in expected.items():
        assert value(found, name, **LABELS, **dict(extra)) == want, (name, extra)
    for sample in found:
        assert {k: sample.labels[k] for k in LABELS} == LABELS, sample
    raw_stats = {s.labels["stat"] for s in found if s.name == "crawler_stat"}
    assert not raw_stats & {"start_time", "finish_reason", "some_flag"}
    assert len(raw_stats) == 14


def test_collector_on_empty_stats_has_zero_counters() -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StatsMetrics(dict, LABELS, lambda: False))
    found = [s for metric in registry.collect() for s in metric.samples]
    assert value(found, "crawler_up") == 0
    assert value(found, "crawler_pages_total") == 0
    assert value(found, "crawler_kafka_failed_total") is None  # labelled: no reason yet


# --------------------------------------------------------------------------- server


def test_serve_takes_the_next_free_port(busy_port: int) -> None:
    server = serve("127.0.0.1", (busy_port, busy_port + 20), CollectorRegistry())
    try:
        assert busy_port < server.server_port <= busy_port + 20
    finally:
        server.shutdown()
        server.server_close()


def test_serve_fails_when_the_range_is_full(busy_port: int) -> None:
    with pytest.raises(RuntimeError, match=rf"METRICS_PORTS={busy_port}-{busy_port}: no free port"):
        serve("127.0.0.1", (busy_port, busy_port), CollectorRegistry())


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
    line = summary("n1", stats, (100, 100), 30.0, (1200, 3))
    assert line == (
        "Node n1: 130 pages (at 60/min), 120 items (at 40/min), Kafka 118 delivered, 2 failed, "
        "8 leases held; shared queue 1200, 3 live nodes"
    )
    assert "Redis did not answer" in summary("n1", {}, (0, 0), 60.0, None)


def test_read_cluster_counts_queue_and_live_nodes(
    redis_url: str, redis_client: redis.Redis
) -> None:
    now_ms = int(time.time() * 1000)
    redis_client.zadd("{pages}:queue", {"a": 0, "b": 0, "c": 1})
    redis_client.zadd("{pages}:nodes", {"alive": now_ms + 60_000, "dead": now_ms - 60_000})

    async def read() -> tuple[int, int] | None:
        client = AsyncRedis.from_url(redis_url)
        try:
            return await read_cluster(client.register_script(CLUSTER_SCRIPT), "pages", 5.0)
        finally:
            await client.aclose()

    assert asyncio.run(read()) == (3, 1)


def test_read_cluster_without_redis_is_none(busy_port: int) -> None:
    async def read() -> tuple[int, int] | None:
        client = AsyncRedis.from_url(f"redis://127.0.0.1:{busy_port}/0", socket_timeout=0.5)
        try:
            return await read_cluster(client.register_script(CLUSTER_SCRIPT), "pages", 5.0)
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
        assert value(node_samples, "crawler_stat", stat="frontier/leased", **node_labels)
        for sample in node_samples:
            assert {k: sample.labels.get(k) for k in node_labels} == node_labels, sample

    for index, path in enumerate(node_logs):
        text = path.read_text()
        assert f"Node node-{index} (profile dev, crawl default): Redis {redis_url}, " in text
        assert f"Kafka {kafka_bootstrap}, scheduler LeasingScheduler, " in text
        assert f"metrics http://127.0.0.1:{ports[index]}/metrics" in text
        assert re.search(rf"Node node-{index}: \d+ pages .* live nodes", text), text[-3000:]
        assert f"Metrics server on port {ports[index]} stopped" in text
