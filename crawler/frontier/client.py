"""The shared frontier in Redis: lease, complete, heartbeat, release (no Scrapy imports).

Every multi-key step is one Lua script (``crawler/frontier/lua/``), so a
request is always in exactly one place: the queue (a list per priority level), a
node's lease, the failed hash, or done (gone). A node's write of a reactor turn is one
call (``turn.lua``): it finishes leases, enqueues new requests and leases more. Times
are Redis server time, never the client's clock.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from crawler.frontier.bloom_probe import BloomCheck
from crawler.frontier.dedup import DedupConfig, DedupMode, DedupStep
from crawler.frontier.dedup_bloom import BloomState
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.pending import pending_requests
from crawler.frontier.write_marks import WriteMarks
from crawler.lua import frontier_script, text
from crawler.redis_connection import AsyncRedis

LINK_CHECK_MIN = 2  # children that could be seen before complete() looks them up first
# ... when the lookup is more than one command (compact and a TTL: a script; bloom: a GETRANGE
# per link) and FRONTIER_LINK_CHECK is unset: its call costs about what not sending the bodies
# of a hundred links saves (bench.frontier_load, bloom: 128 against 169 us of Redis CPU per page
# at 8 pages of 20 links a call, 262 against 231 us at one page).
SCRIPT_CHECK_MIN = 96


@dataclass(frozen=True, slots=True)
class NewRequest:
    fingerprint: str  # "" = never deduplicated (dont_filter)
    score: float  # queue order: lower first (the negated priority)
    body: bytes
    force: bool = False  # enqueue even if seen, but record the fingerprint (seeds)
    site: str = ""  # the URL's host: which part of a partitioned frontier holds it


@dataclass(frozen=True, slots=True)
class Lease:
    id: str
    body: bytes


Outcome = Literal["done", "failed", "requeue"]  # of a lease a node finishes (turn.lua)


@dataclass(frozen=True, slots=True)
class Finish:
    """A lease to finish in a completion: its outcome, and its failure record if it failed."""

    lease_id: str
    outcome: Outcome
    failure: bytes = b""


@dataclass(frozen=True, slots=True)
class LeaseAsk:
    """Requests to lease in a write (``complete_many``'s ``lease``)."""

    count: int
    lease_ms: int
    call: str  # the call's id: a write sent again gets the leases the first one took
    # 0: the node still holds requests: it leaves the nodes waiting for work their share of
    # the queue. > 0: its buffer ran dry; it asks again after this many ms if it finds nothing,
    # and is recorded as waiting for work until it has missed three such asks (turn.lua)
    idle_ms: int = 0


@dataclass(frozen=True, slots=True)
class Completion:
    status: str  # of the first lease finished; 'none' when none was
    added: int
    dropped: tuple[int, ...]  # positions of the children found already seen
    statuses: tuple[str, ...] = ()  # of each lease finished, in order
    leases: tuple[Lease, ...] = ()  # taken in the same write (``LeaseAsk``)

    @property
    def duplicates(self) -> int:
        return len(self.dropped)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    extended: int
    reclaimed: int
    lost: tuple[str, ...]  # lease ids held that are no longer this node's
    epoch: str  # the frontier's epoch in Redis now ("" = none: its data is gone)
    queued: int  # requests in the queue (of every part) after the beat
    reclaimed_from: Mapping[str, int] = field(default_factory=dict)  # node -> its leases reclaimed


def score_text(score: float) -> str:
    """A queue score as the scripts take it: the level of the queue it goes to (an integer's
    text: Scrapy's priorities are integers)."""
    return str(int(score)) if score.is_integer() else repr(score)


async def known_in_parts(asks: Sequence[tuple[FrontierClient, list[NewRequest]]]) -> list[set[int]]:
    """For each (part, children): the positions of the children its dedup already holds, of
    those ``to_look_up``. Sent at once: one pipeline of ``SMISMEMBER`` when every part's lookup
    is plain and they share a client (one round trip per master), else one call per part."""
    looked = [(client, client.to_look_up(children), children) for client, children in asks]
    asked = [
        (client, [children[i].fingerprint for i in positions])
        for client, positions, children in looked
    ]
    asking = [client for client, fingerprints in asked if fingerprints]
    if len(asking) > 1 and all(c.plain_lookup and c.redis is asking[0].redis for c in asking):
        async with asking[0].redis.pipeline(transaction=False) as pipe:
            for client, fingerprints in asked:
                if fingerprints:
                    pipe.smismember(client.keys.dupefilter, client.encoded(fingerprints))
            answers = iter(await pipe.execute())
        flags = [
            [bool(f) for f in next(answers)] if fingerprints else [] for _, fingerprints in asked
        ]
    else:
        flags = list(
            await asyncio.gather(*(client.seen(fingerprints) for client, fingerprints in asked))
        )
    return [
        {i for i, flag in zip(positions, found, strict=True) if flag}
        for (_, positions, _), found in zip(looked, flags, strict=True)
    ]


class FrontierClient:
    def __init__(
        self,
        client: AsyncRedis,
        keys: FrontierKeys,
        node_id: str,
        dedup: DedupConfig = DedupConfig(),  # noqa: B008 (frozen)
        *,
        link_check: bool | None = None,
        turn_text: Callable[[str], str] | None = None,
    ) -> None:
        self.redis = client
        self.keys = keys
        self.node_id = node_id
        self.dedup = DedupStep.for_config(dedup)
        # FRONTIER_LINK_CHECK: bodies only for unseen links (None: where it pays, to_look_up)
        self.link_check = link_check
        # turn_text: the write script's text is passed through it first (bench.turn_sections
        # puts probes between its sections)
        turn = self.dedup.script()
        self._turn = client.register_script(turn_text(turn) if turn_text else turn)
        self._seen = client.register_script(self.dedup.script("seen"))
        self._dedup_keys = self.dedup.script_keys(keys)
        self._turn_keys = [
            *self._dedup_keys,
            keys.write_mark(node_id),
            keys.waiting,
            keys.lease_fence(node_id),
        ]
        # the tokens of this node's writes (a frontier shares its parts' ``lost`` event)
        self.marks = WriteMarks(asyncio.Event())
        self._heartbeat = client.register_script(frontier_script("queue", "heartbeat"))
        self._release = client.register_script(frontier_script("queue", "release"))
        # mode bloom: the link check reads the filter's blocks and compares the bits here
        self._bloom = BloomCheck(keys) if dedup.mode is DedupMode.BLOOM else None
        # Requests in the queue after this node's last lease call or heartbeat (None: not yet).
        self.queued: int | None = None

    async def lease(
        self, count: int, lease_ms: int, call: str = "", *, idle_ms: int = 0
    ) -> list[Lease]:
        """Lease up to ``count`` requests (``idle_ms``: see ``LeaseAsk``). Sent again with the
        same ``call`` id (after a timeout: the first may have run), it returns the leases the
        first one took."""
        ask = LeaseAsk(count, lease_ms, call or uuid.uuid4().hex, idle_ms)
        return list((await self.complete_many([], [], set(), lease=ask)).leases)

    async def complete(
        self,
        lease_id: str | None,
        outcome: Outcome,
        children: list[NewRequest],
        failure: bytes = b"",
    ) -> Completion:
        """Finish ``lease_id`` (if any) with ``outcome`` and enqueue the unseen ``children``,
        atomically (``complete_many`` with one lease or none)."""
        finishes = [Finish(lease_id, outcome, failure)] if lease_id else []
        return await self.complete_many(finishes, children)

    async def complete_many(
        self,
        finishes: list[Finish],
        children: list[NewRequest],
        known: Collection[int] | None = None,
        *,
        lease: LeaseAsk | None = None,
    ) -> Completion:
        """Finish every lease of ``finishes``, enqueue the unseen ``children`` and, with
        ``lease``, lease more, in one atomic step. With ``link_check``, the children's
        fingerprints are looked up first (read-only, ``seen``; ``known``: the positions such a
        lookup already found, see ``known_in_parts``) and only the unseen ones travel with
        their bodies; the script checks those again in its atomic step."""
        if known is None:
            (known,) = await known_in_parts([(self, children)])
        sent = [i for i in range(len(children)) if i not in known]
        ask = lease or LeaseAsk(0, 0, "")
        token, applied = self.marks.issue()
        args: list[Any] = [
            ",".join(finish.lease_id for finish in finishes),
            self.node_id,
            ",".join(finish.outcome for finish in finishes),
            b"\n".join(finish.failure for finish in finishes),
            *self._dedup_args(),
            ask.count,
            ask.lease_ms,
            ask.call,
            ask.idle_ms,
            token,
        ]
        encode = self._encode
        for i in sent:
            child = children[i]
            score = score_text(child.score)
            args += [encode(child.fingerprint), f"F{score}" if child.force else score, child.body]
        reply = await self._turn(keys=self._turn_keys, args=args)
        statuses, added, dropped, flat, queued, feedback, mark = reply
        self.marks.settled(token, applied, mark)
        self.queued = int(queued)
        if self._bloom is not None:
            self._bloom.learn(text(feedback))
        positions = {*known, *(sent[int(i)] for i in dropped)}
        found = tuple(text(status) for status in statuses)
        first = found[0] if found else "none"
        leases = tuple(Lease(text(flat[i]), bytes(flat[i + 1])) for i in range(0, len(flat), 2))
        return Completion(first, int(added), tuple(sorted(positions)), found, leases)

    def _dedup_args(self) -> tuple[str | int, ...]:
        """The dedup snippet's arguments; bloom's last one is this node's view of the filter."""
        if self._bloom is None:
            return self.dedup.args
        return (*self.dedup.args[:-1], self._bloom.view())

    def encoded(self, fingerprints: list[str]) -> list[str | bytes]:
        """Fingerprints as the dedup's keys hold them."""
        return [self.dedup.encode(fingerprint) for fingerprint in fingerprints]

    def _encode(self, fingerprint: str) -> str | bytes:
        """A child's fingerprint as the script takes it (bloom: with its positions)."""
        if self._bloom is None or not fingerprint:
            return self.dedup.encode(fingerprint)
        return self._bloom.pack(self.dedup.digest(fingerprint))

    def to_look_up(self, children: list[NewRequest]) -> list[int]:
        """Positions of the children a completion looks up first: none with ``link_check``
        False, or with fewer than ``LINK_CHECK_MIN`` that could be seen (not worth a round
        trip); ``link_check`` None: a lookup that is a script only for ``SCRIPT_CHECK_MIN``."""
        if self.link_check is False:
            return []
        checked = [i for i, child in enumerate(children) if child.fingerprint and not child.force]
        least = LINK_CHECK_MIN if self.link_check or self.plain_lookup else SCRIPT_CHECK_MIN
        return checked if len(checked) >= least else []

    @property
    def plain_lookup(self) -> bool:
        """``seen`` is one plain command (``SMISMEMBER``: exact dedup without TTL)."""
        return self.dedup.snippet == "dedup_set"

    async def seen(self, fingerprints: list[str]) -> list[bool]:
        """Whether the dedup has recorded each hex fingerprint (read-only: records none)."""
        if not fingerprints:
            return []
        if self._bloom is not None:
            return await self._bloom_seen(self._bloom, fingerprints)
        if self.plain_lookup:
            flags = await self.redis.smismember(self.keys.dupefilter, self.encoded(fingerprints))
        else:
            args = self.dedup.seen_args(fingerprints)
            flags = await self._seen(keys=self._dedup_keys, args=args)
        return [bool(flag) for flag in flags]

    async def _bloom_seen(self, check: BloomCheck, fingerprints: list[str]) -> list[bool]:
        """The Bloom filter's blocks read with one pipeline, the bits compared here (again
        when the filter's meta changed since the last check)."""
        digests = [self.dedup.digest(fingerprint) for fingerprint in fingerprints]
        while True:
            probe = check.probe(digests)
            async with self.redis.pipeline(transaction=False) as pipe:
                for command in probe.commands:
                    pipe.execute_command(*command)
                found = check.evaluate(probe, await pipe.execute())
            if found is not None:
                return found

    async def bloom_state(self) -> BloomState:
        """The Bloom filter's layout and fill (mode bloom; empty before the first request)."""
        layout, slices, count = await self.redis.hmget(self.keys.bloom_meta, BloomState.META_FIELDS)
        return BloomState.from_meta(layout, slices, count)

    async def other_dedup_keys(self) -> list[str]:
        """Keys of other dedup modes that exist: requests seen under them are not known."""
        others = self.dedup.other_keys(self.keys)
        async with self.redis.pipeline(transaction=False) as pipe:
            for key in others:
                pipe.exists(key)
            found = await pipe.execute()
        return [key for key, present in zip(others, found, strict=True) if present]

    async def open_epoch(self) -> str:
        """The frontier's epoch, created (a random id) if it has none yet."""
        await self.redis.set(self.keys.epoch, uuid.uuid4().hex, nx=True)
        return text(await self.redis.get(self.keys.epoch))

    async def heartbeat(
        self,
        held: list[str],
        node_ttl_ms: int,
        lease_ms: int,
        reclaim_limit: int,
        epoch: str,
        *,
        interval_ms: int = 0,
    ) -> Heartbeat:
        """Extend ``held``, reclaim expired leases; nothing but the check when the frontier's
        epoch is no longer ``epoch`` (see ``Heartbeat.epoch``). ``interval_ms``: the node's
        heartbeat interval, recorded with the beat for operators (0: not said)."""
        k = self.keys
        extended, reclaimed, lost, current, queued, owners = await self._heartbeat(
            keys=[
                k.nodes,
                k.leases,
                k.inflight,
                k.queue_levels,
                k.epoch,
                k.node_epoch(self.node_id),
                k.queue_count,
                k.beats,
            ],
            args=[self.node_id, node_ttl_ms, lease_ms, reclaim_limit, epoch, interval_ms, *held],
        )
        self.queued = int(queued)
        return Heartbeat(
            int(extended),
            int(reclaimed),
            tuple(map(text, lost)),
            text(current),
            self.queued,
            {text(node): int(count) for node, count in zip(owners[::2], owners[1::2], strict=True)},
        )

    async def record_incident(self, record: bytes) -> None:
        await self.redis.rpush(self.keys.incidents, record)

    async def release(self, lease_ids: list[str]) -> int:
        k = self.keys
        released = await self._release(
            keys=[k.leases, k.inflight, k.queue_levels, k.queue_count, k.nodes, k.beats],
            args=[self.node_id, *lease_ids],
        )
        return int(released)

    async def pending(self) -> int:
        """Requests queued or leased by any node."""
        return await pending_requests(self.redis, [self.keys])

    async def aclose(self) -> None:
        await self.redis.aclose()
