"""Dead letters of a topic and which of them are handled (confluent-kafka, no Scrapy imports).

A topic's dead letters are in ``KAFKA_DLQ_TOPIC_TEMPLATE`` (``<topic>.dlq``). A
dead letter is *handled* once the consumer group ``KAFKA_DLQ_GROUP`` has
committed an offset past it: ``crawler dead-letters replay`` commits once the
replayed messages are acknowledged by their original topic, ``drop`` commits
without sending anything. Nothing else ever commits for that group.

Every operation works on partition spans fixed when it starts: from the group's
committed offset (or the partition's first offset) up to the partition's end
(high watermark) at that moment. Dead letters that arrive later are left for
the next run, so a replay or drop handles exactly what it counted. The
consumer is assigned its partitions (it never joins the group), so commands
start without a rebalance; run one replay or drop of a group at a time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from crawler.kafka.config import NO_SECURITY
from crawler.kafka.dead_letter_writer import ORIGINAL_TIMESTAMP_HEADER
from crawler.kafka.health import LIBRDKAFKA_LOG
from crawler.kafka.reader import ReceivedMessage, received

_ITEM_TYPE_MARK = "\x00"


class DeadLetterError(RuntimeError):
    """Kafka did not answer or refused (the message says what and where)."""


@dataclass(frozen=True, slots=True)
class DeadLetterSettings:
    group: str  # KAFKA_DLQ_GROUP
    dlq_template: str  # KAFKA_DLQ_TOPIC_TEMPLATE

    def __post_init__(self) -> None:
        if not self.group.strip():
            raise ValueError(f"KAFKA_DLQ_GROUP={self.group!r} must not be empty")
        try:
            self.dlq_template.format(topic="t")
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            raise ValueError(
                f"KAFKA_DLQ_TOPIC_TEMPLATE={self.dlq_template!r} is invalid: only {{topic}} "
                f"may be used ({exc!r})"
            ) from exc

    def dlq(self, topic: str) -> str:
        return self.dlq_template.format(topic=topic)

    def source_and_dlq(self, topic: str) -> tuple[str, str]:
        """``topic`` is an item topic or already its dead-letter topic: (item topic, DLQ)."""
        prefix, _, suffix = self.dlq_template.partition("{topic}")
        inner = len(topic) - len(prefix) - len(suffix)
        if (prefix or suffix) and inner > 0 and topic.startswith(prefix) and topic.endswith(suffix):
            return topic[len(prefix) : len(topic) - len(suffix)], topic
        return topic, self.dlq(topic)


def original_timestamp(headers: Mapping[str, bytes], sent_at: int) -> int:
    """The item's own timestamp a dead letter keeps (``dlq_original_timestamp``), else
    ``sent_at`` (the dead letter's)."""
    given = headers.get(ORIGINAL_TIMESTAMP_HEADER, b"")
    return int(given) if given.isdigit() else sent_at


def dead_letter_topics(
    topic_template: str, dlq_template: str, spider: str, existing: list[str]
) -> list[str]:
    """The dead-letter topics among ``existing`` of ``spider``'s item topics.

    ``{item_type}`` in the topic template matches a word (letters, digits, ``_``).
    """
    name = dlq_template.format(
        topic=topic_template.format(spider=spider, item_type=_ITEM_TYPE_MARK)
    )
    pattern = re.compile(re.escape(name).replace(re.escape(_ITEM_TYPE_MARK), r"\w+"))
    return sorted(topic for topic in existing if pattern.fullmatch(topic))


@dataclass(frozen=True, slots=True)
class Span:
    """Offsets ``start`` (included) to ``end`` (excluded) of one partition."""

    partition: int
    start: int
    end: int

    @property
    def count(self) -> int:
        """Dead letters in the span, by offsets (exact unless the topic is compacted)."""
        return self.end - self.start


class DeadLetterQueues:
    """One consumer of group ``group`` for counting, reading and committing dead letters."""

    def __init__(
        self,
        bootstrap_servers: str,
        group: str,
        timeout: float = 10.0,
        *,
        security: Mapping[str, Any] = NO_SECURITY,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        # KAFKA_PRODUCER_CONFIG's, for this consumer and a replay's producer
        self.security = security
        self.group = group
        self.timeout = timeout  # seconds for each request to Kafka
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "logger": LIBRDKAFKA_LOG,
            "log_level": 0,  # failures are raised as DeadLetterError, not logged by librdkafka
            **security,
        }
        self._consumer = Consumer(config)

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> DeadLetterQueues:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _fail(self, doing: str, error: KafkaException | KafkaError | str) -> DeadLetterError:
        text = error if isinstance(error, str) else _describe(error)
        return DeadLetterError(f"Kafka at {self.bootstrap_servers}, {doing}: {text}")

    def partitions(self) -> dict[str, list[int]]:
        """Every topic of the cluster and its partitions."""
        try:
            metadata = self._consumer.list_topics(timeout=self.timeout)
        except KafkaException as exc:
            raise self._fail("listing topics", exc) from exc
        return {name: sorted(topic.partitions) for name, topic in metadata.topics.items()}

    def spans(
        self, dlq: str, *, everything: bool = False, partitions: list[int] | None = None
    ) -> list[Span]:
        """The unhandled dead letters of ``dlq`` per partition (``everything``: all kept).

        A committed offset past the partition's end (the topic was recreated) counts
        as none. A topic that does not exist has no dead letters.
        """
        if partitions is None:
            partitions = self.partitions().get(dlq, [])
        if not partitions:
            return []
        try:
            committed = self._consumer.committed(
                [TopicPartition(dlq, p) for p in partitions], timeout=self.timeout
            )
        except KafkaException as exc:
            raise self._fail(f"reading the offsets of group {self.group} on {dlq}", exc) from exc
        spans = []
        for position in committed:
            if position.error is not None:
                raise self._fail(
                    f"reading the offset of {dlq}[{position.partition}]", position.error
                )
            low, high = self._watermarks(dlq, position.partition)
            offset = position.offset
            start = low if everything or offset < 0 or offset > high else max(offset, low)
            spans.append(Span(position.partition, start, high))
        return spans

    def _watermarks(self, dlq: str, partition: int) -> tuple[int, int]:
        try:
            found = self._consumer.get_watermark_offsets(
                TopicPartition(dlq, partition), timeout=self.timeout, cached=False
            )
        except KafkaException as exc:
            raise self._fail(f"reading the offsets of {dlq}[{partition}]", exc) from exc
        if found is None:
            raise self._fail(f"reading the offsets of {dlq}[{partition}]", "timed out")
        low, high = found
        return int(low), int(high)

    def unhandled(self, dlq: str, partitions: list[int] | None = None) -> int:
        return sum(span.count for span in self.spans(dlq, partitions=partitions))

    def read(self, dlq: str, spans: list[Span], timeout: float = 60.0) -> Iterator[ReceivedMessage]:
        """The messages of ``spans`` in offset order per partition; raises if they do not
        all arrive within ``timeout`` seconds of quiet."""
        ends = {span.partition: span.end for span in spans if span.count > 0}
        if not ends:
            return
        self._consumer.assign(
            [TopicPartition(dlq, span.partition, span.start) for span in spans if span.count > 0]
        )
        quiet_since = time.monotonic()
        try:
            while ends:
                message = self._consumer.poll(0.2)
                if message is None:
                    if time.monotonic() - quiet_since > timeout:
                        missing = ", ".join(f"{dlq}[{p}] up to {end}" for p, end in ends.items())
                        raise self._fail("reading dead letters", f"timed out before {missing}")
                    continue
                quiet_since = time.monotonic()
                partition, offset = message.partition() or 0, message.offset() or 0
                error = message.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise self._fail(f"reading {dlq}[{partition}]", error)
                end = ends.get(partition)
                if end is None:
                    continue
                if error is None and offset < end:
                    yield received(message)
                following = offset if error is not None else offset + 1  # EOF: the end offset
                if following >= end:
                    del ends[partition]
        finally:
            self._consumer.unassign()

    def commit(self, dlq: str, offsets: Mapping[int, int]) -> None:
        """Mark the dead letters of each partition before its offset handled."""
        if not offsets:
            return
        wanted = [TopicPartition(dlq, partition, offset) for partition, offset in offsets.items()]
        try:
            done = self._consumer.commit(offsets=wanted, asynchronous=False)
        except KafkaException as exc:
            raise self._fail(f"committing group {self.group} on {dlq}", exc) from exc
        for position in done or []:
            if position.error is not None:
                raise self._fail(
                    f"committing group {self.group} on {dlq}[{position.partition}]",
                    position.error,
                )


def _describe(error: KafkaException | KafkaError) -> str:
    kafka_error = error.args[0] if isinstance(error, KafkaException) else error
    if isinstance(kafka_error, KafkaError):
        return f"{kafka_error.name()}: {kafka_error.str()}"
    return str(error)
