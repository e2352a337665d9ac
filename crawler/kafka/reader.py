"""Read a topic from the beginning (for the demo, tests and operators)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, Message


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
) -> Iterator[ReceivedMessage | None]:
    """Yield messages of ``topics`` with a fresh consumer group; ``None`` after each quiet poll."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest" if from_beginning else "latest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    try:
        consumer.subscribe(topics)
        while True:
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


def read_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    expected: int | None = None,
    timeout: float = 60.0,
    settle: float = 1.0,
) -> list[ReceivedMessage]:
    """Read ``topic`` from its start.

    Stops ``settle`` seconds after ``expected`` messages arrived (so extra
    duplicates are seen too), after ``settle`` quiet seconds when ``expected``
    is None, or at ``timeout``.
    """
    received: list[ReceivedMessage] = []
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    for message in iter_topic(bootstrap_servers, [topic]):
        now = time.monotonic()
        if now >= deadline:
            break
        if message is not None:
            received.append(message)
            quiet_since = now
            continue
        enough = expected is None or len(received) >= expected
        if enough and received and now - quiet_since >= settle:
            break
    return received
