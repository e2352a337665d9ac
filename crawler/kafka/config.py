"""The Kafka pipeline's settings, validated (no Scrapy imports; read in
``crawler.pipelines.kafka``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from crawler.settings_values import ListSettings, dict_value, get_bool, get_dict, get_int

SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")
NO_SECURITY: Mapping[str, Any] = MappingProxyType({})  # a plaintext cluster's


def security_config(client_config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``client_config`` (``KAFKA_PRODUCER_CONFIG``) that say how to reach the
    cluster: ``security.*``, ``sasl.*`` and ``ssl.*``. Every client of the project takes them,
    producers, consumers and admin clients alike, so a secured cluster is reached by all."""
    return {key: value for key, value in client_config.items() if key.startswith(SECURITY_PREFIXES)}


def security_setting(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``security_config`` of the ``KAFKA_PRODUCER_CONFIG`` in ``settings`` (Scrapy's, or the
    ``crawler`` CLI's, where it may be JSON text)."""
    given = settings.get("KAFKA_PRODUCER_CONFIG")
    return security_config(dict_value("KAFKA_PRODUCER_CONFIG", given))


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """How the node creates its topics (``TopicChecker``)."""

    dlq_template: str
    partitions: int
    replication: int
    config: Mapping[str, str]

    @classmethod
    def from_settings(cls, settings: ListSettings) -> TopicSpec | None:
        """``KAFKA_TOPIC_*`` (validated); None with ``KAFKA_CREATE_TOPICS`` off."""
        if not get_bool(settings, "KAFKA_CREATE_TOPICS"):
            return None
        spec = cls(
            dlq_template=str(settings.get("KAFKA_DLQ_TOPIC_TEMPLATE")),
            partitions=get_int(settings, "KAFKA_TOPIC_PARTITIONS"),
            replication=get_int(settings, "KAFKA_TOPIC_REPLICATION"),
            config={str(k): str(v) for k, v in get_dict(settings, "KAFKA_TOPIC_CONFIG").items()},
        )
        for name, value in (
            ("KAFKA_TOPIC_PARTITIONS", spec.partitions),
            ("KAFKA_TOPIC_REPLICATION", spec.replication),
        ):
            if value < 1:
                raise ValueError(f"{name}={value} must be >= 1")
        return spec


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    bootstrap_servers: str
    topic_template: str
    dlq_topic_template: str
    producer_config: dict[str, Any]
    poll_interval: float
    flush_timeout: float
    backpressure_wait: float
    topics: TopicSpec | None  # None: KAFKA_CREATE_TOPICS off
    spool_dir: Path
    replay_interval: float
    max_outage: float
    schema_dirs: tuple[str, ...]
    node_id: str
    crawl_id: str

    def validate(self) -> None:
        for name, template, fields in (
            ("KAFKA_TOPIC_TEMPLATE", self.topic_template, {"spider": "s", "item_type": "t"}),
            ("KAFKA_DLQ_TOPIC_TEMPLATE", self.dlq_topic_template, {"topic": "t"}),
        ):
            try:
                template.format(**fields)
            except (KeyError, IndexError, ValueError, AttributeError) as exc:
                raise ValueError(
                    f"{name}={template!r} is invalid: only {{{'}, {'.join(fields)}}} "
                    f"may be used ({exc!r})"
                ) from exc
        for name, value, minimum in (
            ("KAFKA_POLL_INTERVAL", self.poll_interval, 0.001),
            ("KAFKA_BACKPRESSURE_WAIT", self.backpressure_wait, 0.001),
            ("KAFKA_FLUSH_TIMEOUT", self.flush_timeout, 0.0),
            ("KAFKA_SPOOL_REPLAY_INTERVAL", self.replay_interval, 0.1),
            ("KAFKA_MAX_OUTAGE", self.max_outage, 0.0),
        ):
            if value < minimum:
                raise ValueError(f"{name}={value} must be >= {minimum}")
        missing = [d for d in self.schema_dirs if d != "builtin" and not Path(d).is_dir()]
        if missing:
            raise ValueError(
                f"ITEM_SCHEMA_DIRS={list(self.schema_dirs)!r}: {', '.join(missing)} is not a "
                'folder (give a list of folders, or "builtin")'
            )
