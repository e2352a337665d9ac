"""``ItemSender``: deliver messages to Kafka and account for every one (no Scrapy imports).

Every message ends in exactly one settled outcome, reported to its
``on_settled`` callback:

- ``delivered``: acknowledged by the broker, at an offset (a report without one, which
  librdkafka gives a batch that failed once a batch sent after it succeeded, is no proof: the
  message is spooled and sent again);
- ``spooled``: a transient failure (broker unreachable, timed out, purged at
  shutdown); written to the local spool (fsynced), replayed later;
- ``dead_lettered``: a permanent failure (too large, invalid); sent to the
  dead-letter topic, or to the local dead-letter file if even that refuses it for good (a
  dead letter the dead-letter topic does not take for now is spooled, addressed to it);
- ``requeue``: it could not even be spooled (disk error): the caller should
  crawl it again.

A fatal producer error recreates the producer; its queued messages are purged
into the spool and replayed through the new one.

Outages (``BrokerHealth``): while Kafka is recorded as away, or messages wait with no
delivery report for ``STALL_AFTER`` seconds, the broker is probed (metadata) every
``PROBE_INTERVAL``; the outage ends when a probe finds it answering or a message is
delivered, and the spool is replayed then. A topic ``produce()`` does not know yet (metadata
lagging behind a new topic or a late broker) is a transient failure, never a dead letter; the
``unknown_topic`` callback hears of it (the pipeline starts the topic's check, which creates
it, so a spooled message whose topic was never created goes out on a later replay).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from crawler.kafka.dead_letter_writer import DeadLetterWriter, is_dead_letter, settle
from crawler.kafka.errors import (
    BATCH_ERRORS,
    BROKER_DOWN_ERRORS,
    LOCAL_ERRORS,
    UNKNOWN_TOPIC_ERRORS,
    error_reason,
    is_permanent,
    unproven,
)
from crawler.kafka.health import BrokerHealth, Count
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer
from crawler.kafka.replay import ReplaySettler, Settled, SpoolReplay
from crawler.kafka.spool import Spool
from crawler.kafka.topic_gate import Check, TopicGate, checked_topic

logger = logging.getLogger(__name__)

POLL_EVERY = 32  # serve delivery reports every N sends (and on every periodic poll)
PROBE_INTERVAL = 2.0  # seconds between metadata probes while Kafka is away or stalled
PROBE_TIMEOUT = 5.0  # seconds one probe waits for the broker
STALL_AFTER = 10.0  # messages pending with no delivery report this long: probe the broker
# said with a message too large (librdkafka's own limit refuses it before any broker does)
TOO_LARGE = (
    " (a message of %d bytes: to send it, raise librdkafka's message.max.bytes (KAFKA_PRODUCER_"
    "CONFIG, 1000000 by default) and the topic's max.message.bytes (KAFKA_TOPIC_CONFIG))"
)


@dataclass(frozen=True, slots=True)
class SenderConfig:
    producer_config: Mapping[str, Any]
    dlq_topic_template: str
    spool_dir: Path
    dead_letter_file: Path
    node_id: str
    crawl_id: str  # the node's: a replayed message of another is credited to that crawl
    backpressure_wait: float = 0.05
    replay_interval: float = 30.0


class ItemSender:
    def __init__(
        self,
        config: SenderConfig,
        count: Count,
        *,
        producer_factory: Callable[[Mapping[str, Any]], ItemProducer] = ItemProducer,
        observe_delivery: Callable[[float], None] | None = None,
        unknown_topic: Callable[[str], object] | None = None,
        topic_check: Check | None = None,
    ) -> None:
        self.config = config
        # replayed messages wait for their topic's check (created as configured), as items do
        self._gate = (
            TopicGate(topic_check, config.replay_interval) if topic_check is not None else None
        )
        self._count = count
        self._unknown_topic = unknown_topic  # told of a topic Kafka does not know (to create it)
        self._observe_delivery = observe_delivery  # seconds from send() to the broker's ack
        self._factory = producer_factory
        self._fatal: KafkaError | None = None
        self.health = BrokerHealth(str(config.producer_config.get("bootstrap.servers")), count)
        self.producer = self._new_producer()
        self.spool = Spool(config.spool_dir, config.node_id)
        self._replay = SpoolReplay(self.spool, count, config.crawl_id)
        self._dead_letters = DeadLetterWriter(
            config.dlq_topic_template,
            config.dead_letter_file,
            lambda: self.producer,
            count,
            transient=self._transient,
            unproven=self._unproven,
        )
        self._topics: set[str] = set()  # topics sent to: a probe checks their leaders
        self._missing_topics: set[str] = set()  # topics Kafka said it has not: logged once
        self._unproven_said = False  # a delivery without an offset: said once per node
        self._last_replay = 0.0
        self._last_report = time.monotonic()  # a delivery report came, or nothing was pending
        self._last_probe = 0.0
        self._probe: asyncio.Future[None] | None = None
        self._unpolled = 0  # sends since the last poll

    def _new_producer(self) -> ItemProducer:
        config = {**self.config.producer_config, "error_cb": self._on_error}
        return self._factory(config)

    # -- sending ------------------------------------------------------------------------------

    async def send(self, message: OutgoingMessage, on_settled: Settled | None = None) -> None:
        """Enqueue ``message``; waits (without blocking) while the local queue is full."""
        callback = self._delivery_callback(message, on_settled)
        self._topics.add(message.topic)
        while True:
            try:
                accepted = self.producer.send(message, callback)
            except KafkaException as exc:
                self._refused(message, exc.args[0], on_settled)
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
        self, message: OutgoingMessage, on_settled: Settled | None, *, alone: bool = False
    ) -> Callable[[KafkaError | None, Message], None]:
        sent = time.monotonic()

        def report(error: KafkaError | None, delivered: Message) -> None:
            self._last_report = time.monotonic()
            if unproven(error, delivered):
                self.health.answered()
                self._unproven(message, on_settled)
            elif error is None:
                if self._observe_delivery is not None:
                    self._observe_delivery(self._last_report - sent)
                self.health.answered()
                self._count("kafka/delivered", 1)
                settle(on_settled, "delivered")
            elif not alone and error.code() in BATCH_ERRORS:
                self._send_alone(message, error, on_settled)
            elif is_permanent(error):
                self._permanent(message, error, on_settled)
            else:
                self._transient(message, error, on_settled)

        return report

    def _unproven(self, message: OutgoingMessage, on_settled: Settled | None) -> None:
        """librdkafka reported ``message`` delivered without an offset (``errors.unproven``):
        spooled, and sent again (at least once). Not an outage: the broker answered."""
        self._count("kafka/unproven_ack", 1)
        if not self._unproven_said:
            self._unproven_said = True
            logger.warning(
                "Kafka's client reported a message delivered without an offset (librdkafka's "
                "implicit acknowledgement of a batch that failed): it may not be in %s, so it "
                "is sent again through the spool and may be there twice (kafka/unproven_ack "
                "counts such messages)",
                message.topic,
            )
        self._spool(message, "unproven_ack", on_settled)

    def _send_alone(
        self, message: OutgoingMessage, error: KafkaError, on_settled: Settled | None
    ) -> None:
        """The broker refused the batch ``message`` was in: perhaps for another message of it.
        Sent again in a batch of its own; refused again, it is dead-lettered."""
        self._count(f"kafka/resent_alone/{error_reason(error)}", 1)
        callback = self._delivery_callback(message, on_settled, alone=True)
        try:
            accepted = self.producer.send(message, callback, alone=True)
        except KafkaException as exc:
            self._refused(message, exc.args[0], on_settled)
            return
        if not accepted:  # the local queue is full: spooled, sent again at the next replay
            self._spool(message, "resend_buffer_full", on_settled)

    def _refused(
        self, message: OutgoingMessage, error: KafkaError, on_settled: Settled | None
    ) -> None:
        """``produce()`` raised: transient or permanent by its error."""
        if is_permanent(error, at_produce=True):
            self._permanent(message, error, on_settled)
        else:
            self._transient(message, error, on_settled)

    def _transient(
        self, message: OutgoingMessage, error: KafkaError, on_settled: Settled | None
    ) -> None:
        reason = error_reason(error)
        self._count(f"kafka/failed/{reason}", 1)
        missing_topic = error.code() in UNKNOWN_TOPIC_ERRORS
        if missing_topic:
            self._topic_missing(message)
        # no outage when purged by us (closing, a new producer) or the local queue is full
        if error.code() not in LOCAL_ERRORS:
            self.health.failed(reason, missing_topic=missing_topic)
        self._spool(message, reason, on_settled)

    def _topic_missing(self, message: OutgoingMessage) -> None:
        """Kafka has no topic for ``message`` (yet): the check that creates it starts (for a
        dead letter, its original topic's, which creates the dead-letter topic too, not one
        of its own); the first time, an ERROR line."""
        topic = message.topic
        if self._unknown_topic is not None:
            self._unknown_topic(checked_topic(message))
        if topic not in self._missing_topics:
            self._missing_topics.add(topic)  # said once per topic and node
            logger.error(
                "Kafka has no topic %s (yet): its messages wait in the spool and are sent again "
                "once it exists. With KAFKA_CREATE_TOPICS=False, create it (KAFKA_TOPIC_TEMPLATE "
                "names it), or check the name",
                topic,
            )

    def _spool(self, message: OutgoingMessage, reason: str, on_settled: Settled | None) -> None:
        try:
            self.spool.append(message, reason)
        except OSError as exc:
            self._count("kafka/spool_error", 1)
            if self.health.spool_failed():
                replayed = isinstance(on_settled, ReplaySettler)  # also `crawler spool replay`
                logger.error(
                    "Cannot spool messages (%s): %s; %s (kafka/spool_error counts them)",
                    reason,
                    exc,
                    "their segment is kept for a later replay"
                    if replayed
                    else "their requests go back to the queue",
                )
            settle(on_settled, "requeue")
            return
        if isinstance(on_settled, ReplaySettler):  # spooled before: counted then
            self._count("kafka/respooled", 1)
        else:
            self._count("kafka/spooled", 1)
            if is_dead_letter(message):
                self._count("kafka/dead_letter_spooled", 1)
        settle(on_settled, "spooled")

    def _permanent(
        self, message: OutgoingMessage, error: KafkaError, on_settled: Settled | None
    ) -> None:
        reason = error_reason(error)
        self._count(f"kafka/failed/{reason}", 1)
        logger.error(
            "Kafka refused a message for %s (%s): %s%s",
            message.topic,
            reason,
            error.str(),
            TOO_LARGE % len(message.value) if error.code() == KafkaError.MSG_SIZE_TOO_LARGE else "",
        )
        self.dead_letter(message, reason, error.str(), on_settled)

    def dead_letter(
        self, message: OutgoingMessage, reason: str, error: str, on_settled: Settled | None
    ) -> None:
        """Send to the dead-letter topic; to the spool if it does not take it for now, to
        the local file if it refuses it for good."""
        self._dead_letters.send(message, reason, error, on_settled)

    # -- periodic work ------------------------------------------------------------------------

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._fatal = error
        elif error.code() in BROKER_DOWN_ERRORS:
            self.health.connection_error(str(error.str()))

    def outage_seconds(self) -> float:
        """How long Kafka has not answered (0 when it does)."""
        return self.health.outage_seconds()

    def poll(self) -> None:
        """Serve delivery reports; recover from fatal errors; probe the broker while it is
        away or stalled; replay the spool when due and Kafka answers."""
        self.producer.poll()
        if self._fatal is not None:
            self._recreate()
        now = time.monotonic()
        if not self.producer.pending():
            self._last_report = now
        self._maybe_probe(now)
        due = now - self._last_replay >= self.config.replay_interval
        if due and not self._replay.running and self.health.down_since is None:
            self._last_replay = now
            if self.spool.has_records():
                self.replay()

    def _maybe_probe(self, now: float) -> None:
        stalled = now - self._last_report >= STALL_AFTER
        if self.health.down_since is None and not stalled:
            return
        if (self._probe is not None and not self._probe.done()) or (
            now - self._last_probe < PROBE_INTERVAL
        ):
            return
        self._last_probe = now
        self._probe = asyncio.ensure_future(self._run_probe(self._last_report))

    async def _run_probe(self, last_report: float) -> None:
        problem = await self.producer.probe(sorted(self._topics), PROBE_TIMEOUT)
        if problem is not None:
            self.health.failed(problem, since=last_report)
        elif self.health.down_since is not None:
            self.health.answered()
            self._last_replay = 0.0  # replay now
        self._last_report = time.monotonic()

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
        self._replay.replay(self._resend)

    def _resend(self, message: OutgoingMessage, settled: Settled) -> None:
        if self._gate is not None:
            self._gate.send(message, settled, self._send_replayed)
        else:
            self._send_replayed(message, settled)

    def waiting(self) -> int:
        """Replayed messages waiting for their topic's check (not yet in the producer)."""
        return self._gate.waiting() if self._gate is not None else 0

    def _send_replayed(self, message: OutgoingMessage, settled: Settled) -> None:
        self._topics.add(message.topic)
        if is_dead_letter(message):  # to its dead-letter topic, never dead-lettered again
            self._dead_letters.resend(message, settled)
            return
        try:
            accepted = self.producer.send(message, self._delivery_callback(message, settled))
        except KafkaException as exc:
            self._refused(message, exc.args[0], settled)
            return
        if not accepted:  # the local queue is full: keep it spooled
            self._spool(message, "replay_buffer_full", settled)

    async def drain(self, timeout: float) -> int:
        """Wait up to ``timeout`` for every message's report; spool what is left (each left
        message reports ``_PURGE_QUEUE`` and settles as spooled). Returns the number spooled."""
        left = await self.producer.drain(timeout)
        if left:
            self.producer.purge()
        return left

    async def close(self, timeout: float) -> int:
        """Replay the spool if Kafka answers, ``drain``, then seal the spool. Returns the
        number spooled."""
        began = time.monotonic()
        if self.health.down_since is None and not self._replay.running and self.spool.has_records():
            self.replay()
        if self._gate is not None:
            await self._gate.close(timeout)
        left = await self.drain(max(0.0, timeout - (time.monotonic() - began)))
        if self._probe is not None:
            self._probe.cancel()
        self.spool.seal()
        self._dead_letters.close()
        return left
