"""Spilling one part's requests beyond ``FRONTIER_QUEUE_MAX`` to the backlog topic (no
Scrapy imports; the whole cycle: ``crawler.frontier.backlog``).

``spill_take.lua`` leases the lowest-priority requests beyond the bound to the node; they are
produced to the part's partition; those the broker acknowledged leave Redis
(``spill_done.lua``), the others go back to the queue. A spill cut short (the node stops,
a send raises) gives every lease it still holds back the same way, so none waits for a lease
timeout (its page would then be crawled twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaError, Message

from crawler.frontier import codec
from crawler.frontier.backlog_outcomes import SpillCounts, SpillOutcomes, Unsettled
from crawler.frontier.backlog_settings import BacklogSettings
from crawler.frontier.backlog_topic import spill_message
from crawler.frontier.client import Finish, FrontierClient
from crawler.frontier.keys import FrontierKeys
from crawler.kafka.errors import unproven
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer
from crawler.lua import frontier_script, text
from crawler.redis_outage import outage_reason

logger = logging.getLogger(__name__)

REPORT_SLACK = 5.0  # seconds past the message timeout a spill waits for librdkafka's reports
SPILL_FENCE_MS = 86_400_000  # a spill's fence is kept a day: a call again comes within an outage
# a message that failed so may have reached the broker all the same (librdkafka's "possibly
# persisted"): its request goes back to the queue, and its message is skipped if read back
UNSURE_ERRORS = frozenset(
    {KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._PURGE_INFLIGHT}
)


def _entries(flat: list[bytes]) -> list[tuple[str, str, bytes]]:
    """spill_take.lua's answer: (lease id, score, body) of each request taken."""
    return [(text(flat[i]), text(flat[i + 1]), bytes(flat[i + 2])) for i in range(0, len(flat), 3)]


