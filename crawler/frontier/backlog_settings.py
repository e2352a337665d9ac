"""The backlog's settings (``FRONTIER_QUEUE_MAX`` and its companions), read once and checked
(no Scrapy imports; ``crawler.frontier.settings`` reads them from Scrapy's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crawler.kafka.producer import DEFAULT_PRODUCER_CONFIG, message_timeout
from crawler.kafka.topics import topic_from_template

MAX_SPILL_BATCH = 100_000  # librdkafka's queue.buffering.max.messages (its default)


@dataclass(frozen=True, slots=True)
class BacklogSettings:
    queue_max: int  # FRONTIER_QUEUE_MAX: queued requests a part keeps in Redis (0 = no bound)
    batch: int  # FRONTIER_SPILL_BATCH: requests spilled or read back per part and step
    interval: float  # FRONTIER_SPILL_INTERVAL: seconds between steps
    topic: str  # FRONTIER_BACKLOG_TOPIC, formatted with the spider's name
    bootstrap: str  # KAFKA_BOOTSTRAP_SERVERS
    replication: int  # KAFKA_TOPIC_REPLICATION
    # seconds the backlog producer gives a message before librdkafka fails it (its
    # message.timeout.ms): a spill waits for the outcome of every message it sent
    ack_timeout: float = message_timeout(DEFAULT_PRODUCER_CONFIG)
    compress: bool = True  # FRONTIER_COMPRESS: how requests read back are stored in Redis
    security: Mapping[str, Any] = field(default_factory=dict)  # of KAFKA_PRODUCER_CONFIG

    def validate(self) -> None:
        if self.queue_max < 0:
            raise ValueError(f"FRONTIER_QUEUE_MAX={self.queue_max} must be >= 0 (0: no bound)")
        if not self.queue_max:
            return
        if not self.bootstrap:
            raise ValueError(
                f"FRONTIER_QUEUE_MAX={self.queue_max} spills to Kafka, but "
                "KAFKA_BOOTSTRAP_SERVERS is empty: set it, or FRONTIER_QUEUE_MAX=0"
            )
        if not 1 <= self.batch <= MAX_SPILL_BATCH:
            raise ValueError(
                f"FRONTIER_SPILL_BATCH={self.batch} must be >= 1"
                if self.batch < 1
                else f"FRONTIER_SPILL_BATCH={self.batch} must be <= {MAX_SPILL_BATCH} (the Kafka "
                "producer's local queue holds that many messages, and a spill waits for all)"
            )
        if self.interval <= 0:
            raise ValueError(f"FRONTIER_SPILL_INTERVAL={self.interval} must be > 0")
        if "{spider}" not in self.topic:
            raise ValueError(
                f"FRONTIER_BACKLOG_TOPIC={self.topic!r} must hold {{spider}}: each spider needs "
                "its own backlog topic (and consumer group); a shared one hands one spider's "
                "spilled requests to another spider's nodes"
            )
        topic_from_template("FRONTIER_BACKLOG_TOPIC", self.topic, "spider")
