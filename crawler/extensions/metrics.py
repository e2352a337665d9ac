"""``PrometheusMetrics``: each node serves its Scrapy stats as Prometheus metrics over HTTP.

The server (prometheus_client's WSGI server, in a daemon thread, with a registry of
its own) binds when the extension is created, so a bad address fails the node at
start, and stops at spider close. It takes the first free port of ``METRICS_PORTS``
(several nodes on one host each get their own) and logs it. Nothing is copied into
the registry while crawling: ``StatsMetrics`` reads the stats at scrape time. Every
numeric stat is a sample of ``crawler_stat{stat="<name>"}``; the main ones also have
metrics of their own (``FAMILIES``, documented in docs/metrics.md). Every sample
carries the labels ``spider``, ``node`` and ``crawl``.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings

from crawler.node import resolve_node_id

logger = logging.getLogger(__name__)

MAX_PORT = 65535
BASE_LABELS = ("spider", "node", "crawl")


@dataclass(frozen=True, slots=True)
class Family:
    """A metric built from the stats whose name matches ``pattern`` (summed per label value).

    ``label``, when set, takes its value from the pattern's first group.
    """

    name: str  # without the ``_total`` suffix prometheus_client adds to counters
    documentation: str
    pattern: re.Pattern[str]
    label: str | None = None


def _family(name: str, documentation: str, pattern: str, label: str | None = None) -> Family:
    return Family(name, documentation, re.compile(pattern), label)


# Derived from docs/stats.md; Scrapy's own counters for pages and items.
FAMILIES = (
    _family("crawler_pages", "Responses downloaded by this node", r"response_received_count"),
    _family(
        "crawler_items_scraped", "Items that went through the pipelines", r"item_scraped_count"
    ),
    _family(
        "crawler_kafka_delivered", "Items acknowledged by the Kafka broker", r"kafka/delivered"
    ),
    _family(
        "crawler_kafka_failed",
        "Kafka delivery failures by librdkafka error name",
        r"kafka/failed/(.+)",
        "reason",
    ),
    _family(
        "crawler_dead_letters",
        "Messages dead-lettered, to the dead-letter topic or the local file",
        r"kafka/dead_lettered(?:_file)?",
    ),
    _family(
        "crawler_leases_reclaimed",
        "Expired leases of dead nodes this node returned to the queue",
        r"frontier/reclaimed",
    ),
    _family(
        "crawler_frontier_failed",
        "Requests recorded as failed in the frontier, by reason",
        r"frontier/failed/(.+)",
        "reason",
    ),
    _family(
        "crawler_limiter_waits",
        "Requests that waited for their site's rate-limit slot",
        r"politeness/delayed",
    ),
    _family(
        "crawler_redis_errors",
        "Redis operations that failed during an outage, by component",
        r"([^/]+)/redis_error",
        "component",
    ),
    _family(
        "crawler_seeds_invalid",
        "Seeds rejected and moved to the invalid list, by reason",
        r"seeds/invalid/(.+)",
        "reason",
    ),
)


def parse_port_range(value: object) -> tuple[int, int]:
    """``"9410-9450"`` -> (9410, 9450); ``"9410"`` -> (9410, 9410); ``"0"``: any free port."""
    text = str(value).strip()
    first, sep, last = text.partition("-")
    try:
        ports = (int(first), int(last) if sep else int(first))
    except ValueError:
        raise ValueError(
            f"METRICS_PORTS={value!r} is not a port or a range like 9410-9450"
        ) from None
    if ports != (0, 0) and not 1 <= ports[0] <= ports[1] <= MAX_PORT:
        raise ValueError(
            f"METRICS_PORTS={value!r} must be 0 or a range of ports 1..{MAX_PORT}, low to high"
        )
    return ports


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    host: str
    ports: tuple[int, int]
    node_id: str
    crawl_id: str

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> MetricsSettings:
        if not settings.getbool("METRICS_ENABLED"):
            raise NotConfigured("METRICS_ENABLED is off")
        host = str(settings.get("METRICS_HOST") or "").strip()
        if not host:
            raise ValueError(f"METRICS_HOST={settings.get('METRICS_HOST')!r} must be an address")
        return cls(
            host=host,
            ports=parse_port_range(settings.get("METRICS_PORTS")),
            node_id=resolve_node_id(settings.get("CRAWLER_NODE_ID") or ""),
            crawl_id=str(settings.get("CRAWLER_CRAWL_ID") or ""),
        )


def numeric_stats(stats: Mapping[str, Any]) -> dict[str, float]:
    """The stats that are numbers (not booleans, datetimes or strings)."""
    return {
        name: float(value)
        for name, value in stats.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


class StatsMetrics(Collector):
    """Turns a snapshot of the stats into metric families at every scrape."""

    def __init__(
        self,
        read_stats: Callable[[], Mapping[str, Any]],
        labels: Mapping[str, str],
        is_up: Callable[[], bool],
    ) -> None:
        self.read_stats = read_stats
        self.label_names = list(labels)
        self.label_values = list(labels.values())
        self.is_up = is_up

    def collect(self) -> Iterator[Metric]:
        stats = numeric_stats(self.read_stats())
        up = GaugeMetricFamily("crawler_up", "1 while the node crawls", labels=self.label_names)
        up.add_metric(self.label_values, 1.0 if self.is_up() else 0.0)
        yield up
        for family in FAMILIES:
            yield self._family(family, stats)
        raw = UnknownMetricFamily(
            "crawler_stat",
            "Every numeric Scrapy stat of this node, by name (most are running totals)",
            labels=[*self.label_names, "stat"],
        )
        for name in sorted(stats):
            raw.add_metric([*self.label_values, name], stats[name])
        yield raw

    def _family(self, family: Family, stats: Mapping[str, float]) -> Metric:
        extra = [family.label] if family.label else []
        metric = CounterMetricFamily(
            family.name, family.documentation, labels=[*self.label_names, *extra]
        )
        totals: dict[tuple[str, ...], float] = {}
        for name, value in stats.items():
            if match := family.pattern.fullmatch(name):
                key: tuple[str, ...] = (match.group(1),) if family.label else ()
                totals[key] = totals.get(key, 0.0) + value
        if not totals and not family.label:
            totals[()] = 0.0  # unlabelled counters exist from the start
        for key, total in sorted(totals.items()):
            metric.add_metric([*self.label_values, *key], total)
        return metric


def serve(host: str, ports: tuple[int, int], registry: CollectorRegistry) -> WSGIServer:
    """Start the HTTP server on the first free port of ``ports``; return it."""
    last_error: OSError | None = None
    for port in range(ports[0], ports[1] + 1):
        try:
            server, _thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            last_error = exc
            continue
        return server
    raise RuntimeError(
        f"METRICS_PORTS={ports[0]}-{ports[1]}: no free port on METRICS_HOST={host!r} ({last_error})"
    )


class PrometheusMetrics:
    def __init__(self, crawler: Crawler) -> None:
        self.settings = MetricsSettings.from_settings(crawler.settings)
        assert crawler.stats is not None
        stats = crawler.stats
        self._up = True
        labels = {
            "spider": str(crawler.spidercls.name),
            "node": self.settings.node_id,
            "crawl": self.settings.crawl_id,
        }
        registry = CollectorRegistry(auto_describe=False)
        # Scrapes run in the server's thread: copy the dict (atomic under the GIL).
        registry.register(StatsMetrics(lambda: dict(stats.get_stats()), labels, lambda: self._up))
        self._server = serve(self.settings.host, self.settings.ports, registry)
        self.port: int = self._server.server_port
        logger.info("Metrics on http://%s:%d/metrics", self.settings.host, self.port)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PrometheusMetrics:
        return cls(crawler)

    @property
    def address(self) -> str:
        return f"{self.settings.host}:{self.port}"

    def spider_closed(self, spider: Spider, reason: str) -> None:
        self._up = False
        # shutdown() waits up to half a second for serve_forever() to notice: not on the
        # reactor thread. Not a daemon either, so the process waits for it before exiting.
        threading.Thread(target=_stop, args=(self._server,), name="metrics-stop").start()


def _stop(server: WSGIServer) -> None:
    server.shutdown()
    server.server_close()
    logger.info("Metrics server on port %d stopped", server.server_port)
