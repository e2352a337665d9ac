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
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewPartitions,
    NewTopic,
)

from crawler.kafka.config import security_config
from crawler.kafka.health import LIBRDKAFKA_LOG
from crawler.kafka.messages import OutgoingMessage

logger = logging.getLogger(__name__)

DeliveryReport = Callable[[KafkaError | None, Message], None]

LEADER_POLL = 0.2  # seconds between metadata checks while a new topic gets its leaders
PURGE_ROUNDS = 3  # purges at most, while the reports served send messages again

BROKER_LIST_KEYS = frozenset({"bootstrap.servers", "metadata.broker.list"})  # one, two names
# Safe defaults; any librdkafka option given by the user overrides them.
DEFAULT_PRODUCER_CONFIG: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "compression.type": "lz4",
    "linger.ms": 50,
    "queue.buffering.max.kbytes": 262144,
    # a message Kafka has not acknowledged in 30 s goes to the spool (replayed once it
    # answers), so a node whose broker is away crawls on into the spool until KAFKA_MAX_OUTAGE
    "message.timeout.ms": 30000,
}

# With KAFKA_CREATE_TOPICS the node creates its topics as configured (``TopicChecker``): a
# message that meets a missing topic is not to make the broker create it with its defaults.
NO_AUTO_CREATION: dict[str, Any] = {"allow.auto.create.topics": False}


def message_timeout(config: Mapping[str, Any]) -> float:
    """Seconds librdkafka holds a message before it gives up on it (and the sender spools it):
    ``message.timeout.ms`` or its alias ``delivery.timeout.ms``, the later one given (as
    librdkafka applies them in order), else the default."""
    milliseconds = DEFAULT_PRODUCER_CONFIG["message.timeout.ms"]
    for key, value in config.items():
        if key in ("message.timeout.ms", "delivery.timeout.ms"):
            milliseconds = value
    return float(milliseconds) / 1000


