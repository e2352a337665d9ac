"""How long a node's graceful stop may take, from the settings a deployment gives it."""

from __future__ import annotations

from collections.abc import Mapping

from scrapy.settings import Settings

from settings.resolve import resolve_settings


def stop_budget(environment: Mapping[str, str]) -> float:
    """Seconds a stopping node may need: its downloads (``DOWNLOAD_TIMEOUT``), the Kafka flush
    (``KAFKA_FLUSH_TIMEOUT``) and returning its leases (``FRONTIER_CLOSE_TIMEOUT``)."""
    settings = Settings(resolve_settings(environment))
    return (
        settings.getfloat("DOWNLOAD_TIMEOUT")
        + settings.getfloat("KAFKA_FLUSH_TIMEOUT")
        + settings.getfloat("FRONTIER_CLOSE_TIMEOUT")
    )
