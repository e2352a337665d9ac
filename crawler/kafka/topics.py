"""Topics checked (and created) before their first message, retried until Kafka answers
(no Scrapy imports).

Every message of a topic waits for one shared check: the topic and its dead-letter topic
exist (created with the configured partitions, replication and config if missing) and every
partition has a leader. A broker that does not answer is an outage, not a permanent failure:
the check is retried with backoff (``kafka/topic_check_failed``), the outage is recorded, and
the messages wait, so a broker late at start dead-letters nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException

from crawler.kafka.health import BrokerHealth, Count
from crawler.kafka.producer import ItemProducer

logger = logging.getLogger(__name__)

CHECK_TIMEOUT = 10.0  # seconds for one check
RETRY_FIRST, RETRY_MAX = 1.0, 10.0  # seconds between checks, doubling


@dataclass(frozen=True, slots=True)
class TopicSpec:
    dlq_template: str
    partitions: int
    replication: int
    config: Mapping[str, str]


class TopicChecker:
    def __init__(
        self,
        producer: Callable[[], ItemProducer],
        spec: TopicSpec,
        health: BrokerHealth,
        count: Count,
    ) -> None:
        self._producer = producer
        self._spec = spec
        self._health = health
        self._count = count
        self._checks: dict[str, asyncio.Future[None]] = {}
        self._released = asyncio.Event()

    async def ready(self, topic: str) -> None:
        """Return once ``topic`` is usable, or ``release()`` was called; waits (without
        blocking) while Kafka is away."""
        if topic not in self._checks:
            self._checks[topic] = asyncio.ensure_future(self._check(topic))
        check = self._checks[topic]
        if not check.done() and not self._released.is_set():
            released: asyncio.Future[Any] = asyncio.ensure_future(self._released.wait())
            try:
                await asyncio.wait({check, released}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                released.cancel()
        if check.done() and not check.cancelled():
            check.result()  # raises what the check raised (not a Kafka outage)

    def release(self) -> None:
        """Closing: let every waiting message go (what Kafka does not take is spooled)."""
        self._released.set()
        for check in self._checks.values():
            check.cancel()

    async def _check(self, topic: str) -> None:
        names = [topic, self._spec.dlq_template.format(topic=topic)]
        wait = RETRY_FIRST
        while True:
            try:
                created = await self._producer().ensure_topics(
                    names,
                    self._spec.partitions,
                    self._spec.replication,
                    self._spec.config,
                    timeout=CHECK_TIMEOUT,
                )
            except KafkaException as exc:
                self._count("kafka/topic_check_failed", 1)
                self._health.failed(f"checking topic {topic}: {exc.args[0].str()}")
                logger.debug("Kafka topic %s not checked (%s): again in %.0fs", topic, exc, wait)
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MAX)
                continue
            self._health.answered()
            if created:
                logger.info("Created Kafka topics %s", ", ".join(created))
            return