def producer_config(bootstrap_servers: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The defaults, the servers and librdkafka's log through Python logging, then ``overrides``."""
    config = dict(DEFAULT_PRODUCER_CONFIG)
    config["bootstrap.servers"] = bootstrap_servers
    config["logger"] = LIBRDKAFKA_LOG
    config.update(overrides)
    return config


def checked_producer_config(
    bootstrap_servers: str, overrides: Mapping[str, Any], setting: str = "KAFKA_PRODUCER_CONFIG"
) -> dict[str, Any]:
    """``producer_config``, after librdkafka has accepted it (a producer is built and dropped:
    it checks every property, and that ``acks`` agrees with idempotence), and with ``acks``
    above 0; ValueError naming ``setting`` when it does not."""
    if given := sorted(BROKER_LIST_KEYS & set(overrides)):
        raise ValueError(
            f"{setting} sets {', '.join(given)}: give the brokers in KAFKA_BOOTSTRAP_SERVERS "
            "(the node's log, its other clients and the crawler CLI use it)"
        )
    for name in ("acks", "request.required.acks"):  # librdkafka's two names for it
        if str(overrides.get(name, "")).strip() == "0":
            raise ValueError(
                f"{setting} sets {name}=0: the broker would acknowledge nothing, so nothing "
                "could prove an item reached Kafka (a delivery report without an offset is "
                "sent again); use acks=all (the default) or 1"
            )
    config = producer_config(bootstrap_servers, overrides)
    try:
        Producer(config)
    except (KafkaException, ValueError, TypeError) as exc:
        error = exc.args[0] if exc.args else exc
        said = error.str() if isinstance(error, KafkaError) else str(error)
        raise ValueError(f"{setting}={dict(overrides)!r} is refused by librdkafka: {said}") from exc
    return config


class ItemProducer:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = dict(config)
        self._producer = Producer(self._config)
        self._alone: Producer | None = None  # one message a batch (made at its first use)

    def send(
        self, message: OutgoingMessage, on_delivery: DeliveryReport, *, alone: bool = False
    ) -> bool:
        """Enqueue one message; ``False`` means the local queue is full (retry later).
        ``alone``: in a batch of its own (the broker refused a batch it was in)."""
        producer = self._producer
        if alone:
            if self._alone is None:
                self._alone = Producer({**self._config, "batch.num.messages": 1})
            producer = self._alone
        try:
            producer.produce(
                message.topic,
                value=message.value,
                key=message.key,
                headers=message.headers,
                timestamp=message.timestamp_ms,
                partition=message.partition,
                on_delivery=on_delivery,
            )
        except BufferError:
            return False
        return True

    def _producers(self) -> list[Producer]:
        return [self._producer] if self._alone is None else [self._producer, self._alone]

    def poll(self) -> int:
        """Serve delivery reports that are ready, without waiting."""
        return sum(int(producer.poll(0)) for producer in self._producers())

    def purge(self) -> None:
        """Fail every queued and in-flight message now (each reports ``_PURGE_QUEUE``), also
        those a report served here sends again (a batch's refusal: sent again alone)."""
        for _ in range(PURGE_ROUNDS):
            for producer in self._producers():
                producer.purge(in_queue=True, in_flight=True, blocking=False)
            self.poll()
            if not self.pending():
                return

    def pending(self) -> int:
        """Messages not yet acknowledged or failed."""
        return sum(len(producer) for producer in self._producers())

    async def drain(self, timeout: float, interval: float = 0.05) -> int:
        """Poll until every message is reported or ``timeout`` passes; return those left."""
        deadline = time.monotonic() + timeout
        self.poll()
        while self.pending() and time.monotonic() < deadline:
            await asyncio.sleep(interval)
            self.poll()
        return self.pending()

    def _metadata(self, timeout: float) -> Any:
        return self._producer.list_topics(timeout=timeout)

    async def probe(
        self, topics: Iterable[str], timeout: float, *, must_exist: bool = False
    ) -> str | None:
        """Ask the broker for metadata: None when it answers and every partition of
        ``topics`` has a leader (``must_exist``: and every one exists), else what is wrong."""
        wanted = list(topics)
        try:
            metadata = await asyncio.to_thread(self._metadata, timeout)
        except KafkaException as exc:
            return str(exc.args[0].str())
        missing = [name for name in wanted if name not in metadata.topics]
        if must_exist and missing:
            return f"no metadata for {', '.join(missing)} yet"
        return _leaderless(metadata, [name for name in wanted if name not in missing])

    async def ensure_topics(
        self,
        names: Iterable[str],
        partitions: int,
        replication: int,
        topic_config: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> list[str]:
        """Create the topics that don't exist yet and wait until every partition of every
        one has a leader (producing earlier can race the new leader); return those created.
        Raises ``KafkaException`` when the broker does not answer within ``timeout``."""
        deadline = time.monotonic() + timeout
        names = list(dict.fromkeys(names))
        existing = set((await asyncio.to_thread(self._metadata, timeout)).topics)
        wanted = [name for name in names if name not in existing]
        created = (
            await self._create(wanted, partitions, replication, topic_config, timeout)
            if wanted
            else []
        )
        while problem := await self.probe(
            names, max(0.1, deadline - time.monotonic()), must_exist=True
        ):
            if time.monotonic() >= deadline:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, problem))
            await asyncio.sleep(LEADER_POLL)
        return created

    async def _create(
        self,
        names: list[str],
        partitions: int,
        replication: int,
        topic_config: Mapping[str, str] | None,
        timeout: float,
    ) -> list[str]:
        """Create ``names``; those this call created (not those that exist by then)."""
        admin = self._admin()  # held until every future is done (its end cancels them)
        futures = admin.create_topics(
            [
                NewTopic(
                    name,
                    num_partitions=partitions,
                    replication_factor=replication,
                    config=dict(topic_config or {}),
                )
                for name in names
            ],
            request_timeout=timeout,
        )
        created = []
        for name, future in futures.items():
            try:
                await asyncio.wrap_future(future)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
                continue  # another node (or the broker's auto-creation) was first
            created.append(name)
        return created

    def _admin(self) -> AdminClient:
        return AdminClient(
            {
                **{k: v for k, v in self._config.items() if k in ("bootstrap.servers", "logger")},
                **security_config(self._config),
            }
        )

    async def grow_partitions(self, name: str, partitions: int, timeout: float = 30.0) -> int:
        """Give the existing topic ``name`` at least ``partitions`` partitions; the number it
        had. Another client growing it at the same time is no error."""
        had = len((await asyncio.to_thread(self._metadata, timeout)).topics[name].partitions)
        if had >= partitions:
            return had
        admin = self._admin()  # held until every future is done (its end cancels them)
        futures = admin.create_partitions(
            [NewPartitions(name, partitions)], request_timeout=timeout
        )
        for future in futures.values():
            try:
                await asyncio.wrap_future(future)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.INVALID_PARTITIONS:  # grown meanwhile
                    raise
        return had


def _leaderless(metadata: Any, topics: list[str]) -> str | None:
    for name in topics:
        topic = metadata.topics[name]
        if topic.error is not None:
            return f"{name}: {topic.error.str()}"
        for number, partition in topic.partitions.items():
            if partition.leader < 0 or partition.error is not None:
                return f"{name}[{number}] has no leader"
    return None
