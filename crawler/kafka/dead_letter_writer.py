"""Dead-lettering one message: the dead-letter topic, else a local file (no Scrapy imports)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Message

from crawler.kafka.health import Count
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer
from crawler.kafka.replay import Settled
from crawler.kafka.spool import JsonLinesLog, encode_record

logger = logging.getLogger(__name__)


def error_reason(error: KafkaError) -> str:
    return str(error.name()).lower()


def settle(on_settled: Settled | None, outcome: str) -> None:
    if on_settled is not None:
        on_settled(outcome)


class DeadLetterWriter:
    def __init__(
        self,
        dlq_topic_template: str,
        dead_letter_file: Path,
        producer: Callable[[], ItemProducer],
        count: Count,
    ) -> None:
        self._template = dlq_topic_template
        self._file = JsonLinesLog(dead_letter_file)
        self._producer = producer
        self._count = count

    def send(
        self, message: OutgoingMessage, reason: str, error: str, on_settled: Settled | None
    ) -> None:
        """Send to the dead-letter topic with the reason in headers; to the local file if
        that fails too. Settles ``dead_lettered`` either way."""
        dlq = replace(
            message,
            topic=self._template.format(topic=message.topic),
            timestamp_ms=0,  # the send time: the item's own may be what the broker refused
            headers=[
                *message.headers,
                ("dlq_original_topic", message.topic.encode()),
                ("dlq_reason", reason.encode()),
                ("dlq_error", error.encode("utf-8", "replace")[:1000]),
            ],
        )

        def report(failure: KafkaError | None, _: Message) -> None:
            if failure is None:
                self._count("kafka/dead_lettered", 1)
            else:
                self._write(dlq, f"{reason}; dlq: {error_reason(failure)}")
            settle(on_settled, "dead_lettered")

        try:
            if self._producer().send(dlq, report):
                return
            failure = "local queue full"
        except KafkaException as exc:
            failure = error_reason(exc.args[0])
        self._write(dlq, f"{reason}; dlq: {failure}")
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
