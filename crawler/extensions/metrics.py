"""``PrometheusMetrics``: each node serves its metrics and health over HTTP.

The server (``crawler.metrics.server``, a daemon thread, a registry of its own) binds
``METRICS_HOST`` on the first free port of ``METRICS_PORTS`` when the extension is created,
so a bad address fails the node at start, and stops at spider close: at once, or, when the
crawl finished, after one more scrape (at most 1.5 of the intervals it was scraped at, and
``METRICS_FINAL_SCRAPE_WAIT``), so Prometheus keeps the final state (queue empty, not up)
rather than the last it saw while work was left. At every scrape it
reads, without touching the reactor: counters from the Scrapy stats
(``crawler.metrics.stats``), the node's own gauges (leases held, spool bytes, whether Redis
and Kafka answer), the cluster's state from Redis with a short timeout
(``crawler.metrics.cluster``), the latency histograms and cooldowns components report
through :meth:`PrometheusMetrics.node_metrics`, and the default process collector. Every
``crawler_*`` sample carries the labels ``spider``, ``node`` and ``crawl``. docs/metrics.md
lists each metric; ``/healthz`` and ``/readyz`` say ``{"redis": ..., "kafka": ...}``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.settings import BaseSettings

from crawler.metrics.cluster import ClusterReader
from crawler.metrics.node import NodeMetrics
from crawler.metrics.server import serve
from crawler.metrics.stats import StatsMetrics
from crawler.node import resolve_crawl_id, resolve_node_id
from crawler.node_context import NodeContext
from crawler.redis_connection import sync_client
from crawler.sessions.keys import SessionKeys
from crawler.sessions.settings import SessionSettings
from crawler.settings_values import get_bool, get_float, get_int

logger = logging.getLogger(__name__)

MAX_PORT = 65535
REDIS_TIMEOUT = 2.0  # seconds a scrape or health check waits for Redis


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
    redis_url: str  # "" when standalone
    kafka: bool  # KAFKA_BOOTSTRAP_SERVERS is set
    final_scrape_wait: float = 0.0  # s a finished node waits for a scrape of its final state

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> MetricsSettings:
        if not get_bool(settings, "METRICS_ENABLED"):
            raise NotConfigured("METRICS_ENABLED is off")
        host = str(settings.get("METRICS_HOST") or "").strip()
        if not host:
            raise ValueError(f"METRICS_HOST={settings.get('METRICS_HOST')!r} must be an address")
        return cls(
            host=host,
            ports=parse_port_range(settings.get("METRICS_PORTS")),
            node_id=resolve_node_id(settings.get("CRAWLER_NODE_ID") or ""),
            crawl_id=resolve_crawl_id(settings.get("CRAWLER_CRAWL_ID")),
            redis_url=str(settings.get("REDIS_URL") or ""),
            kafka=bool(str(settings.get("KAFKA_BOOTSTRAP_SERVERS") or "").strip()),
            final_scrape_wait=final_scrape_wait(settings),
        )


def final_scrape_wait(settings: BaseSettings) -> float:
    wait = get_float(settings, "METRICS_FINAL_SCRAPE_WAIT")
    if wait < 0:
        raise ValueError(f"METRICS_FINAL_SCRAPE_WAIT={wait!r} must be >= 0 (seconds; 0: no wait)")
    return wait


def _gauge(name: str, documentation: str, labels: dict[str, str], value: float) -> Metric:
    gauge = GaugeMetricFamily(name, documentation, labels=list(labels))
    gauge.add_metric(list(labels.values()), value)
    return gauge


class NodeGauges(Collector):
    """The node's levels and the cluster's, read at each scrape."""

    def __init__(self, extension: PrometheusMetrics) -> None:
        self.extension = extension

    def collect(self) -> Iterator[Metric]:
        ext, labels = self.extension, self.extension.labels
        names, values = list(labels), list(labels.values())
        yield _gauge("crawler_up", "1 while the node crawls, 0 once closing", labels, ext.up)
        yield from ext.metrics.collect(names, values)
        yield _gauge("crawler_leases_held", "Leases this node holds", labels, ext.leases_held())
        kafka = ext.kafka_state()
        if kafka != "off":
            yield _gauge("crawler_kafka_up", "1 while Kafka answers", labels, float(kafka == "ok"))
            yield _gauge(
                "crawler_kafka_spool_bytes",
                "Bytes in this node's spool folder, waiting to be replayed into Kafka",
                labels,
                ext.spool_bytes(),
            )
        if ext.cluster is None:
            return
        state = ext.cluster.read()
        yield _gauge(
            "crawler_redis_up", "1 when Redis answered this scrape", labels, float(bool(state))
        )
        if state is None:
            return
        for name, documentation, value in (
            (
                "crawler_queue_depth",
                "Requests waiting: in the shared queue, or spilled to the Kafka backlog",
                state.queue,
            ),
            (
                "crawler_backlog_depth",
                "Of those, requests waiting in the Kafka backlog (FRONTIER_QUEUE_MAX)",
                state.backlog,
            ),
            ("crawler_frontier_leases", "Requests leased by any node", state.leases),
            (
                "crawler_frontier_leases_expired",
                "Leases past their deadline, not yet returned to the queue",
                state.expired_leases,
            ),
            ("crawler_live_nodes", "Nodes whose heartbeat has not run out", state.live_nodes),
        ):
            yield _gauge(name, documentation, labels, value)
        sessions = GaugeMetricFamily(
            "crawler_sessions",
            "Accounts of the spider's session platform by health (none without a platform)",
            labels=[*names, "health"],
        )
        for health, count in state.sessions.items():
            sessions.add_metric([*values, health], count)
        yield sessions


class PrometheusMetrics:
    def __init__(self, crawler: Crawler) -> None:
        self.settings = MetricsSettings.from_settings(crawler.settings)
        assert crawler.stats is not None
        stats = crawler.stats
        self.crawler = crawler
        self.up = 1.0
        self.metrics = NodeMetrics()
        self.labels = {
            "spider": str(crawler.spidercls.name),
            "node": self.settings.node_id,
            "crawl": self.settings.crawl_id,
        }
        self.cluster: ClusterReader | None = None
        if self.settings.redis_url:
            client = sync_client(
                self.settings.redis_url,
                socket_timeout=REDIS_TIMEOUT,
                socket_connect_timeout=REDIS_TIMEOUT,
                retries=0,  # a scrape or probe asks once: within its timeout
            )
            platform = getattr(crawler.spidercls, "session_platform", None)
            sessions = None
            if platform:  # the sessions' settings are checked only for a spider that has them
                prefix = SessionSettings.from_mapping(crawler.settings).key_prefix
                sessions = SessionKeys(str(platform), prefix)
            partitions = get_int(crawler.settings, "FRONTIER_PARTITIONS") or 1
            self.cluster = ClusterReader(client, self.labels["spider"], sessions, partitions)
        registry = CollectorRegistry(auto_describe=False)
        # Scrapes run in the server's thread: copy the dict (atomic under the GIL).
        registry.register(StatsMetrics(lambda: dict(stats.get_stats()), self.labels))
        registry.register(NodeGauges(self))
        ProcessCollector(registry=registry)
        self._scraped = threading.Event()  # set by every scrape
        self._last_scrape: float | None = None
        self._scrape_interval: float | None = None  # between the last two scrapes
        self._server = serve(
            self.settings.host, self.settings.ports, registry, self.health, self._on_scrape
        )
        self.port: int = self._server.server_port
        logger.info("Metrics on http://%s:%d/metrics", self.settings.host, self.port)
        crawler.signals.connect(self.response_downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PrometheusMetrics:
        return cls(crawler)

    @staticmethod
    def node_metrics(crawler: Crawler) -> NodeMetrics:
        """Where components report latencies and cooldowns (a detached one when off)."""
        extension = crawler.get_extension(PrometheusMetrics)
        return extension.metrics if extension is not None else NodeMetrics()

    @property
    def address(self) -> str:
        return f"{self.settings.host}:{self.port}"

    def kafka_state(self) -> str:
        """``off`` without Kafka, ``down`` during an outage, else ``ok``."""
        if not self.settings.kafka:
            return "off"
        sender = self.metrics.kafka_sender
        return "down" if sender is not None and sender.health.down_since is not None else "ok"

    def spool_bytes(self) -> float:
        sender = self.metrics.kafka_sender
        return float(sender.spool.size()) if sender is not None else 0.0

    def leases_held(self) -> float:
        context = self._context()
        held = context.leases_held if context is not None else None
        return float(held()) if held is not None else 0.0

    def _context(self) -> NodeContext | None:
        try:
            return self.crawler.get_extension(NodeContext)  # None: standalone
        except RuntimeError:  # asked while the other extensions are still being built
            return None

    def health(self, ping: bool) -> dict[str, str]:
        """``ping``: whether Redis answers now (readiness, waits up to ``REDIS_TIMEOUT``); else
        whether a component of the node is in a Redis outage (liveness, no I/O)."""
        if self.cluster is None:
            redis = "off"
        elif ping:
            redis = "ok" if self.cluster.ping() else "down"
        else:
            context = self._context()
            redis = "down" if context is not None and context.redis_down else "ok"
        return {"redis": redis, "kafka": self.kafka_state()}

    def response_downloaded(self, response: Response, request: Request, spider: Spider) -> None:
        """Every response the downloader gave, also those retried or redirected (which never
        reach ``response_received``)."""
        latency = request.meta.get("download_latency")
        if isinstance(latency, float):
            self.metrics.download.observe(latency)

    def _on_scrape(self) -> None:
        """A scrape of /metrics (the server's thread)."""
        now = time.monotonic()
        if self._last_scrape is not None:
            self._scrape_interval = now - self._last_scrape
        self._last_scrape = now
        self._scraped.set()

    def spider_closed(self, spider: Spider, reason: str) -> None:
        self.up = 0.0
        interval = self._scrape_interval
        # A crawl that finished: its final state is worth one more scrape, if a scraper comes
        # at a known pace (a stop is not delayed: work is left, the last scrape says so).
        wait = 0.0
        if reason == "finished" and interval is not None:
            wait = min(self.settings.final_scrape_wait, 1.5 * interval)
        self._scraped.clear()
        # shutdown() waits up to half a second for serve_forever() to notice: not on the
        # reactor thread. Not a daemon either, so the process waits for it before exiting.
        threading.Thread(target=self._stop, args=(wait,), name="metrics-stop").start()

    def _stop(self, wait: float) -> None:
        if wait > 0:
            logger.info("Metrics: waiting up to %.1fs for a scrape of the final state", wait)
            self._scraped.wait(wait)
        self._server.shutdown()
        self._server.server_close()
        if self.cluster is not None:
            self.cluster.close()
        logger.info("Metrics server on port %d stopped", self.port)
