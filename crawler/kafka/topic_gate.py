"""``TopicGate``: a replayed message waits for its topic's check, as an item does (no Scrapy
imports).

Messages spooled in an earlier run (or by another node) may be addressed to a topic that
does not exist yet. Sent as they are, a broker that creates topics on first use would create
it with its own defaults, not ``KAFKA_TOPIC_PARTITIONS``/``KAFKA_TOPIC_CONFIG``. So the first
replayed message of a topic starts its check (``TopicChecker.ready``: the topic and its
dead-letter topic, created as configured), and the topic's messages are sent once it ends; a
dead letter waits for the check of the topic it was meant for (``dlq_original_topic``). A
check that does not end within the patience (a replay interval) lets them go as they are.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from crawler.kafka.dead_letter_writer import ORIGINAL_TOPIC_HEADER
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.replay import Settled

logger = logging.getLogger(__name__)

Check = Callable[[str], Awaitable[None]]
Send = Callable[[OutgoingMessage, Settled], None]


def checked_topic(message: OutgoingMessage) -> str:
    """The topic whose check covers ``message``: its own, or for a dead letter the original
    one (a check creates a topic and its dead-letter topic together)."""
    return message.header(ORIGINAL_TOPIC_HEADER) or message.topic


class TopicGate:
    def __init__(self, check: Check, patience: float) -> None:
        self._check = check
        self._patience = patience  # seconds a check may take before its messages go anyway
        self._checked: set[str] = set()
        self._waiting: dict[str, list[tuple[OutgoingMessage, Settled]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, message: OutgoingMessage, settled: Settled, send: Send) -> None:
        """``send`` the message now if its topic was checked, else once its check ends."""
        topic = checked_topic(message)
        if topic in self._checked:
            send(message, settled)
            return
        if topic not in self._waiting:
            task = asyncio.ensure_future(self._open(topic, send))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._waiting.setdefault(topic, []).append((message, settled))

    def waiting(self) -> int:
        """Messages waiting for their topic's check."""
        return sum(len(messages) for messages in self._waiting.values())

    async def _open(self, topic: str, send: Send) -> None:
        try:
            await asyncio.wait_for(self._check(topic), self._patience)
        except TimeoutError:  # a check that retries on (a partition without a leader): the
            logger.warning(  # messages are not held, nor every later replay with them
                "Topic %s not checked within %.0fs: its spooled messages go as they are "
                "(what Kafka does not take is spooled again)",
                topic,
                self._patience,
            )
        except Exception as exc:  # noqa: BLE001 - a refused topic: Kafka answers each message
            logger.warning(
                "Topic %s not checked (%s): its spooled messages go as they are", topic, exc
            )
            self._checked.add(topic)
        else:
            self._checked.add(topic)
        for message, settled in self._waiting.pop(topic, []):
            send(message, settled)

    async def close(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the checks under way (a closing checker ends them)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=max(timeout, 0.1))
