"""Counters read from a node's Scrapy stats at scrape time (no Scrapy imports).

Each ``Family`` sums the stats whose name matches its pattern, per value of its label
(the pattern's first group). Nothing is copied while crawling: the collector reads a
snapshot of the stats at every scrape. docs/metrics.md lists each family with its stats.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector


@dataclass(frozen=True, slots=True)
class Family:
    name: str  # without the ``_total`` suffix prometheus_client adds to counters
    documentation: str
    pattern: re.Pattern[str]
    label: str | None = None


def _family(name: str, documentation: str, pattern: str, label: str | None = None) -> Family:
    return Family(name, documentation, re.compile(pattern), label)


FAMILIES = (
    _family(
        "crawler_pages",
        "Responses that reached the spider (Scrapy's pages: not those retried or redirected)",
        r"response_received_count",
    ),
    _family(
        "crawler_items_scraped", "Items that went through the pipelines", r"item_scraped_count"
    ),
    _family("crawler_requests", "Requests sent to the downloader", r"downloader/request_count"),
    _family(
        "crawler_responses",
        "Responses by HTTP status",
        r"downloader/response_status_count/(.+)",
        "status",
    ),
    _family(
        "crawler_response_bytes", "Bytes of the responses downloaded", r"downloader/response_bytes"
    ),
    _family(
        "crawler_download_errors",
        "Downloads that failed, by exception",
        r"downloader/exception_type_count/(.+)",
        "reason",
    ),
    _family("crawler_retries", "Requests retried, by reason", r"retry/reason_count/(.+)", "reason"),
    _family(
        "crawler_kafka_produced",
        "Items enqueued for Kafka, each once (not replays or dead letters)",
        r"kafka/produced",
    ),
    _family("crawler_kafka_delivered", "Messages acknowledged by the broker", r"kafka/delivered"),
    _family(
        "crawler_kafka_failed",
        "Kafka delivery failures by librdkafka error name",
        r"kafka/failed/(.+)",
        "reason",
    ),
    _family("crawler_kafka_spooled", "Messages written to the local spool", r"kafka/spooled"),
    _family(
        "crawler_kafka_unproven_acks",
        "Messages the broker reported delivered without an offset: spooled and sent again",
        r"kafka/unproven_ack",
    ),
    _family(
        "crawler_dead_letters",
        "Messages dead-lettered, to the dead-letter topic or the local file",
        r"kafka/dead_lettered(?:_file)?",
    ),
    _family(
        "crawler_item_errors",
        "Items lost because a pipeline raised on them (not DropItem), by exception",
        r"pipeline/item_error/(.+)",
        "exception",
    ),
    _family(
        "crawler_leases_reclaimed",
        "Expired leases of dead or stalled nodes this node returned to the queue",
        r"frontier/reclaimed",
    ),
    _family(
        "crawler_frontier_data_lost",
        "Times this node found that Redis had lost the frontier's data (frontier/epoch_lost)",
        r"frontier/epoch_lost",
    ),
    _family(
        "crawler_frontier_failed",
        "Requests recorded as failed in the frontier, by reason",
        r"frontier/failed/(.+)",
        "reason",
    ),
    _family(
        "crawler_politeness_delayed",
        "Rate-limit slot reservations that had to wait for their site",
        r"politeness/delayed",
    ),
    _family(
        "crawler_politeness_cooldowns",
        "Cooldowns this node started for a site, by the status that caused them",
        r"politeness/penalty/(.+)",
        "reason",
    ),
    _family(
        "crawler_redis_errors",
        "Redis operations that met an outage and were retried, by component",
        r"([^/]+)/redis_error",
        "component",
    ),
    _family(
        "crawler_redis_clock_steps",
        "Steps of Redis's clock against this node's, by direction (ahead, back)",
        r"redis/clock_step/(.+)",
        "direction",
    ),
    _family(
        "crawler_redis_master_switches",
        "Moves of this node's Redis connections to a new master in a Sentinel failover",
        r"redis/master_switched",
    ),
    _family(
        "crawler_seeds_invalid",
        "Seeds rejected and moved to the invalid list, by reason",
        r"seeds/invalid/(.+)",
        "reason",
    ),
    _family("crawler_log_messages", "Log records by level", r"log_count/(.+)", "level"),
)


def numeric_stats(stats: Mapping[str, Any]) -> dict[str, float]:
    """The stats that are numbers (not booleans, datetimes or strings)."""
    return {
        name: float(value)
        for name, value in stats.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


def family_metric(
    family: Family, stats: Mapping[str, float], names: Sequence[str], values: Sequence[str]
) -> Metric:
    """``family`` from ``stats``; an unlabelled family exists (at 0) from the start."""
    extra = [family.label] if family.label else []
    metric = CounterMetricFamily(family.name, family.documentation, labels=[*names, *extra])
    totals: dict[tuple[str, ...], float] = {} if family.label else {(): 0.0}
    for name, value in stats.items():
        if match := family.pattern.fullmatch(name):
            key: tuple[str, ...] = (match.group(1),) if family.label else ()
            totals[key] = totals.get(key, 0.0) + value
    for key, total in sorted(totals.items()):
        metric.add_metric([*values, *key], total)
    return metric


class StatsMetrics(Collector):
    """Every ``FAMILIES`` counter, from a snapshot of the stats at each scrape."""

    def __init__(
        self, read_stats: Callable[[], Mapping[str, Any]], labels: Mapping[str, str]
    ) -> None:
        self.read_stats = read_stats
        self.label_names = list(labels)
        self.label_values = list(labels.values())

    def collect(self) -> Iterator[Metric]:
        stats = numeric_stats(self.read_stats())
        for family in FAMILIES:
            yield family_metric(family, stats, self.label_names, self.label_values)
