"""What components tell the metrics directly: latency histograms and cooldowns (no Scrapy).

Components observe seconds through ``Histogram.observe``, report a site's cooldown with
``NodeMetrics.cooling`` and the Kafka pipeline its sender (on the reactor thread); the metrics
server reads a consistent copy (in its own thread), so a lock guards the few numbers.
Histogram buckets are cumulative at export, as Prometheus expects.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

from crawler.kafka.sender import ItemSender

# Seconds. Downloads: a fast local site to a slow origin; waits: none to a long cooldown.
DOWNLOAD_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
WAIT_BUCKETS = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
DELIVERY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 300.0)
PAUSE_REASONS = ("max_outage", "spool_error")  # why the Kafka pipeline pauses a crawl
FORGET_AFTER = 600.0  # seconds a site's cooldown series stays at 0 before it is dropped


class Histogram:
    def __init__(self, name: str, documentation: str, buckets: Sequence[float]) -> None:
        if list(buckets) != sorted(set(buckets)):
            raise ValueError(f"{name}: buckets {list(buckets)!r} must rise strictly")
        self.name = name
        self.documentation = documentation
        self.bounds = tuple(float(bound) for bound in buckets)
        self._counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        index = bisect.bisect_left(self.bounds, seconds)
        with self._lock:
            self._counts[index] += 1
            self._sum += seconds

    def family(
        self, label_names: Sequence[str], label_values: Sequence[str]
    ) -> HistogramMetricFamily:
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), counts, strict=True):
            running += count
            cumulative.append(("+Inf" if bound == float("inf") else repr(bound), running))
        family = HistogramMetricFamily(self.name, self.documentation, labels=list(label_names))
        family.add_metric(list(label_values), cumulative, total)
        return family


class NodeMetrics:
    """The latency histograms of a node, the cooldowns it started, its Kafka sender and
    whether the Kafka pipeline paused the crawl."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.kafka_sender: ItemSender | None = None  # set by the Kafka pipeline once open
        self.paused: str | None = None  # the PAUSE_REASONS one the Kafka pipeline paused for
        self._cooldowns: dict[str, float] = {}  # site -> end of its cooldown (clock)
        self._lock = threading.Lock()
        self.download = Histogram(
            "crawler_download_latency_seconds",
            "Time from sending a request to its response headers (Scrapy's download_latency)",
            DOWNLOAD_BUCKETS,
        )
        self.politeness_wait = Histogram(
            "crawler_politeness_wait_seconds",
            "Time each request waited for its site's rate-limit slot (0 when none)",
            WAIT_BUCKETS,
        )
        self.kafka_delivery = Histogram(
            "crawler_kafka_delivery_latency_seconds",
            "Time from enqueueing a message to the broker's acknowledgement",
            DELIVERY_BUCKETS,
        )

    def cooling(self, site: str, seconds: float) -> None:
        """``site`` cools down for ``seconds`` from now (a penalty this node started)."""
        with self._lock:
            self._cooldowns[site] = self._clock() + seconds

    def collect(self, label_names: Sequence[str], label_values: Sequence[str]) -> Iterator[Metric]:
        for histogram in (self.download, self.politeness_wait, self.kafka_delivery):
            yield histogram.family(label_names, label_values)
        cooldown = GaugeMetricFamily(
            "crawler_politeness_cooldown_seconds",
            "Seconds left of the cooldown this node last started for a site (0 once over)",
            labels=[*label_names, "site"],
        )
        now = self._clock()
        with self._lock:
            for site in [s for s, end in self._cooldowns.items() if end < now - FORGET_AFTER]:
                del self._cooldowns[site]
            ends = sorted(self._cooldowns.items())
        for site, end in ends:
            cooldown.add_metric([*label_values, site], max(0.0, end - now))
        yield cooldown
        paused = GaugeMetricFamily(
            "crawler_paused",
            "1 while the Kafka pipeline keeps the crawl paused for this reason",
            labels=[*label_names, "reason"],
        )
        for reason in PAUSE_REASONS:
            paused.add_metric([*label_values, reason], float(self.paused == reason))
        yield paused
