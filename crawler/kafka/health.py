"""Whether Kafka answers, and librdkafka's connection noise summarised (no Scrapy imports).

``BrokerHealth`` records an outage from the first sign of one (a broker-down error, a
transient delivery failure, a failed topic check or probe) until the broker answers again (a
delivery, or a metadata probe that finds every partition led). It logs one line when the
broker becomes unreachable, with the reason, and one when it answers again; the connection
errors in between are only counted (``kafka/connection_errors``).

It is also librdkafka's ``logger``: connection failures (``FAIL``, ``REQTMOUT``, ``ERROR``
lines, hundreds a minute while a broker refuses connections) go to DEBUG; every other line to
the ``crawler.kafka.librdkafka`` logger at its own level.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)
librdkafka_logger = logging.getLogger("crawler.kafka.librdkafka")

Count = Callable[[str, int], None]

CONNECTION_FACILITIES = frozenset({"FAIL", "REQTMOUT", "ERROR"})


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

    def outage_seconds(self) -> float:
        """How long Kafka has not answered (0 when it does)."""
        return 0.0 if self.down_since is None else self._clock() - self.down_since

    def failed(self, reason: str, since: float | None = None) -> None:
        """Kafka did not answer (``since``: when it last did, default now)."""
        if self.down_since is not None:
            return
        self.down_since = self._clock() if since is None else since
        self._count("kafka/unreachable", 1)
        logger.warning(
            "Kafka unreachable at %s (%s): items wait in the producer and the spool until it "
            "answers; connection errors are counted in kafka/connection_errors",
            self.bootstrap_servers,
            reason,
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
            "Kafka answers again after %.1fs (%d connection errors)",
            self._clock() - self.down_since,
            self._errors,
        )
        self.down_since = None
        self.spool_failing = False
        self._errors = 0

    # -- librdkafka's logger ------------------------------------------------------------------

    def log(self, level: int, fmt: str, *args: Any) -> None:
        """confluent-kafka calls ``log(level, "%s [%s] %s", facility, client, text)``."""
        facility = str(args[0]) if args else ""
        if facility in CONNECTION_FACILITIES:
            librdkafka_logger.debug(fmt, *args)
        else:
            librdkafka_logger.log(level, fmt, *args)
