"""A non-blocking Kafka producer for items (confluent-kafka, no Scrapy imports).

``send`` only enqueues into librdkafka's local queue and returns ``False``
when that queue is full (the caller waits and retries: nothing is dropped).
Delivery reports run in ``poll()``, on the caller's thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from crawler.kafka.messages import OutgoingMessage

logger = logging.getLogger(__name__)

DeliveryReport = Callable[[KafkaError | None, Message], None]

# Safe defaults; any librdkafka option given by the user overrides them.
DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "compression.type": "lz4",
    "linger.ms": 50,
    "queue.buffering.max.kbytes": 262144,
    "message.timeout.ms": 300000,
}


def producer_config(bootstrap_servers: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    config = dict(DEFAULT_PRODUCER_CONFIG)
    config["bootstrap.servers"] = bootstrap_servers
    config.update(overrides)
    return config


class ItemProducer:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = dict(config)
        self._producer = Producer(self._config)

    def send(self, message: OutgoingMessage, on_delivery: DeliveryReport) -> bool:
        """Enqueue one message; ``False`` means the local queue is full (retry later)."""
        try:
            self._producer.produce(
                message.topic,
                value=message.value,
                key=message.key,
                headers=message.headers,
                timestamp=message.timestamp_ms,
                on_delivery=on_delivery,
            )
        except BufferError:
            return False
        return True

    def poll(self) -> int:
        """Serve delivery reports that are ready, without waiting."""
        return int(self._producer.poll(0))

    def purge(self) -> None:
        """Fail every queued and in-flight message now (each reports ``_PURGE_QUEUE``)."""
        self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        self._producer.poll(0)

    def pending(self) -> int:
        """Messages not yet acknowledged or failed."""
        return len(self._producer)

    async def drain(self, timeout: float, interval: float = 0.05) -> int:
        """Poll until every message is reported or ``timeout`` passes; return those left."""
        deadline = time.monotonic() + timeout
        self._producer.poll(0)
        while len(self._producer) and time.monotonic() < deadline:
            await asyncio.sleep(interval)
            self._producer.poll(0)
        return len(self._producer)

    async def ensure_topics(
        self,
        names: Iterable[str],
        partitions: int,
        replication: int,
        topic_config: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> list[str]:
        """Create the topics that don't exist yet; return the names created."""
        admin = AdminClient(
            {
                key: value
                for key, value in self._config.items()
                if key == "bootstrap.servers" or key.startswith(("security.", "sasl.", "ssl."))
            }
        )
        existing = set((await asyncio.to_thread(admin.list_topics, timeout=timeout)).topics)
        wanted = [name for name in dict.fromkeys(names) if name not in existing]
        if not wanted:
            return []
        futures = admin.create_topics(
            [
                NewTopic(name, num_partitions=partitions, replication_factor=replication)
                for name in wanted
            ],
            request_timeout=timeout,
        )
        created = []
        for name, future in futures.items():
            try:
                await asyncio.wrap_future(future)
                created.append(name)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
        return created
