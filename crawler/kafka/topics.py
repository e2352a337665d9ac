"""Topics checked (and created) before their first message, retried until Kafka answers
(no Scrapy imports).

Every message of a topic waits for one shared check: the topic and its dead-letter topic
exist (created with the configured partitions, replication and config if missing) and every
partition has a leader. A message Kafka answers it has no topic for (deleted while the crawl
ran) has the check run again. A broker that does not answer is an outage, not a permanent failure:
the check is retried with backoff (``kafka/topic_check_failed``), the outage is recorded, and
the messages wait, so a broker late at start dead-letters nothing. A broker that answers
and refuses the topic (a replication factor it cannot give, a config or name it rejects, no
right to create it) will refuse it again: the check raises ``TopicRefused`` at once, naming
the setting to change (``kafka/topic_refused/<code>``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from crawler.kafka.config import TopicSpec
from crawler.kafka.health import BrokerHealth, Count
from crawler.kafka.producer import ItemProducer

logger = logging.getLogger(__name__)

CHECK_TIMEOUT = 10.0  # seconds for one check
RETRY_FIRST, RETRY_MAX = 1.0, 10.0  # seconds between checks, doubling


TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # what Kafka takes as a topic's name
TOPIC_NAME_RULE = "at most 249 of [a-zA-Z0-9._-]"  # the same, for messages


def topic_from_template(setting: str, template: str, spider: str) -> str:
    """``template`` (the setting ``setting``) with ``{spider}`` filled in; ValueError naming
    the setting when it holds another placeholder or gives a name Kafka cannot take."""
    try:
        topic = template.format(spider=spider)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise ValueError(
            f"{setting}={template!r} is not a topic name with at most {{spider}} in it "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if TOPIC_NAME.fullmatch(topic):
        return topic
    if not TOPIC_NAME.fullmatch(template.format(spider="s")):  # no spider's name mends it
        raise ValueError(
            f"{setting}={template!r} gives the topic {topic!r}, which Kafka cannot name "
            f"({TOPIC_NAME_RULE}) whatever the spider's name: change {setting}"
        )
    raise ValueError(
        f"{setting} gives spider {spider!r} the topic {topic!r}, which Kafka cannot name "
        f"({TOPIC_NAME_RULE}): rename the spider, or change {setting}"
    )


# Answers of a broker that will not change while it runs: the error code -> what to change
REFUSALS = {
    KafkaError.INVALID_REPLICATION_FACTOR: "KAFKA_TOPIC_REPLICATION (at most the brokers)",
    KafkaError.INVALID_PARTITIONS: "KAFKA_TOPIC_PARTITIONS",
    KafkaError.INVALID_CONFIG: "KAFKA_TOPIC_CONFIG",
    KafkaError.POLICY_VIOLATION: "KAFKA_TOPIC_PARTITIONS, KAFKA_TOPIC_REPLICATION or "
    "KAFKA_TOPIC_CONFIG (the broker's policy)",
    KafkaError.TOPIC_EXCEPTION: "KAFKA_TOPIC_TEMPLATE or the item's item_type (a topic name is "
    f"{TOPIC_NAME_RULE})",
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "the ACLs of the principal in KAFKA_PRODUCER_CONFIG, "
    "or create the topic beforehand (KAFKA_CREATE_TOPICS=False)",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "the ACLs of the principal in "
    "KAFKA_PRODUCER_CONFIG, or create the topic beforehand (KAFKA_CREATE_TOPICS=False)",
}


# TOPIC_EXCEPTION for a name whose '.' and '_' are another topic's '_' and '.' (Kafka's metrics
# names take them as one): the name is valid, the spider's or the template's must change.
COLLISION = (
    "the spider's name, KAFKA_TOPIC_TEMPLATE, KAFKA_DLQ_TOPIC_TEMPLATE or the item's item_type "
    "(whichever made the name), so that the topic differs from the existing one by more than "
    "'.' against '_' (Kafka takes them as one in topic names)"
)


class TopicRefused(Exception):
    """The broker answered and refused a topic: it will refuse it again."""

    finish_reason = "kafka_topic_refused"  # the spider's finish reason: the node stops

    def __init__(self, topic: str, code: str, error: str, change: str) -> None:
        super().__init__(f"Kafka refuses topic {topic} ({code}: {error}): change {change}")
        self.code = code


class TopicChecker:
    def __init__(
        self,
        producer: Callable[[], ItemProducer],
        spec: TopicSpec,
        health: BrokerHealth,
        count: Count,
        give_up_after: float,
    ) -> None:
        self._producer = producer
        self._spec = spec
        self._health = health
        self._count = count
        self._give_up_after = give_up_after  # s: librdkafka's message.timeout.ms
        self._checks: dict[str, asyncio.Future[None]] = {}
        self._released = False  # closing: no more checks
        self._let_go = asyncio.Event()  # set: messages do not wait for their topic's check

    async def ready(self, topic: str) -> None:
        """Return once ``topic`` is usable, or messages are let go (``follow()``,
        ``release()``); waits (without blocking) while Kafka is away."""
        check = self.start(topic)
        if check is not None and not check.done() and not self._let_go.is_set():
            let_go: asyncio.Future[Any] = asyncio.ensure_future(self._let_go.wait())
            try:
                await asyncio.wait({check, let_go}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                let_go.cancel()
        if check is not None and check.done() and not check.cancelled():
            check.result()  # raises what the check raised (not a Kafka outage)

    def start(self, topic: str) -> asyncio.Future[None] | None:
        """The check of ``topic``, started if it was not (also for a message that met a topic
        Kafka does not know, replayed from the spool); None once closing."""
        if topic not in self._checks:
            if self._released:
                return None
            check = self._checks[topic] = asyncio.ensure_future(self._check(topic))
            check.add_done_callback(_retrieved)
        return self._checks[topic]

    def unknown(self, topic: str) -> None:
        """Kafka answered a message of ``topic`` that it has no such topic: a check that had
        passed is run again (the topic was deleted: it is made again, as configured, and the
        spooled messages find it), one under way is left to finish."""
        check = self._checks.get(topic)
        if check is not None and check.done() and not check.cancelled() and not check.exception():
            del self._checks[topic]
        self.start(topic)

    def follow(self, paused: bool) -> None:
        """At every poll. Waiting messages go on, to the spool as any message Kafka does not
        take, while the crawl is paused for Kafka (a paused node whose crawl is over closes)
        or Kafka has not answered for ``give_up_after`` (as long as librdkafka holds a message
        before it is spooled: a node whose broker is away from its start crawls on into the
        spool); once Kafka answers, messages of a topic not checked yet wait again. The
        checks go on."""
        if paused or self._health.outage_seconds() > self._give_up_after:
            self._let_go.set()
        elif not self._released:
            self._let_go.clear()

    def release(self) -> None:
        """Closing: let every waiting message go (what Kafka does not take is spooled)."""
        self._released = True
        self._let_go.set()
        for check in self._checks.values():
            check.cancel()

    async def _check(self, topic: str) -> None:
        names = [topic, self._spec.dlq_template.format(topic=topic)]
        wait = RETRY_FIRST
        while True:
            try:
                created = await self._producer().ensure_topics(
                    names,
                    self._spec.partitions,
                    self._spec.replication,
                    self._spec.config,
                    timeout=CHECK_TIMEOUT,
                )
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() in REFUSALS:
                    self._health.answered()
                    change = REFUSALS[error.code()]
                    if "collides with existing topic" in error.str():
                        change = COLLISION
                    raise TopicRefused(topic, error.name(), error.str(), change) from exc
                self._count("kafka/topic_check_failed", 1)
                self._health.failed(f"checking topic {topic}: {exc.args[0].str()}")
                logger.debug("Kafka topic %s not checked (%s): again in %.0fs", topic, exc, wait)
                await asyncio.sleep(wait)
                wait = min(wait * 2, RETRY_MAX)
                continue
            self._health.answered()
            if created:
                logger.info("Created Kafka topics %s", ", ".join(created))
            return


def _retrieved(check: asyncio.Future[None]) -> None:
    """Marks a refusal seen: ``ready()`` raises it to the topic's next message; a replayed
    message (no one waits on its check) meets the sender's "no topic" error instead of
    asyncio's "exception was never retrieved"."""
    if not check.cancelled():
        check.exception()
