"""``StartupLog``: one INFO line per node at start saying what it is connected to.

Node id, profile, crawl id, Redis (passwords shown as ``***``), Kafka bootstrap
servers, scheduler class and metrics address; never a secret. Logged when the
engine starts, after every component is open. ``STARTUP_LOG_ENABLED`` turns it off.
"""

from __future__ import annotations

import logging

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings

from crawler.extensions.metrics import PrometheusMetrics
from crawler.node import resolve_node_id
from crawler.pipelines.kafka import KafkaPipeline
from crawler.redis_url import redact_url
from crawler.settings_values import get_bool

logger = logging.getLogger(__name__)


def class_name(value: object) -> str:
    """Short name of a class given as an object or an import path."""
    if isinstance(value, str):
        return value.rsplit(".", 1)[-1]
    return getattr(value, "__name__", repr(value))


KAFKA_PIPELINE_OFF = "off (KafkaPipeline is not in ITEM_PIPELINES)"


def describe_node(
    settings: BaseSettings, metrics_address: str | None, *, kafka_pipeline: bool = True
) -> str:
    """The startup line; ``kafka_pipeline``: whether ``KafkaPipeline`` runs."""
    redis_url = settings.get("REDIS_URL") or ""
    kafka = settings.get("KAFKA_BOOTSTRAP_SERVERS") or "off"
    return (
        f"Node {resolve_node_id(settings.get('CRAWLER_NODE_ID') or '')} "
        f"(profile {settings.get('CRAWLER_PROFILE')}, crawl {settings.get('CRAWLER_CRAWL_ID')}): "
        f"Redis {redact_url(redis_url) if redis_url else 'off'}, "
        f"Kafka {kafka if kafka_pipeline or kafka == 'off' else KAFKA_PIPELINE_OFF}, "
        f"scheduler {class_name(settings.get('SCHEDULER'))}, "
        f"metrics {metrics_address or 'off'}"
    )


class StartupLog:
    def __init__(self, crawler: Crawler) -> None:
        if not get_bool(crawler.settings, "STARTUP_LOG_ENABLED"):
            raise NotConfigured("STARTUP_LOG_ENABLED is off")
        self.crawler = crawler
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StartupLog:
        return cls(crawler)

    def engine_started(self) -> None:
        metrics = self.crawler.get_extension(PrometheusMetrics)
        address = f"http://{metrics.address}/metrics" if metrics is not None else None
        sending = self.crawler.get_item_pipeline(KafkaPipeline) is not None
        settings = self.crawler.settings
        logger.info("%s", describe_node(settings, address, kafka_pipeline=sending))
        if settings.get("KAFKA_BOOTSTRAP_SERVERS") and not sending:
            logger.warning(
                "KAFKA_BOOTSTRAP_SERVERS is set, but KafkaPipeline is turned off in "
                "ITEM_PIPELINES: no item goes to Kafka, only to your own pipelines and feeds"
            )
