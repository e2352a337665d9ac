"""``ItemSender``: deliver messages to Kafka and account for every one (no Scrapy imports).

Every message ends in exactly one settled outcome, reported to its
``on_settled`` callback:

- ``delivered``: acknowledged by the broker;
- ``spooled``: a transient failure (broker unreachable, timed out, purged at
  shutdown); written to the local spool (fsynced), replayed later;
- ``dead_lettered``: a permanent failure (too large, invalid); sent to the
  dead-letter topic, or to the local dead-letter file if even that fails;
- ``requeue``: it could not even be spooled (disk error): the caller should
  crawl it again.

A fatal producer error recreates the producer; its queued messages are purged
into the spool and replayed through the new one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer
from crawler.kafka.spool import JsonLinesLog, Spool, claim, encode_record, read_segment

logger = logging.getLogger(__name__)

Settled = Callable[[str], None]
Count = Callable[[str, int], None]

PERMANENT_ERRORS = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.INVALID_MSG,
        KafkaError.INVALID_RECORD,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError._INVALID_ARG,
    }
)
BROKER_DOWN_ERRORS = frozenset({KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT})
POLL_EVERY = 32  # serve delivery reports every N sends (and on every periodic poll)


@dataclass(frozen=True, slots=True)
class SenderConfig:
    producer_config: Mapping[str, Any]
    dlq_topic_template: str
    spool_dir: Path
    dead_letter_file: Path
    node_id: str
    backpressure_wait: float = 0.05
    replay_interval: float = 30.0


def error_reason(error: KafkaError) -> str:
    return str(error.name()).lower()


class ItemSender:
    def __init__(
        self,
        config: SenderConfig,
        count: Count,
        producer_factory: Callable[[Mapping[str, Any]], ItemProducer] = ItemProducer,
    ) -> None:
        self.config = config
        self._count = count
        self._factory = producer_factory
        self._fatal: KafkaError | None = None
        self.producer = self._new_producer()
        self.spool = Spool(config.spool_dir, config.node_id)
        self._dead_letters = JsonLinesLog(config.dead_letter_file)
        self._down_since: float | None = None
        self._last_replay = 0.0
        self._replaying = 0  # segments being replayed
        self._unpolled = 0  # sends since the last poll

    def _new_producer(self) -> ItemProducer:
        config = {**self.config.producer_config, "error_cb": self._on_error}
        return self._factory(config)

    # -- sending ------------------------------------------------------------------------------

    async def send(self, message: OutgoingMessage, on_settled: Settled | None = None) -> None:
        """Enqueue ``message``; waits (without blocking) while the local queue is full."""
        callback = self._delivery_callback(message, on_settled)
        while True:
            try:
                accepted = self.producer.send(message, callback)
            except KafkaException as exc:
                self._permanent(message, exc.args[0], on_settled)
                return
            if accepted:
                self._count("kafka/produced", 1)
                self._unpolled += 1
                if self._unpolled >= POLL_EVERY:
                    self._unpolled = 0
                    self.producer.poll()
                return
            self._count("kafka/buffer_full", 1)
            self.producer.poll()
            await asyncio.sleep(self.config.backpressure_wait)

    def _delivery_callback(
        self, message: OutgoingMessage, on_settled: Settled | None
    ) -> Callable[[KafkaError | None, Message], None]:
        def report(error: KafkaError | None, _: Message) -> None:
            if error is None:
                self._down_since = None
                self._count("kafka/delivered", 1)
                _settle(on_settled, "delivered")
            elif error.code() in PERMANENT_ERRORS:
                self._permanent(message, error, on_settled)
            else:
                self._transient(message, error, on_settled)

        return report

    def _transient(
        self, message: OutgoingMessage, error: KafkaError, on_settled: Settled | None
    ) -> None:
        reason = error_reason(error)
        self._count(f"kafka/failed/{reason}", 1)
        self._down_since = self._down_since or time.monotonic()
        try:
            self.spool.append(message, reason)
        except OSError as exc:
            logger.error("Cannot spool a message for %s (%s): %s", message.topic, reason, exc)
            self._count("kafka/spool_error", 1)
            _settle(on_settled, "requeue")
            return
        self._count("kafka/spooled", 1)
        _settle(on_settled, "spooled")

    def _permanent(
        self, message: OutgoingMessage, error: KafkaError, on_settled: Settled | None
    ) -> None:
        reason = error_reason(error)
        self._count(f"kafka/failed/{reason}", 1)
        logger.error("Kafka refused a message for %s (%s): %s", message.topic, reason, error.str())
        self.dead_letter(message, reason, error.str(), on_settled)

    # -- dead letters -------------------------------------------------------------------------

    def dead_letter(
        self, message: OutgoingMessage, reason: str, error: str, on_settled: Settled | None
    ) -> None:
        """Send to the dead-letter topic; to the local file if that fails too."""
        dlq = replace(
            message,
            topic=self.config.dlq_topic_template.format(topic=message.topic),
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
                self._dead_letter_file(dlq, f"{reason}; dlq: {error_reason(failure)}")
            _settle(on_settled, "dead_lettered")

        try:
            if self.producer.send(dlq, report):
                return
            failure = "local queue full"
        except KafkaException as exc:
            failure = error_reason(exc.args[0])
        self._dead_letter_file(dlq, f"{reason}; dlq: {failure}")
        _settle(on_settled, "dead_lettered")

    def _dead_letter_file(self, message: OutgoingMessage, reason: str) -> None:
        try:
            self._dead_letters.append(encode_record(message, reason))
        except OSError as exc:
            logger.error("Cannot write dead letter for %s: %s", message.topic, exc)
            self._count("kafka/dead_letter_error", 1)
            return
        logger.error(
            "Message for %s written to %s (%s)", message.topic, self._dead_letters.path, reason
        )
        self._count("kafka/dead_lettered_file", 1)

    # -- periodic work ------------------------------------------------------------------------

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fatal = error
        elif error.code() in BROKER_DOWN_ERRORS:
            self._down_since = self._down_since or time.monotonic()

    def outage_seconds(self) -> float:
        """How long Kafka has been failing with no delivery since (0 when fine)."""
        return 0.0 if self._down_since is None else time.monotonic() - self._down_since

    def poll(self) -> None:
        """Serve delivery reports; recover from fatal errors; replay the spool when due."""
        self.producer.poll()
        if self._fatal is not None:
            self._recreate()
        now = time.monotonic()
        due = now - self._last_replay >= self.config.replay_interval
        if due and not self._replaying and self._down_since is None and self.spool.segments():
            self._last_replay = now
            self.replay()

    def _recreate(self) -> None:
        error, self._fatal = self._fatal, None
        assert error is not None
        logger.error("Fatal Kafka producer error (%s): recreating the producer", error.str())
        self._count("kafka/producer_recreated", 1)
        old = self.producer
        self.producer = self._new_producer()
        old.purge()  # queued messages fail with _PURGE_QUEUE and go to the spool

    def replay(self) -> None:
        """Send every sealed spool segment again; a segment is deleted once all its
        messages are settled (failures go to the current segment)."""
        self.spool.seal()
        for segment in self.spool.segments():
            handle = claim(segment)
            if handle is None:
                continue
            records, broken = read_segment(handle)
            if broken:
                self._count("kafka/spool_unreadable", broken)
                logger.error("%d unreadable lines in spool segment %s", broken, segment)
            if records:
                logger.info("Replaying %d spooled messages from %s", len(records), segment)
            self._replaying += 1
            settled = self._segment_settler(segment, handle, len(records))
            for record in records:
                callback = self._delivery_callback(record.message, settled)
                if not self.producer.send(record.message, callback):
                    self._transient_local(record.message, settled)

    def _segment_settler(self, segment: Path, handle: Any, total: int) -> Settled:
        left = [total]

        def finish() -> None:
            segment.unlink(missing_ok=True)
            handle.close()
            self._replaying -= 1

        def settled(outcome: str) -> None:
            left[0] -= 1
            if outcome == "delivered":
                self._count("kafka/replayed", 1)
            if left[0] == 0:
                finish()

        if total == 0:
            finish()
        return settled

    def _transient_local(self, message: OutgoingMessage, on_settled: Settled) -> None:
        """The local queue is full during a replay: keep the message spooled."""
        self.spool.append(message, "replay_buffer_full")
        on_settled("spooled")

    async def drain(self, timeout: float) -> int:
        """Wait up to ``timeout`` for every message's report; spool what is left (each left
        message reports ``_PURGE_QUEUE`` and settles as spooled). Returns the number spooled."""
        left = await self.producer.drain(timeout)
        if left:
            self.producer.purge()
        return left

    async def close(self, timeout: float) -> int:
        """``drain``, then seal the spool. Returns the number spooled."""
        left = await self.drain(timeout)
        self.spool.seal()
        self._dead_letters.close()
        return left


def _settle(on_settled: Settled | None, outcome: str) -> None:
    if on_settled is not None:
        on_settled(outcome)