class Spill:
    def __init__(
        self,
        clients: Sequence[FrontierClient],
        producer: ItemProducer,
        settings: BacklogSettings,
        lease_ms: int,
    ) -> None:
        self.clients = tuple(clients)
        self.node_id = clients[0].node_id
        self.producer = producer
        self.settings = settings
        # a spill's leases outlast its wait for the broker: one that expired meanwhile would be
        # reclaimed and crawled from Redis while Kafka took its message too
        self.lease_ms = max(lease_ms, round((settings.ack_timeout + REPORT_SLACK + 10) * 1000))
        redis = clients[0].redis
        self._take = redis.register_script(frontier_script("queue", "lease", "spill_take"))
        self._done = redis.register_script(frontier_script("backlog_count", "spill_done"))
        # spills Redis refused to settle (away as they gave their leases back) or a stop cut
        # short: settled first at the next step, with what Kafka said of each message, or
        # their acknowledged requests would be reclaimed from Redis as their leases expire
        # and read back too
        self._unsettled: list[Unsettled] = []
        # the counts of the spills since the last take_counts: a step takes them once it has
        # run through (one that fails after a part spilled leaves them to the next)
        self._counts = SpillCounts()

    @property
    def unsettled(self) -> int:
        """Leases of spills not settled yet (Redis refused, or their give-back runs still)."""
        return sum(len(entry.rest) for entry in self._unsettled)

    async def settle_unsettled(self) -> None:
        """Give back the leases of spills whose settling Redis refused, before anything else
        the node does with the backlog (raises while Redis does): the acknowledged ones leave
        Redis, before their messages are read back or their leases expire. Their counts wait
        in ``take_counts``."""
        while self._unsettled:
            entry = self._unsettled[0]
            spilled: int | None = None
            if entry.pending is not None:  # a give-back under way, or one a stop cut short
                with contextlib.suppress(Exception):  # then given back again, below
                    spilled = await asyncio.shield(entry.pending)
                entry.pending = None
                if spilled is None and entry not in self._unsettled:
                    continue  # its spill gave it up (an error Redis being back would not mend)
            if spilled is None:
                spilled = await self._give_back(entry.keys, entry.rest, entry.out, entry.unsure)
            self._settled(entry, spilled)

    def _settled(self, entry: Unsettled, spilled: int) -> None:
        """``entry``'s leases settled after its spill raised or was cancelled (by the spill, or
        by ``settle_unsettled``): counted once, by whichever comes first."""
        if entry not in self._unsettled:
            return
        self._unsettled.remove(entry)
        out = entry.out
        out.settled.update(entry.rest)
        reclaimed = len(out.reclaimed.intersection(entry.rest))
        refused = max(0, len(entry.rest) - spilled - reclaimed)  # back in the queue
        self._counts += SpillCounts(spilled, refused, 0, len(entry.unsure), len(out.reclaimed))

    def take_counts(self) -> SpillCounts:
        """The counts of the spills since the last call (also of those settled after the step
        that spilled them raised): a step takes them once it has run through."""
        counts, self._counts = self._counts, SpillCounts()
        return counts

    async def part(self, keys: FrontierKeys) -> None:
        """Spill the part's requests beyond the bound (counted in ``take_counts``)."""
        epoch = text(await self.clients[keys.part].redis.get(keys.epoch) or b"")
        take = asyncio.ensure_future(
            self._take(
                keys=[keys.queue_levels, keys.queue_count, keys.seq, keys.leases, keys.inflight],
                args=[self.node_id, self.settings.queue_max, self.settings.batch, self.lease_ms],
            )
        )
        try:
            flat = await asyncio.shield(take)
        except asyncio.CancelledError:  # a stop as the script answers: its leases go back
            # kept while they do: the close settles it, awaiting them past the stop's grace
            cut = Unsettled(keys, [], SpillOutcomes(epoch), [])
            cut.pending = returning = asyncio.ensure_future(self._return_taken(take, cut))
            self._unsettled.append(cut)
            with contextlib.suppress(Exception):  # given back again when settling
                self._settled(cut, await asyncio.shield(returning))
            raise
        entries = _entries(flat)
        if not entries:
            return
        out = SpillOutcomes(epoch)
        try:
            counts = await self._produce(keys, entries, out)
            self._counts += counts  # not `+= await`: the close may count meanwhile
        finally:  # cut short (a stop cancels it, a send raised): no lease of it stays held
            rest = [lease_id for lease_id, _, _ in entries if lease_id not in out.settled]
            if rest:
                # none of their messages is to be written once they are queued again: those
                # the broker was sent may be, all the same (a purge cannot take them back)
                self.producer.purge()
                unsure = [lease_id for lease_id in rest if out.maybe_written(lease_id)]
                giving = asyncio.ensure_future(self._give_back(keys, rest, out, unsure))
                # kept while it runs: a stop may leave this spill cut short (its grace over)
                # and the close settles it, awaiting the give-back under way
                entry = Unsettled(keys, rest, out, unsure, pending=giving)
                self._unsettled.append(entry)
                try:  # cancelled, it goes on: looked at when settling
                    self._settled(entry, await asyncio.shield(giving))
                except Exception as exc:
                    entry.pending = None
                    if outage_reason(exc) is None and entry in self._unsettled:
                        self._unsettled.remove(entry)  # kept only to be settled once Redis is back
                    raise
                if unsure:
                    logger.warning(
                        "A spill from %s was cut short: %d requests sent to Kafka without an "
                        "outcome go back to the queue (should Kafka have written them, they are "
                        "skipped when read back)",
                        keys.tag,
                        len(unsure),
                    )

    async def _return_taken(self, take: asyncio.Future[list[bytes]], cut: Unsettled) -> int:
        """Give back the leases of a take whose spill a stop cancelled, once it answers."""
        cut.rest = [lease_id for lease_id, _, _ in _entries(await take)]
        return await self._give_back(cut.keys, cut.rest, cut.out) if cut.rest else 0

    async def _produce(
        self, keys: FrontierKeys, entries: list[tuple[str, str, bytes]], out: SpillOutcomes
    ) -> SpillCounts:
        """Produce the requests taken to spill, then settle each lease (in ``out.settled``)."""

        def report(lease_id: str) -> Callable[[KafkaError | None, Message], None]:
            def delivered(error: KafkaError | None, message: Message) -> None:
                if error is not None or unproven(error, message):
                    out.failed.append(lease_id)
                    # an error that may leave it written, or no offset: maybe written all the same
                    if error is None or error.code() in UNSURE_ERRORS:
                        out.unsure.append(lease_id)
                    return
                out.acked[lease_id] = message.offset() or 0

            return delivered

        values: list[tuple[str, bytes]] = []
        broken: list[Finish] = []
        for lease_id, score, body in entries:
            try:
                values.append((lease_id, spill_message(score, body)))  # JSON, however stored
            except ValueError as exc:
                record = codec.failure_json("spill/undecodable", self.node_id, body, str(exc))
                broken.append(Finish(lease_id, "failed", record))
        if broken:  # first: a spill cut short later would put them back in the queue
            await self.clients[keys.part].complete_many(broken, [])
            out.settled.update(finish.lease_id for finish in broken)
            logger.error(
                "%d requests taken to spill from %s cannot be read (damaged stored data): "
                "failed, with their records in %s",
                len(broken),
                keys.tag,
                keys.failed,
            )
        for lease_id, value in values:
            message = OutgoingMessage(
                self.settings.topic, out.key(lease_id).encode(), value, [], 0, partition=keys.part
            )
            if not self.producer.send(message, report(lease_id)):
                break  # the local queue is full (large requests): the rest stay queued
            out.sent.add(lease_id)
        # Every message sent has its outcome within the producer's message timeout (librdkafka
        # fails it then): a lease given back while its message may still be written would be
        # queued in Redis and in Kafka, crawled twice. Past it (never, but for a stall), what
        # is still out is purged.
        if out.sent and await self.producer.drain(self.settings.ack_timeout + REPORT_SLACK):
            self.producer.purge()
        answered = {*out.acked, *out.failed, *out.settled}  # settled: the damaged ones
        unanswered = [lease_id for lease_id, _, _ in entries if lease_id not in answered]
        back = out.failed + unanswered
        # timed out, purged, or sent and not answered even after the purge
        unsure = [lease_id for lease_id in back if out.maybe_written(lease_id)]
        given = [*out.acked, *back]
        spilled = await self._give_back(keys, given, out, unsure)
        out.settled.update(given)
        if back:  # Kafka did not take them: they stay queued in Redis
            logger.warning(
                "Kafka did not acknowledge %d of %d requests spilled from %s: they stay queued "
                "in Redis%s",
                len(back),
                len(entries),
                keys.tag,
                f"; {len(unsure)} of them were sent and timed out, were purged, had no outcome "
                "or were acknowledged without an offset: should Kafka have written them all the "
                "same, they are skipped when read back (frontier/spill_unsure)"
                if unsure
                else "",
            )
        return SpillCounts(spilled, len(back), len(broken), len(unsure), len(out.reclaimed))

    async def _give_back(
        self,
        keys: FrontierKeys,
        leases: list[str],
        out: SpillOutcomes,
        unsure: Sequence[str] = (),
    ) -> int:
        """Finish a spill's ``leases``: those Kafka acknowledged (in ``out.acked``, with their
        offsets) leave Redis and are counted in the backlog, the others go back to the queue;
        either script leaves a lease finished already alone. The messages of the ``unsure``
        leases, sent to Kafka and not acknowledged, which it may have written all the same, are
        recorded first: read back, they are skipped (``spill_back.lua``), so each request is
        crawled once; such a lease goes back to the queue whatever report comes after
        (``out.marked``), or its request would be in neither. An acknowledged lease another
        node reclaimed meanwhile (it expired) stays queued, its message recorded the same way
        (``spill_done.lua``; counted in ``out.reclaimed``). Returns how many were spilled."""
        out.marked.update(unsure)
        # read now: a report that comes during the calls below changes nothing of this one
        acked = {lease_id: at for lease_id, at in out.acked.items() if lease_id not in out.marked}
        if unsure:
            await self.clients[keys.part].redis.hset(
                keys.backlog_unsure, mapping=dict.fromkeys(map(out.key, unsure), 1)
            )
        spilled = [lease_id for lease_id in leases if lease_id in acked]
        back = [lease_id for lease_id in leases if lease_id not in acked]
        dropped = 0
        if spilled:
            written = max(acked.values()) + 1
            offsets = [keys.backlog_read, keys.backlog_written]
            # the spill's fence: a call again (its answer lost to a stop or a connection
            # error, or Redis away) tells leases an earlier one dropped from reclaimed ones
            fence = keys.spill_fence(out.spill_id)
            unsure_keys = [keys.backlog_unsure, keys.epoch, fence]
            reply = await self._done(
                keys=[keys.leases, keys.inflight, keys.backlog, *offsets, *unsure_keys],
                args=[
                    self.node_id,
                    self.settings.topic,
                    written,
                    out.prefix,
                    out.epoch,
                    SPILL_FENCE_MS,
                    *spilled,
                ],
            )
            dropped = int(reply[0])
            # a call again (the give-back is retried) names those of an earlier call again
            reclaimed = {text(lease_id) for lease_id in reply[1:]} - out.reclaimed
            if reclaimed:
                out.reclaimed |= reclaimed
                logger.warning(
                    "%d requests spilled from %s had been reclaimed by another node when Kafka "
                    "acknowledged them (their leases expired: this node stalled, or the Redis "
                    "server's clock stepped ahead): they stay queued in Redis, and their "
                    "messages are skipped when read back (frontier/spill_reclaimed)",
                    len(reclaimed),
                    keys.tag,
                )
        if back:
            requeue = [Finish(lease_id, "requeue") for lease_id in back]
            await self.clients[keys.part].complete_many(requeue, [])
        return dropped
