"""ItemSender outcomes with a stand-in producer: fatal errors and permanent failures."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError

from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.sender import ItemSender, SenderConfig
from crawler.kafka.spool import decode_record

Report = Callable[[KafkaError | None, Any], None]


class FakeProducer:
    """Keeps messages until the test decides their fate."""

    made: list[FakeProducer] = []  # noqa: RUF012 - shared across one test

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.queued: list[tuple[OutgoingMessage, Report]] = []
        FakeProducer.made.append(self)

    def send(self, message: OutgoingMessage, on_delivery: Report) -> bool:
        self.queued.append((message, on_delivery))
        return True

    def poll(self) -> int:
        return 0

    def pending(self) -> int:
        return len(self.queued)

    def purge(self) -> None:
        queued, self.queued = self.queued, []
        for _message, report in queued:
            report(KafkaError(KafkaError._PURGE_QUEUE), None)

    def report_all(self, error: KafkaError | None) -> None:
        queued, self.queued = self.queued, []
        for _message, report in queued:
            report(error, None)


def sender(tmp_path: Path, counts: Counter[str]) -> ItemSender:
    FakeProducer.made = []
    return ItemSender(
        SenderConfig(
            producer_config={"bootstrap.servers": "unused:1"},
            dlq_topic_template="{topic}.dlq",
            spool_dir=tmp_path / "spool",
            dead_letter_file=tmp_path / "spool" / "dead-letters.jsonl",
            node_id="n1",
        ),
        count=lambda stat, n: counts.update({stat: n}),
        producer_factory=FakeProducer,  # type: ignore[arg-type]
    )


def message(n: int) -> OutgoingMessage:
    return OutgoingMessage("items", b"k", b'{"n":%d}' % n, [("spider", b"s")], 1)


def send_all(item_sender: ItemSender, messages: list[OutgoingMessage], outcomes: list[str]) -> None:
    async def scenario() -> None:
        for outgoing in messages:
            await item_sender.send(outgoing, outcomes.append)

    asyncio.run(scenario())


def test_fatal_error_recreates_the_producer_and_spools_its_queue(tmp_path: Path) -> None:
    counts: Counter[str] = Counter()
    outcomes: list[str] = []
    item_sender = sender(tmp_path, counts)
    send_all(item_sender, [message(n) for n in range(3)], outcomes)
    first = FakeProducer.made[0]
    first.config["error_cb"](KafkaError(KafkaError._FATAL, "idempotence broken", fatal=True))
    item_sender.poll()

    assert len(FakeProducer.made) == 2
    assert id(item_sender.producer) == id(FakeProducer.made[1])
    assert outcomes == ["spooled", "spooled", "spooled"]
    assert counts["kafka/producer_recreated"] == 1
    (segment,) = item_sender.spool.directory.glob("*.jsonl")
    records = [decode_record(line) for line in segment.read_bytes().splitlines()]
    assert [r.message.value for r in records] == [message(n).value for n in range(3)]
    assert {r.reason for r in records} == {"_purge_queue"}

    item_sender.replay()  # through the new producer
    FakeProducer.made[1].report_all(None)
    assert counts["kafka/replayed"] == 3
    assert list(item_sender.spool.directory.glob("*.jsonl")) == []


def test_too_large_goes_to_the_dlq_then_the_local_file(tmp_path: Path) -> None:
    counts: Counter[str] = Counter()
    outcomes: list[str] = []
    item_sender = sender(tmp_path, counts)
    send_all(item_sender, [message(1)], outcomes)
    producer = FakeProducer.made[0]
    producer.report_all(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    ((dlq, _),) = producer.queued
    assert dlq.topic == "items.dlq"
    assert ("dlq_reason", b"msg_size_too_large") in dlq.headers
    producer.report_all(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    assert outcomes == ["dead_lettered"]
    (line,) = (tmp_path / "spool" / "dead-letters.jsonl").read_bytes().splitlines()
    assert decode_record(line).reason == "msg_size_too_large; dlq: msg_size_too_large"
