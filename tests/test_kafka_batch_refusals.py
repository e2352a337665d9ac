"""The broker refuses a whole batch for one of its messages (an out-of-window timestamp, a
record a compacted topic cannot keep): librdkafka reports that error for every message of the
batch. Only the message at fault is dead-lettered; the others are delivered."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer, producer_config
from crawler.kafka.reader import read_topic
from crawler.kafka.sender import ItemSender, SenderConfig

DAY_MS = 86_400_000
GOOD = 20  # messages of the batch that the broker would take alone


def create(bootstrap: str, name: str, config: dict[str, str]) -> None:
    """``name`` with one partition (so every message lands in one batch) and ``config``; its
    dead-letter topic with the broker's defaults."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(name, 1, 1, config=config), NewTopic(f"{name}.dlq", 1, 1)]
    for future in admin.create_topics(topics).values():
        future.result(timeout=30)


def send_all(
    bootstrap: str, tmp_path: Path, messages: list[OutgoingMessage]
) -> tuple[list[str], Counter[str]]:
    """Send ``messages`` in one go (a long linger: one batch) and wait until each is
    settled: (their outcomes in order, the sender's counts)."""
    counts: Counter[str] = Counter()
    config = SenderConfig(
        producer_config(bootstrap, {"linger.ms": 500}),
        dlq_topic_template="{topic}.dlq",
        spool_dir=tmp_path / "spool",
        dead_letter_file=tmp_path / "spool" / "dead-letters.jsonl",
        node_id="node-0",
        crawl_id="default",
    )
    outcomes: list[str] = [""] * len(messages)

    async def run() -> None:
        sender = ItemSender(config, lambda name, n: counts.update({name: n}))
        for index, message in enumerate(messages):
            await sender.send(message, partial(outcomes.__setitem__, index))
        deadline = time.monotonic() + 60
        while "" in outcomes and time.monotonic() < deadline:
            sender.poll()
            await asyncio.sleep(0.05)
        await sender.close(10)

    asyncio.run(run())
    return outcomes, counts


def message(topic: str, number: int, *, key: bool = True, at: int = 0) -> OutgoingMessage:
    return OutgoingMessage(
        topic=topic,
        key=f"key-{number}".encode() if key else None,
        value=f'{{"n": {number}}}'.encode(),
        headers=[("item_type", b"page")],
        timestamp_ms=at,
    )


@pytest.mark.parametrize(
    ("config", "bad"),
    [
        ({"message.timestamp.before.max.ms": str(DAY_MS)}, {"at": 1_577_836_800_000}),
        ({"cleanup.policy": "compact"}, {"key": False}),
    ],
    ids=["timestamp_out_of_window", "keyless_in_compacted_topic"],
)
def test_only_the_message_at_fault_is_dead_lettered(
    kafka_bootstrap: str, tmp_path: Path, config: dict[str, str], bad: dict[str, object]
) -> None:
    topic = f"test-{uuid.uuid4().hex[:10]}-batch"
    create(kafka_bootstrap, topic, config)
    messages = [message(topic, n) for n in range(GOOD)]
    messages.insert(GOOD // 2, message(topic, 99, **bad))  # type: ignore[arg-type]

    outcomes, counts = send_all(kafka_bootstrap, tmp_path, messages)

    assert outcomes.count("delivered") == GOOD, (outcomes, counts)
    assert outcomes[GOOD // 2] == "dead_lettered", (outcomes, counts)
    delivered = read_topic(kafka_bootstrap, topic, expected=GOOD, timeout=30)
    assert sorted(m.value for m in delivered) == sorted(
        m.value for m in messages if m.value != b'{"n": 99}'
    )
    (dead,) = read_topic(kafka_bootstrap, f"{topic}.dlq", expected=1, timeout=30)
    assert dead.value == b'{"n": 99}'
    reason = next(iter(name for name in counts if name.startswith("kafka/failed/")))
    assert counts[reason] == 1  # only the message at fault failed for good
    resent = sum(n for name, n in counts.items() if name.startswith("kafka/resent_alone/"))
    assert resent >= GOOD


def test_a_message_sent_again_alone_while_purged_is_purged_too() -> None:
    """A batch's refusal served by the purge at a stop sends its messages again alone: the
    purge takes those too (each reports, and nothing is left unsettled in a producer no one
    polls any more)."""
    producer = ItemProducer(producer_config("127.0.0.1:1", {}))  # no broker: all queued
    one = message("t", 1)
    reports: list[int | None] = []

    def resent_alone(error: KafkaError | None, _: object) -> None:
        reports.append(None if error is None else error.code())
        if len(reports) == 1:  # as ItemSender._send_alone does on a batch's refusal
            assert producer.send(one, resent_alone, alone=True)

    assert producer.send(one, resent_alone)
    producer.purge()
    assert producer.pending() == 0
    assert reports == [KafkaError._PURGE_QUEUE, KafkaError._PURGE_QUEUE]
