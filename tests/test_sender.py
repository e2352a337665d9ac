"""ItemSender outcomes with a stand-in producer: fatal errors, permanent failures, unknown
topics, and a disk that fills up under the spool (an injected ``ENOSPC`` after a partial
write on the real file)."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from crawler.cli.status_text import pause_text
from crawler.extensions.ledger_layout import ledger_fields
from crawler.kafka.errors import BATCH_ERRORS
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.sender import ItemSender, SenderConfig
from crawler.kafka.spool import (
    JsonLinesLog,
    Spool,
    claim,
    dead_letter_file,
    decode_record,
    encode_record,
    report_left,
)
from crawler.pipelines.pause_notice import KAFKA_AWAY, PauseInfo

Report = Callable[[KafkaError | None, Any], None]


class Delivered:
    """The message a delivery report gives: where Kafka wrote it (None: no offset given)."""

    def __init__(self, offset: int | None) -> None:
        self._offset = offset

    def offset(self) -> int | None:
        return self._offset


class FakeProducer:
    """Keeps messages until the test decides their fate."""

    made: list[FakeProducer] = []  # noqa: RUF012 - shared across one test

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.queued: list[tuple[OutgoingMessage, Report]] = []
        FakeProducer.made.append(self)

    def send(self, message: OutgoingMessage, on_delivery: Report, *, alone: bool = False) -> bool:
        self.queued.append((message, on_delivery))
        return True

    def poll(self) -> int:
        return 0

    def pending(self) -> int:
        return len(self.queued)

    async def drain(self, timeout: float) -> int:
        return len(self.queued)

    def purge(self) -> None:
        queued, self.queued = self.queued, []
        for _message, report in queued:
            report(KafkaError(KafkaError._PURGE_QUEUE), None)

    def report_all(self, error: KafkaError | None, offset: int | None = 0) -> None:
        queued, self.queued = self.queued, []
        for _message, report in queued:
            report(error, Delivered(offset))

    def refuse_all(self, error: KafkaError) -> None:
        """Kafka refuses each queued message for good; a batch's refusal, again when each is
        sent alone (``BATCH_ERRORS``)."""
        self.report_all(error)
        if error.code() in BATCH_ERRORS:
            self.report_all(error)


SENDERS: list[ItemSender] = []


@pytest.fixture(autouse=True)
def close_senders() -> Iterator[None]:
    """Close every sender a test made (its spool and dead-letter files)."""
    yield
    while SENDERS:
        asyncio.run(SENDERS.pop().close(0))


def sender(
    tmp_path: Path, counts: Counter[str], unknown_topic: Callable[[str], object] | None = None
) -> ItemSender:
    FakeProducer.made = []
    SENDERS.append(
        made := ItemSender(
            SenderConfig(
                producer_config={"bootstrap.servers": "unused:1"},
                dlq_topic_template="{topic}.dlq",
                spool_dir=tmp_path / "spool",
                dead_letter_file=dead_letter_file(tmp_path / "spool", "n1"),
                node_id="n1",
                crawl_id="c1",
            ),
            count=lambda stat, n: counts.update({stat: n}),
            producer_factory=FakeProducer,  # type: ignore[arg-type]
            unknown_topic=unknown_topic,
        )
    )
    return made


def message(n: int) -> OutgoingMessage:
    return OutgoingMessage("items", b"k", b'{"n":%d}' % n, [("spider", b"s")], 1)


def send_all(item_sender: ItemSender, messages: list[OutgoingMessage], outcomes: list[str]) -> None:
    async def scenario() -> None:
        for outgoing in messages:
            await item_sender.send(outgoing, outcomes.append)

    asyncio.run(scenario())


def sent(tmp_path: Path, count: int) -> tuple[ItemSender, Counter[str], list[str]]:
    """A sender that sent ``count`` messages, none reported yet; its counts and outcomes."""
    counts: Counter[str] = Counter()
    outcomes: list[str] = []
    item_sender = sender(tmp_path, counts)
    send_all(item_sender, [message(n) for n in range(count)], outcomes)
    return item_sender, counts, outcomes


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


def test_a_delivery_without_an_offset_is_sent_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """librdkafka reports a batch that failed (``Not leader for partition``, at a new topic's
    first produce) delivered when a batch sent after it succeeds ("implicitly acked"), without
    an offset; a broker that had no state for the producer wrote the later batch, and not the
    first (a reproduction: 1 and 3 items acknowledged and missing from the topic). A report
    without an offset is no proof: the message is spooled and sent again (at least once)."""
    item_sender, counts, outcomes = sent(tmp_path, 3)
    producer = FakeProducer.made[0]
    first, *rest = producer.queued
    producer.queued = [first]
    with caplog.at_level(logging.WARNING, logger="crawler.kafka.sender"):
        producer.report_all(None, offset=None)  # implicitly acked
    producer.queued = rest
    producer.report_all(None)
    assert outcomes == ["spooled", "delivered", "delivered"]
    assert counts["kafka/delivered"] == 2
    assert counts["kafka/unproven_ack"] == 1
    assert "without an offset" in caplog.text
    item_sender.replay()
    ((again, _),) = producer.queued
    assert again.value == message(0).value


def test_a_dead_letter_delivered_without_an_offset_is_spooled_for_the_dlq(tmp_path: Path) -> None:
    item_sender, counts, outcomes = sent(tmp_path, 1)
    producer = FakeProducer.made[0]
    producer.refuse_all(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    producer.report_all(None, offset=None)  # the dead letter, implicitly acked
    assert outcomes == ["spooled"]
    assert (counts["kafka/unproven_ack"], counts["kafka/dead_lettered"]) == (1, 0)
    (segment,) = item_sender.spool.directory.glob("*.jsonl")
    (record,) = [decode_record(line) for line in segment.read_bytes().splitlines()]
    assert (record.message.topic, record.reason) == ("items.dlq", "unproven_ack")


def test_too_large_goes_to_the_dlq_then_the_local_file(tmp_path: Path) -> None:
    counts: Counter[str] = Counter()
    outcomes: list[str] = []
    item_sender = sender(tmp_path, counts)
    send_all(item_sender, [message(1)], outcomes)
    producer = FakeProducer.made[0]
    producer.refuse_all(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    ((dlq, _),) = producer.queued
    assert dlq.topic == "items.dlq"
    assert ("dlq_reason", b"msg_size_too_large") in dlq.headers
    producer.refuse_all(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    assert outcomes == ["dead_lettered"]
    (line,) = dead_letter_file(tmp_path / "spool", "n1").read_bytes().splitlines()
    assert decode_record(line).reason == "msg_size_too_large; dlq: msg_size_too_large"


def test_a_replay_never_takes_the_dead_letter_file_for_a_segment(tmp_path: Path) -> None:
    """Once its node closed it, the dead-letter file is not replayed into the item topic (and
    not held by a replay, which would block the next dead letter on its lock), nor counted
    as spool bytes."""
    counts: Counter[str] = Counter()
    outcomes: list[str] = []
    first = sender(tmp_path, counts)
    send_all(first, [message(1)], outcomes)
    FakeProducer.made[0].refuse_all(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    FakeProducer.made[0].refuse_all(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    assert outcomes == ["dead_lettered"]
    asyncio.run(SENDERS.pop().close(0))  # its node stops: the file's lock is released
    second = sender(tmp_path, counts)
    second.replay()
    assert FakeProducer.made[-1].queued == []  # nothing replayed
    assert second.spool.segments() == [] and second.spool.size() == 0
    assert len(dead_letter_file(tmp_path / "spool", "n1").read_bytes().splitlines()) == 1


def test_unknown_topic_at_produce_is_spooled_not_dead_lettered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Spooled, and named once in an ERROR (not only 'Kafka unreachable (_unknown_topic)'):
    with KAFKA_CREATE_TOPICS=False a missing topic is the operator's to create."""
    counts: Counter[str] = Counter()
    outcomes: list[str] = []
    told: list[str] = []  # the pipeline starts the topic's check (KAFKA_CREATE_TOPICS)
    item_sender = sender(tmp_path, counts, told.append)

    def unknown(message: OutgoingMessage, on_delivery: Report, *, alone: bool = False) -> bool:
        raise KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC))

    FakeProducer.made[0].send = unknown  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="crawler.kafka"):
        send_all(item_sender, [message(1), message(2)], outcomes)
    assert outcomes == ["spooled", "spooled"]
    # said as what it is: Kafka answered, it has no such topic (not "Kafka unreachable")
    assert "unreachable" not in caplog.text
    assert "Kafka has no topic for some items at unused:1 (_unknown_topic)" in caplog.text
    assert told == ["items", "items"]
    named = [r.getMessage() for r in caplog.records if "has no topic items" in r.getMessage()]
    assert len(named) == 1, caplog.text
    assert "KAFKA_CREATE_TOPICS" in named[0] and "KAFKA_TOPIC_TEMPLATE" in named[0]
    assert counts["kafka/dead_lettered"] == 0
    assert item_sender.outage_seconds() > 0  # an outage, not a permanent failure
    # and `crawler status` says it as what it is too
    notice = PauseInfo(reason=KAFKA_AWAY, since=0.0, missing_topic=item_sender.health.missing_topic)
    assert pause_text(notice).startswith("KAFKA HAS NO TOPIC FOR SOME ITEMS since 1970-01-01")
    paused = PauseInfo(reason="max_outage", since=0.0, missing_topic=True)
    assert pause_text(paused).startswith("PAUSED (Kafka has no topic for some items since ")
    item_sender.health.connection_error("_transport")  # the broker goes away too: said so
    assert not item_sender.health.missing_topic
    assert "Kafka unreachable at unused:1 (_transport)" in caplog.text
    # a dead letter whose dead-letter topic is missing: its original topic's check (which
    # creates items.dlq), not one for items.dlq (which would create items.dlq.dlq)
    item_sender.dead_letter(message(3), "schema", "$.n: bad", outcomes.append)
    assert outcomes[-1] == "spooled"
    assert told[-1] == "items"


