"""Reading one node's assigned partitions of the backlog topic back into Redis (no Scrapy
imports; the whole cycle: ``crawler.frontier.backlog``).

While a part holds fewer than half its bound, its partition is read, at most the room under
the bound, and ``spill_back.lua`` queues the requests again (at the tail of their levels, no
dedup: they were recorded when first queued) and moves the part's next offset to read back
past them (``{<part>}:backlog:read``), which takes them off its backlog count, all at once;
only then is the offset committed. A node that dies in between leaves the offset uncommitted:
the next reader reads those messages again, and the script skips them (below the next offset),
so they are neither queued nor counted twice. A message that is not a spilled request
(``crawler.frontier.backlog_topic``) becomes a failure record in the same call, so it stops
nothing, now or after a restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, fields

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from crawler.frontier import codec
from crawler.frontier.backlog_settings import BacklogSettings
from crawler.frontier.backlog_topic import UnreadableMessage, read_back
from crawler.frontier.keys import FrontierKeys
from crawler.lua import frontier_script
from crawler.redis_connection import AsyncRedis

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Refilled:
    requests: int = 0  # queued in Redis again
    read_errors: int = 0  # errors the consumer reported instead of messages
    unreadable: int = 0  # messages that were not spilled requests: failed, with a record each
    skipped: int = 0  # read again after a reader died before committing them: queued already
    lost: int = 0  # never read back: gone from the topic before they were (its retention)
    topic_lost: int = 0  # waited in a topic made again (deleted by hand) before it was found
    # written all the same after a spill had put their requests back in the queue: skipped
    requeued: int = 0

    def __add__(self, other: Refilled) -> Refilled:
        return Refilled(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def say_topic_lost(topic: str, lost: int) -> None:
    """The one word for requests lost with a backlog topic made again, whoever found it."""
    logger.error(
        "Backlog topic %s was made again (deleted by hand?) while %d requests waited in it: "
        "they are lost, and the pages only they led to are not crawled either; the crawl goes "
        "on without them",
        topic,
        lost,
    )


class Refill:
    def __init__(
        self,
        redis: AsyncRedis,
        parts: Sequence[FrontierKeys],
        settings: BacklogSettings,
        node_id: str,
    ) -> None:
        self.parts = tuple(parts)
        self.settings = settings
        self.node_id = node_id
        self._back = redis.register_script(frontier_script("queue", "backlog_count", "spill_back"))

    async def assigned(self, consumer: Consumer, depths: list[int]) -> Refilled:
        """Read back, with the node's ``consumer``, into its assigned parts under half their
        bound (``depths``: each part's queued requests)."""
        queue_max = self.settings.queue_max
        assigned = await asyncio.to_thread(consumer.assignment)
        low = max(1, queue_max // 2)  # a bound of 1: refill once it is empty
        wanted = [tp for tp in assigned if depths[tp.partition] < low]
        full = [tp for tp in assigned if depths[tp.partition] >= low]
        if full:
            await asyncio.to_thread(consumer.pause, full)
        if wanted:
            await asyncio.to_thread(consumer.resume, wanted)
        room = sum(queue_max - depths[tp.partition] for tp in wanted)
        # At most the room under the bound (nothing read back is spilled again); one while
        # there is none, so the group's assignments still go on (they happen in consume).
        count = min(self.settings.batch, max(1, room))
        messages = await asyncio.to_thread(consumer.consume, count, 0.2 if room else 0)
        by_part: dict[int, list[Message]] = {}
        errors: list[KafkaError] = []  # events, not records: the records around them are read
        for message in messages:
            error, part = message.error(), message.partition()
            if error is not None:
                errors.append(error)
            elif part is not None and part < len(self.parts):
                by_part.setdefault(part, []).append(message)
        if errors:
            logger.warning("Backlog read: %d Kafka errors, the first: %s", len(errors), errors[0])
        open_parts = {tp.partition for tp in wanted}
        read = Refilled(read_errors=len(errors))
        left = dict(by_part)  # fetched, not queued yet: read again if this step is cut short
        try:
            for part, fetched in by_part.items():
                # beyond the part's room (or read while it had none): read again later, not now
                room_left = queue_max - depths[part] if part in open_parts else 0
                found = fetched[:room_left]
                if found:
                    read += await self._queue_again(consumer, part, found)
                del left[part]  # queued: the next reader skips them (the part's next offset)
                if len(fetched) > room_left:
                    await self._seek(consumer, part, fetched[room_left])
                if found:
                    done = TopicPartition(self.settings.topic, part, (found[-1].offset() or 0) + 1)
                    await asyncio.to_thread(consumer.commit, offsets=[done], asynchronous=False)
        finally:  # a Redis outage, a Kafka error, a stop: the consumer has moved past these
            for part, fetched in left.items():
                await asyncio.shield(self._seek(consumer, part, fetched[0]))
        return read

    async def _seek(self, consumer: Consumer, part: int, first: Message) -> None:
        """Read partition ``part`` again from message ``first`` on, at the next consume."""
        back = TopicPartition(self.settings.topic, part, first.offset() or 0)
        await asyncio.to_thread(consumer.seek, back)

    async def _queue_again(self, consumer: Consumer, part: int, found: list[Message]) -> Refilled:
        """Queue the requests of ``found`` (one partition's messages, in offset order) again,
        record the messages that are not spilled requests as failed, in one call."""
        keys = self.parts[part]
        entries: list[str | bytes] = []
        for message in found:
            offset, key = str(message.offset()), message.key() or b""
            try:
                score, request = read_back(message.value() or b"")
            except UnreadableMessage as exc:
                record = codec.failure_json("refill/undecodable", self.node_id, exc.kept, str(exc))
                entries += [offset, key, "", record]
                continue
            entries += [offset, key, score, codec.stored(request, self.settings.compress)]
        topic = self.settings.topic
        # as the last fetch gave it (no request to the broker); unknown: -1
        watermarks = await asyncio.to_thread(
            consumer.get_watermark_offsets, TopicPartition(topic, part), cached=True
        )
        high = watermarks[1] if watermarks else -1
        queue = [keys.queue_levels, keys.queue_count]
        offsets = [keys.backlog_read, keys.backlog_written]
        queued, failed, skipped, restarted, gap, topic_lost, requeued = await self._back(
            keys=[*queue, keys.backlog, keys.failed, *offsets, keys.backlog_unsure],
            args=[topic, max(-1, high), f"backlog-{part}-", *entries],
        )
        if topic_lost:
            say_topic_lost(topic, int(topic_lost))
        elif restarted:
            logger.warning(
                "Backlog topic %s (partition %d) ends before the offset read back from it: it "
                "was made again, and is read from its start",
                topic,
                part,
            )
        if gap:
            logger.error(
                "%d messages of %s (partition %d) were never read back: their requests are lost "
                "(deleted by the topic's retention? it must keep a crawl's backlog until it is "
                "read)",
                gap,
                topic,
                part,
            )
        if failed:
            logger.error(
                "%d messages read back from %s (partition %d) are not spilled requests: failed, "
                "with their records in %s",
                failed,
                topic,
                part,
                keys.failed,
            )
        if skipped:
            logger.info(
                "%d messages read back from %s (partition %d) were queued already by a reader "
                "that stopped before committing them: skipped",
                skipped,
                topic,
                part,
            )
        if requeued:
            logger.warning(
                "%d messages read back from %s (partition %d) are of requests queued in Redis "
                "already (their spill timed out or was purged once sent, or their leases were "
                "reclaimed by another node before Kafka acknowledged them): skipped, so each is "
                "crawled once",
                requeued,
                topic,
                part,
            )
        return Refilled(
            int(queued), 0, int(failed), int(skipped), int(gap), int(topic_lost), int(requeued)
        )
