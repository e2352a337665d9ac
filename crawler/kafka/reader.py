"""Read a topic from the beginning (for the demo, tests and operators)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError


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


def read_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    expected: int | None = None,
    timeout: float = 60.0,
    settle: float = 1.0,
) -> list[ReceivedMessage]:
    """Read ``topic`` from its start with a fresh consumer group.

    Stops ``settle`` seconds after ``expected`` messages arrived (so extra
    duplicates are seen too), after ``settle`` quiet seconds when ``expected``
    is None, or at ``timeout``.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    received: list[ReceivedMessage] = []
    deadline = time.monotonic() + timeout
    quiet_since = time.monotonic()
    try:
        consumer.subscribe([topic])
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            now = time.monotonic()
            if message is None:
                enough = expected is None or len(received) >= expected
                if enough and received and now - quiet_since >= settle:
                    break
                continue
            error = message.error()
            if error is not None:
                if error.code() in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART):
                    continue
                raise RuntimeError(f"reading {topic}: {error.str()}")
            quiet_since = now
            received.append(
                ReceivedMessage(
                    topic=message.topic() or topic,
                    partition=message.partition() or 0,
                    offset=message.offset() or 0,
                    key=message.key(),
                    value=message.value() or b"",
                    headers=_headers(message.headers()),
                    timestamp_ms=message.timestamp()[1],
                )
            )
    finally:
        consumer.close()
    return received