def enospc_after_half(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os.write`` writes half of what it is given to the real file, then fails: full disk."""
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", half_then_full)


def test_a_write_that_fills_the_disk_leaves_no_torn_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = JsonLinesLog(tmp_path / "segment.jsonl")
    log.append(b'{"n":1}\n')
    with monkeypatch.context() as patch:
        enospc_after_half(patch)
        with pytest.raises(OSError, match="No space left"):
            log.append(b'{"n":2}\n')
    log.close()  # nothing buffered: closing cannot fail on the full disk
    assert (tmp_path / "segment.jsonl").read_bytes() == b'{"n":1}\n'


def test_a_replayed_message_that_cannot_be_spooled_again_keeps_its_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    counts: Counter[str] = Counter()
    outcomes: list[str] = []
    item_sender = sender(tmp_path, counts)
    send_all(item_sender, [message(1), message(2)], outcomes)
    producer = FakeProducer.made[0]
    producer.report_all(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert outcomes == ["spooled", "spooled"]
    item_sender.replay()
    (_, delivered), (_, failed) = producer.queued
    delivered(None, Delivered(0))
    with monkeypatch.context() as patch:
        enospc_after_half(patch)
        failed(KafkaError(KafkaError._MSG_TIMED_OUT), None)
    assert counts["kafka/replayed"] == 1
    assert counts["kafka/spool_error"] == 1
    assert item_sender.health.spool_failing
    # a replay (`crawler spool replay` too) has no request to send back to the queue (an audit)
    (said,) = [r.getMessage() for r in caplog.records if "Cannot spool" in r.getMessage()]
    assert "their segment is kept for a later replay" in said
    item_sender.spool.seal()
    (segment,) = [p for p in item_sender.spool.directory.glob("*.jsonl") if p.stat().st_size]
    records = [decode_record(line) for line in segment.read_bytes().splitlines()]
    assert [r.message.value for r in records] == [message(1).value, message(2).value]


@pytest.mark.parametrize("code", [KafkaError.INVALID_TIMESTAMP, KafkaError.TOPIC_EXCEPTION])
def test_a_refused_timestamp_or_topic_name_is_dead_lettered_not_an_outage(
    tmp_path: Path, code: int
) -> None:
    """The broker answered and refused this message: no outage, and the dead letter carries
    the send time (a copy with the refused timestamp would be refused again)."""
    counts: Counter[str] = Counter()
    outcomes: list[str] = []
    item_sender = sender(tmp_path, counts)
    send_all(item_sender, [message(1)], outcomes)
    producer = FakeProducer.made[0]
    producer.refuse_all(KafkaError(code))
    ((dlq, _),) = producer.queued
    assert dlq.topic == "items.dlq"
    assert dlq.timestamp_ms == 0  # the producer's clock
    # nor is it kept for a replay: the broker would refuse it again
    kept = [name for name, _ in dlq.headers if name == "dlq_original_timestamp"]
    assert kept == ([] if code == KafkaError.INVALID_TIMESTAMP else ["dlq_original_timestamp"])
    producer.report_all(None)
    assert outcomes == ["dead_lettered"]
    assert counts["kafka/dead_lettered"] == 1
    assert item_sender.outage_seconds() == 0
    assert list(item_sender.spool.directory.glob("*.jsonl")) == []


def dlq_refused_for_now(tmp_path: Path, counts: Counter[str], code: int) -> ItemSender:
    """A message Kafka refuses for good (``invalid_msg``) whose dead letter the dead-letter
    topic does not take for now (``code``, transient): spooled, not written to the file."""
    outcomes: list[str] = []
    item_sender = sender(tmp_path, counts)
    send_all(item_sender, [message(1)], outcomes)
    producer = FakeProducer.made[0]
    producer.refuse_all(KafkaError(KafkaError.INVALID_MSG))
    producer.report_all(KafkaError(code))
    assert outcomes == ["spooled"]
    assert not dead_letter_file(tmp_path / "spool", "n1").exists()
    assert counts["kafka/dead_letter_spooled"] == 1
    assert counts["kafka/dead_lettered"] == counts["kafka/dead_lettered_file"] == 0
    return item_sender


@pytest.mark.parametrize(
    "code",
    [
        KafkaError._MSG_TIMED_OUT,
        KafkaError._PURGE_QUEUE,  # a graceful stop while the broker is away
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    ],
)
def test_a_dead_letter_the_dlq_does_not_take_for_now_is_spooled_for_the_dlq(
    tmp_path: Path, code: int
) -> None:
    """The spooled dead letter keeps its dead-letter topic and headers: a replay delivers it
    there (``kafka/dead_lettered`` then), never to the item topic. It is out of the spool:
    the ledger's ``items/replayed`` counts it (else `crawler status` saw it spooled forever)."""
    counts: Counter[str] = Counter()
    item_sender = dlq_refused_for_now(tmp_path, counts, code)
    producer = FakeProducer.made[0]
    # the broker is away, unless the producer purged the dead letter itself
    assert (item_sender.outage_seconds() > 0) == (code != KafkaError._PURGE_QUEUE)
    item_sender.health.answered()

    item_sender.replay()
    ((replayed, _),) = producer.queued
    assert replayed.topic == "items.dlq"
    assert replayed.value == message(1).value
    assert ("dlq_original_topic", b"items") in replayed.headers
    assert ("dlq_reason", b"invalid_msg") in replayed.headers
    producer.report_all(None)
    assert counts["kafka/dead_lettered"] == 1
    assert counts["kafka/delivered"] == counts["kafka/replayed"] == 0  # not an item delivered
    assert item_sender.spool.segments() == []
    fields = ledger_fields(counts)
    assert fields["items/spooled"] == fields["items/replayed"] == 1


def test_a_dead_letter_whose_dlq_produce_fails_for_now_is_spooled(tmp_path: Path) -> None:
    """``produce()`` of the dead letter refuses it for now: a topic it does not know yet, a
    full local queue."""
    counts: Counter[str] = Counter()
    outcomes: list[str] = []
    item_sender = sender(tmp_path, counts)
    refusals = iter([KafkaException(KafkaError(KafkaError._UNKNOWN_TOPIC)), None])

    def refuse(message: OutgoingMessage, on_delivery: Report, *, alone: bool = False) -> bool:
        if refusal := next(refusals):
            raise refusal
        return False  # the local queue is full

    FakeProducer.made[0].send = refuse  # type: ignore[method-assign]
    for n in (1, 2):
        item_sender.dead_letter(message(n), "schema", "$.n: invalid", outcomes.append)
    assert outcomes == ["spooled", "spooled"]
    assert not dead_letter_file(tmp_path / "spool", "n1").exists()
    assert counts["kafka/dead_letter_spooled"] == 2
    item_sender.spool.seal()
    (segment,) = item_sender.spool.segments()
    records = [decode_record(line) for line in segment.read_bytes().splitlines()]
    assert [r.message.topic for r in records] == ["items.dlq", "items.dlq"]


def test_a_replayed_dead_letter_refused_for_good_goes_to_the_file_not_a_dlq_of_the_dlq(
    tmp_path: Path,
) -> None:
    counts: Counter[str] = Counter()
    item_sender = dlq_refused_for_now(tmp_path, counts, KafkaError._MSG_TIMED_OUT)
    item_sender.health.answered()
    producer = FakeProducer.made[0]
    item_sender.replay()
    producer.refuse_all(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    assert producer.queued == []  # nothing for items.dlq.dlq
    (line,) = dead_letter_file(tmp_path / "spool", "n1").read_bytes().splitlines()
    record = decode_record(line)
    assert record.message.topic == "items.dlq"
    assert record.reason == "invalid_msg; dlq: msg_size_too_large"
    assert counts["kafka/dead_lettered_file"] == 1
    assert counts["kafka/dead_lettered"] == 0
    assert item_sender.spool.segments() == []
    fields = ledger_fields(counts)
    assert fields["items/spooled"] == fields["items/replayed"] == 1


@pytest.mark.parametrize(
    "value", [b"{'title': 'lone surrogate \\ud800'}", b'{"a":\n1}', b"", b'{"n":1}']
)
def test_a_spool_record_keeps_a_value_that_is_no_json_line(value: bytes) -> None:
    """An ``unencodable`` dead letter's value is the item's Python repr: embedded as it is it
    made an unreadable line, which a replay skipped and deleted with its segment."""
    letter = OutgoingMessage("items.dlq", None, value, [("dlq_reason", b"unencodable")], 0)
    line = encode_record(letter, "_purge_queue")
    assert line.count(b"\n") == 1
    assert decode_record(line).message.value == value


@pytest.mark.parametrize(
    "value",
    [
        b'{"big":1180591620717411303424,"small":-9223372036854775809}',
        b'{"value_encoding":"json","a":[{"value":1,"value_encoding":"json"}]}',
        b'{"s":",\\"value_encoding\\":\\"json\\",", "f": 1.10}',
        b"[2e400]",
    ],
)
def test_a_spooled_json_value_is_read_back_byte_for_byte(value: bytes) -> None:
    """Read back parsed and dumped again, ``2**70`` became ``1.1805916207174113e+21``."""
    headers: list[tuple[str, str | bytes | None]] = [("h", b',"value_encoding":"json",')]
    line = encode_record(OutgoingMessage("t", b',"value":', value, headers, 0), "_msg_timed_out")
    assert decode_record(line).message.value == value


def test_a_spool_line_of_this_version_is_read_back() -> None:
    line = (
        b'{"topic":"items","key":"k","value":{"big":1180591620717411303424},'
        b'"value_encoding":"json","headers":[["spider","s"]],"timestamp_ms":1,'
        b'"reason":"_msg_timed_out","spooled_at":1767225600.5}'
    )
    record = decode_record(line)
    assert record.message == OutgoingMessage(
        "items", b"k", b'{"big":1180591620717411303424}', [("spider", b"s")], 1
    )
    assert record.reason == "_msg_timed_out"


def test_a_message_spooled_again_by_a_replay_counts_once_as_spooled(tmp_path: Path) -> None:
    """``kafka/spooled`` (the ledger's ``items/spooled``) counts messages, not spool writes:
    a replay that fails again counts ``kafka/respooled``."""
    counts: Counter[str] = Counter()
    outcomes: list[str] = []
    item_sender = sender(tmp_path, counts)
    send_all(item_sender, [message(1)], outcomes)
    FakeProducer.made[0].report_all(KafkaError(KafkaError._MSG_TIMED_OUT))
    for _ in range(3):  # three replays while Kafka is still away
        item_sender.replay()
        FakeProducer.made[0].report_all(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert outcomes == ["spooled"]
    assert (counts["kafka/spooled"], counts["kafka/respooled"]) == (1, 3)
    item_sender.replay()
    FakeProducer.made[0].report_all(None)
    assert counts["kafka/replayed"] == 1


def test_a_replayed_message_of_another_crawl_is_counted_for_that_crawl(tmp_path: Path) -> None:
    """A node started with a new CRAWLER_CRAWL_ID replays the last crawl's spool: its ledger
    credited the replay to the new crawl, and the last one said its items were only in a spool
    for good."""
    counts: Counter[str] = Counter()
    item_sender = sender(tmp_path, counts)  # of crawl c1
    for n, crawl in enumerate(["c0", "c0", "c1", None]):
        headers: list[tuple[str, str | bytes | None]] = [("crawl_id", crawl)] if crawl else []
        item_sender.spool.append(OutgoingMessage("items", b"k", b"%d" % n, headers, 1), "x")
    item_sender.replay()
    FakeProducer.made[0].report_all(None)
    assert counts["kafka/replayed"] == counts["kafka/delivered"] == 4
    assert counts["kafka/replay_of_crawl/delivered/c0"] == 2
    fields = ledger_fields(counts)  # c1's own (one without a header)
    assert (fields["items/replayed"], fields["items/delivered"]) == (2, 2)


def test_a_spool_counts_its_records_across_segments_a_block_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("crawler.kafka.spool.COUNT_BLOCK", 7)  # lines span blocks
    (tmp_path / "a.jsonl").write_bytes(b'{"n":1}\n{"n":22}\n')
    (tmp_path / "b.jsonl").write_bytes(b'{"n":333}\n')
    (tmp_path / "notes.txt").write_bytes(b"not\na\nsegment\n")
    assert Spool(tmp_path, "n1").left() == (3, 0)


def test_what_a_closing_node_says_is_left_leaves_out_what_another_process_holds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two nodes share a spool folder: a node closing while the other replays a segment told
    the operator to replay that segment's records too (an audit)."""
    (tmp_path / "free.jsonl").write_bytes(b'{"n":1}\n{"n":2}\n')
    (tmp_path / "replayed.jsonl").write_bytes(b'{"n":3}\n{"n":4}\n{"n":5}\n')
    spool = Spool(tmp_path, "n1")
    held = claim(tmp_path / "replayed.jsonl")  # as the other node's replay holds it
    assert held is not None
    with held, caplog.at_level(logging.INFO, logger="crawler.kafka.spool"):
        assert spool.left() == (2, 3)
        report_left(spool, "pages", "spool")
    assert "2 items left in the spool" in caplog.text
    assert "3 items in the spool" in caplog.text and "another process on this host" in caplog.text
    assert spool.left() == (5, 0)  # released: the other node stopped before sending them
