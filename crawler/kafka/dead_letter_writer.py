"""Dead-lettering one message: the dead-letter topic, else the spool or a local file (no
Scrapy imports).

A dead letter the dead-letter topic does not take for now (transient: the broker is away,
timed out, purged at a stop) goes to the spool as any message does, addressed to the
dead-letter topic with its ``dlq_*`` headers: a replay sends it there (``resend``). Only one the
dead-letter topic refuses for good (permanent: too large for it too) is written to the node's
dead-letter file, and so is a replayed dead letter refused for good: a dead letter is never
dead-lettered again (no ``<topic>.dlq.dlq``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Message

from crawler.kafka.errors import BATCH_ERRORS, error_reason, is_permanent, unproven
from crawler.kafka.health import Count
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer
from crawler.kafka.replay import Settled
from crawler.kafka.spool import JsonLinesLog, encode_record

logger = logging.getLogger(__name__)

# the headers a dead letter gets, after its item's
ORIGINAL_TOPIC_HEADER = "dlq_original_topic"  # the topic it was meant for
REASON_HEADER = "dlq_reason"
ERROR_HEADER = "dlq_error"
ORIGINAL_TIMESTAMP_HEADER = "dlq_original_timestamp"  # ms; the dead letter has the send time
DLQ_HEADERS = (ORIGINAL_TOPIC_HEADER, REASON_HEADER, ERROR_HEADER, ORIGINAL_TIMESTAMP_HEADER)
# spools a message whose send failed for now (the sender's, which settles it)
Transient = Callable[[OutgoingMessage, KafkaError, Settled | None], None]
Unproven = Callable[[OutgoingMessage, Settled | None], None]


def settle(on_settled: Settled | None, outcome: str) -> None:
    if on_settled is not None:
        on_settled(outcome)


def is_dead_letter(message: OutgoingMessage) -> bool:
    """A message made by ``DeadLetterWriter.send`` (spooled, then replayed)."""
    return any(name == REASON_HEADER for name, _ in message.headers)


def _original_timestamp(message: OutgoingMessage, reason: str) -> list[tuple[str, bytes]]:
    """The item's own timestamp (its ``crawled_at``, else when it was first sent), for
    ``crawler dead-letters replay`` to give back; none when it is what the broker refused."""
    if not message.timestamp_ms or reason == "invalid_timestamp":
        return []
    return [(ORIGINAL_TIMESTAMP_HEADER, str(message.timestamp_ms).encode())]


class DeadLetterWriter:
    def __init__(
        self,
        dlq_topic_template: str,
        dead_letter_file: Path,
        producer: Callable[[], ItemProducer],
        count: Count,
        *,
        transient: Transient,
        unproven: Unproven,
    ) -> None:
        self._template = dlq_topic_template
        self._file = JsonLinesLog(dead_letter_file)
        self._producer = producer
        self._count = count
        self._transient = transient
        self._unproven = unproven  # a report of success without an offset (errors.unproven)

    def send(
        self, message: OutgoingMessage, reason: str, error: str, on_settled: Settled | None
    ) -> None:
        """Send to the dead-letter topic with the reason in headers."""
        dlq = replace(
            message,
            topic=self._template.format(topic=message.topic),
            timestamp_ms=0,  # the send time: the item's own may be what the broker refused
            headers=[
                *message.headers,
                (ORIGINAL_TOPIC_HEADER, message.topic.encode()),
                (REASON_HEADER, reason.encode()),
                (ERROR_HEADER, error.encode("utf-8", "replace")[:1000]),
                *_original_timestamp(message, reason),
            ],
        )
        self._deliver(dlq, reason, on_settled)

    def resend(self, dlq: OutgoingMessage, on_settled: Settled) -> None:
        """Send a spooled dead letter (``is_dead_letter``) to its dead-letter topic again."""
        self._deliver(dlq, dlq.header(REASON_HEADER) or "", on_settled)

    def _deliver(
        self, dlq: OutgoingMessage, reason: str, on_settled: Settled | None, alone: bool = False
    ) -> None:
        """Settles ``dead_lettered`` when the topic takes it or it is written to the file,
        else as the sender's ``transient`` settles it (``spooled``, or ``requeue``). A batch
        the topic refused (``BATCH_ERRORS``) is sent again a message at a time (``alone``)."""

        def report(failure: KafkaError | None, delivered: Message) -> None:
            if unproven(failure, delivered):
                self._unproven(dlq, on_settled)
            elif failure is None:
                self._count("kafka/dead_lettered", 1)
                settle(on_settled, "dead_lettered")
            elif not alone and failure.code() in BATCH_ERRORS:
                self._count(f"kafka/resent_alone/{error_reason(failure)}", 1)
                self._deliver(dlq, reason, on_settled, alone=True)
            else:
                self._failed(dlq, reason, failure, is_permanent(failure), on_settled)

        try:
            if self._producer().send(dlq, report, alone=alone):
                return
            failure = KafkaError(KafkaError._QUEUE_FULL, "local queue full")
        except KafkaException as exc:
            failure = exc.args[0]
        self._failed(dlq, reason, failure, is_permanent(failure, at_produce=True), on_settled)

    def _failed(
        self,
        dlq: OutgoingMessage,
        reason: str,
        failure: KafkaError,
        permanent: bool,
        on_settled: Settled | None,
    ) -> None:
        if not permanent:
            self._transient(dlq, failure, on_settled)
            return
        self._write(dlq, f"{reason}; dlq: {error_reason(failure)}")
        settle(on_settled, "dead_lettered")

    def _write(self, message: OutgoingMessage, reason: str) -> None:
        try:
            self._file.append(encode_record(message, reason))
        except OSError as exc:
            logger.error("Cannot write dead letter for %s: %s", message.topic, exc)
            self._count("kafka/dead_letter_error", 1)
            return
        logger.error("Message for %s written to %s (%s)", message.topic, self._file.path, reason)
        self._count("kafka/dead_lettered_file", 1)

    def close(self) -> None:
        self._file.close()
