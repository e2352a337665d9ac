"""Read a topic from the beginning (for the demo, tests and operators)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from crawler.kafka.config import NO_SECURITY
from crawler.kafka.health import LIBRDKAFKA_LOG

PARTITION_CHECK = 1.0  # seconds between looks for topics and partitions not read yet
UNKNOWN_END_SETTLE = 1.0  # quiet seconds that end a read_topic when the topic's ends are unknown


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: dict[str, bytes]
    timestamp_ms: int


RawHeaders = dict[str, str | bytes | None] | list[tuple[str, str | bytes | None]] | None


def _headers(raw: RawHeaders) -> dict[str, bytes]:
    pairs = raw.items() if isinstance(raw, dict) else raw or []
    return {
        name: value.encode() if isinstance(value, str) else value or b"" for name, value in pairs
    }


def received(message: Message) -> ReceivedMessage:
    """A consumed message (without an error) as a ``ReceivedMessage``."""
    return ReceivedMessage(
        topic=message.topic() or "",
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        key=message.key(),
        value=message.value() or b"",
        headers=_headers(message.headers()),
        timestamp_ms=message.timestamp()[1],
    )


def iter_topic(
    bootstrap_servers: str,
    topics: list[str],
    *,
    from_beginning: bool = True,
    poll_timeout: float = 0.2,
    security: Mapping[str, Any] = NO_SECURITY,
) -> Generator[ReceivedMessage | None]:
    """Yield messages of ``topics``; ``None`` after each quiet poll.

    Partitions are assigned directly (no consumer group to join, no rebalance that could
    pause or restart the read) as soon as the topic's metadata shows them; topics and
    partitions that appear later are picked up within ``PARTITION_CHECK`` seconds. A position
    the broker no longer has (the topic was deleted and made again, or retention deleted what
    was not read yet) goes to the partition's first offset, not its end, so what was written
    before the reader noticed is read (a topic made again that already holds more messages
    than the old position is read on from that position: its first ones are missed).
    """
    group = f"reader-{uuid.uuid4().hex}"
    options = {"enable.auto.commit": False, "auto.offset.reset": "earliest"}
    consumer = _reader(bootstrap_servers, group, security, options)
    start = OFFSET_BEGINNING if from_beginning else OFFSET_END
    assigned: set[tuple[str, int]] = set()
    next_check = 0.0
    try:
        while True:
            if time.monotonic() >= next_check:
                known = _known_partitions(consumer, topics, PARTITION_CHECK)
                new = [found for found in known if found not in assigned]
                if new:
                    consumer.incremental_assign([TopicPartition(t, p, start) for t, p in new])
                    assigned.update(new)
                next_check = time.monotonic() + PARTITION_CHECK
            message = consumer.poll(poll_timeout)
            if message is None:
                yield None
                continue
            error = message.error()
            if error is not None:
                if error.code() in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART):
                    continue
                raise RuntimeError(f"reading {topics}: {error.str()}")
            yield received(message)
    finally:
        consumer.close()


def unanswered(
    bootstrap_servers: str, *, timeout: float = 10.0, security: Mapping[str, Any] = NO_SECURITY
) -> str | None:
    """Why Kafka at ``bootstrap_servers`` did not answer a metadata request within
    ``timeout`` seconds (None: it answered)."""
    consumer = _reader(bootstrap_servers, "metadata-probe", security)
    try:
        consumer.list_topics(timeout=timeout)
    except KafkaException as exc:
        return str(exc.args[0].str())
    finally:
        consumer.close()
    return None


def _reader(
    bootstrap_servers: str,
    group: str,
    security: Mapping[str, Any] = NO_SECURITY,
    options: Mapping[str, Any] | None = None,
) -> Consumer:
    """A consumer whose ``group`` (librdkafka requires one) is never joined nor committed:
    it reads the partitions it is assigned."""
    config = {"bootstrap.servers": bootstrap_servers, "group.id": group, "logger": LIBRDKAFKA_LOG}
    return Consumer({**config, **(options or {}), **security})


def _known_partitions(
    consumer: Consumer, topics: list[str], timeout: float
) -> list[tuple[str, int]]:
    """Partitions of ``topics`` the broker knows (none if unreachable)."""
    try:
        metadata = consumer.list_topics(timeout=timeout)
    except KafkaException:
        return []
    return [
        (topic, partition)
        for topic in topics
        if topic in metadata.topics and metadata.topics[topic].error is None
        for partition in metadata.topics[topic].partitions
    ]


def end_offsets(
    bootstrap_servers: str, topic: str, timeout: float = 10.0
) -> dict[int, tuple[int, int]]:
    """Each partition of ``topic`` with its (low, high) watermarks; empty if unknown."""
    consumer = _reader(bootstrap_servers, "end-offsets")
    try:
        return {
            partition: consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout
            )
            for _, partition in _known_partitions(consumer, [topic], timeout)
        }
    except KafkaException:
        return {}
    finally:
        consumer.close()


def read_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    expected: int | None = None,
    timeout: float = 60.0,
    settle: float = 0.25,
) -> list[ReceivedMessage]:
    """Read ``topic`` from its start.

    Stops ``settle`` quiet seconds after every partition was read up to the end it had
    when reading began and ``expected`` messages (if given) arrived, or at ``timeout``.
    What was written before the call is all read whatever ``settle``; a longer one also
    waits for messages still being written. Without the ends (the broker did not give
    them), ``settle`` is at least ``UNKNOWN_END_SETTLE``.
    """
    ends = end_offsets(bootstrap_servers, topic)
    if not ends:
        settle = max(settle, UNKNOWN_END_SETTLE)
    positions: dict[int, int] = {}
    received: list[ReceivedMessage] = []
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    for message in iter_topic(bootstrap_servers, [topic]):
        now = time.monotonic()
        if now >= deadline:
            break
        if message is not None:
            received.append(message)
            positions[message.partition] = message.offset + 1
            quiet_since = now
            continue
        at_end = all(positions.get(p, low) >= high for p, (low, high) in ends.items())
        enough = at_end and (expected is None or len(received) >= expected)
        if enough and now - quiet_since >= settle:  # an empty topic too: nothing to wait for
            break
    return received
