"""Whether Kafka answers, and librdkafka's connection noise summarised (no Scrapy imports).

``BrokerHealth`` records an outage from the first sign of one (a broker-down error, a
transient delivery failure, a failed topic check or probe) until the broker answers again (a
delivery, or a metadata probe that finds every partition led). It logs one line when the
broker becomes unreachable, with the reason, and one when it answers again; the connection
errors in between are only counted (``kafka/connection_errors``).

``LIBRDKAFKA_LOG`` is every client's librdkafka ``logger`` (confluent-kafka's config key):
each line goes to the ``crawler.kafka.librdkafka`` logger instead of raw to stderr, at its own
level except two kinds of noise: connection failures (``FAIL``, ``REQTMOUT``, ``ERROR``
lines, hundreds a minute while a broker refuses connections) go to DEBUG, and what librdkafka
retries by itself (``GETPID ... Failed to acquire idempotence PID ...: retrying`` at every
start against a broker still loading) to INFO.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

logger = logging.getLogger(__name__)
librdkafka_logger = logging.getLogger("crawler.kafka.librdkafka")

Count = Callable[[str, int], None]

CONNECTION_FACILITIES = frozenset({"FAIL", "REQTMOUT", "ERROR"})
RETRIED_FACILITIES = frozenset({"GETPID"})  # librdkafka says ": retrying" and does


def librdkafka_level(level: int, facility: str, text: str) -> int:
    """The Python logging level of one librdkafka line (``level`` as confluent-kafka maps it)."""
    if facility in CONNECTION_FACILITIES:
        return logging.DEBUG
    if facility in RETRIED_FACILITIES and text.rstrip().endswith("retrying"):
        return min(level, logging.INFO)
    return level


class LibrdkafkaLog:
    """A confluent-kafka ``logger``: it calls ``log(level, "%s [%s] %s", facility, client,
    text)`` from ``poll()``, on the thread that polls."""

    def log(self, level: int, fmt: str, *args: Any) -> None:
        facility, text = (str(args[0]), str(args[-1])) if args else ("", "")
        librdkafka_logger.log(librdkafka_level(level, facility, text), fmt, *args)


LIBRDKAFKA_LOG = LibrdkafkaLog()


class OutageWords(NamedTuple):
    """How an outage is said, in every log line and status that names one."""

    away: str  # what is wrong
    waits_for: str  # what the crawl waits for
    back: str  # what Kafka does when it is over


UNREACHABLE = OutageWords("Kafka unreachable", "Kafka answers", "answers again")
MISSING_TOPIC = OutageWords(
    "Kafka has no topic for some items",
    "Kafka has the topic (see the ERROR naming it)",
    "takes items again",
)


def outage_words(missing_topic: bool) -> OutageWords:
    """An outage that began with a topic Kafka does not have, or a broker away."""
    return MISSING_TOPIC if missing_topic else UNREACHABLE


class BrokerHealth:
    def __init__(
        self, bootstrap_servers: str, count: Count, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._count = count
        self._clock = clock
        self.down_since: float | None = None
        self.spool_failing = False  # a spool write failed during this outage
        self._errors = 0  # connection errors during this outage
        self.missing_topic = False  # this outage began with a topic Kafka does not have

    def outage_seconds(self) -> float:
        """How long Kafka has not answered (0 when it does)."""
        return 0.0 if self.down_since is None else self._clock() - self.down_since

    def failed(
        self, reason: str, since: float | None = None, *, missing_topic: bool = False
    ) -> None:
        """Kafka did not answer (``since``: when it last did, default now), or answered that it
        has no topic for a message (``missing_topic``: the ERROR naming the topic is the
        sender's; the crawl waits for it as for a broker away, up to ``KAFKA_MAX_OUTAGE``)."""
        if self.down_since is not None:
            if not (self.missing_topic and not missing_topic):
                return
            # an outage that began with a missing topic: the broker is away now too
        else:
            self.down_since = self._clock() if since is None else since
            self._count("kafka/unreachable", 1)
        self.missing_topic = missing_topic
        words = outage_words(missing_topic)
        logger.warning(
            "%s at %s (%s): items wait until %s (a new topic's for its check, the others in the "
            "producer and the spool); connection errors are counted in kafka/connection_errors",
            words.away,
            self.bootstrap_servers,
            reason,
            words.waits_for,
        )

    def connection_error(self, reason: str) -> None:
        self._errors += 1
        self._count("kafka/connection_errors", 1)
        self.failed(reason)

    def spool_failed(self) -> bool:
        """A spool write failed; True the first time in this outage (log it then)."""
        first = not self.spool_failing
        self.spool_failing = True
        return first

    def answered(self) -> None:
        """The broker answered (a delivery or a probe): the outage, if any, is over."""
        if self.down_since is None:
            return
        logger.warning(
            "Kafka %s after %.1fs (%d connection errors)",
            outage_words(self.missing_topic).back,
            self._clock() - self.down_since,
            self._errors,
        )
        self.down_since = None
        self.spool_failing = False
        self._errors = 0
