"""The shared frontier in Redis: lease, complete, heartbeat, release (no Scrapy imports).

Every multi-key step is one Lua script (``crawler/frontier/lua/``), so a
request is always in exactly one place: the queue, a node's lease, the failed
hash, or done (gone). Times are Redis server time, never the client's clock.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from crawler.frontier.dedup import DedupConfig, DedupStep
from crawler.frontier.dedup_bloom import BloomState
from crawler.frontier.keys import FrontierKeys
from crawler.lua import script_text, text
from crawler.redis_connection import AsyncRedis, SyncRedis

LINK_CHECK_MIN = 2  # children that could be seen before complete() looks them up first
# ... when the lookup is a script (compact, bloom, a TTL) and FRONTIER_LINK_CHECK is unset: its
# call costs about what not sending the bodies of a hundred links saves (bench.frontier_load:
# the same CPU at 8 pages of 20 links a call, 1.5x at one page; a third of the bytes).
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


@dataclass(frozen=True, slots=True)
class Finish:
    """A lease to finish in a completion: its outcome, and its failure record if it failed."""

    lease_id: str
    outcome: str  # done | failed | requeue
    failure: bytes = b""


@dataclass(frozen=True, slots=True)
class Completion:
    status: str  # of the first lease finished; 'none' when none was
    added: int
    dropped: tuple[int, ...]  # positions of the children found already seen
    statuses: tuple[str, ...] = ()  # of each lease finished, in order

    @property
    def duplicates(self) -> int:
        return len(self.dropped)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    extended: int
    reclaimed: int
    lost: int
    epoch: str  # the frontier's epoch in Redis now ("" = none: its data is gone)
    queued: int  # requests in the queue (of every part) after the beat


def _queued_and_leased(counts: list[Any]) -> tuple[int, int]:
    """(queued, leased) from ZCARD queue, ZCARD leases, GET backlog per part: requests
    spilled to Kafka count as queued."""
    queued = sum(int(n) for n in counts[0::3]) + sum(max(0, int(n or 0)) for n in counts[2::3])
    return queued, sum(int(n) for n in counts[1::3])


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
                    pipe.smismember(client.keys.dupefilter, fingerprints)
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


async def pending_requests(client: AsyncRedis, parts: Sequence[FrontierKeys]) -> int:
    """Requests queued (in Redis or spilled to Kafka) or leased by any node, in every part
    (one round trip)."""
    async with client.pipeline(transaction=False) as pipe:
        for keys in parts:
            pipe.zcard(keys.queue)
            pipe.zcard(keys.leases)
            pipe.get(keys.backlog)
        return sum(_queued_and_leased(await pipe.execute()))


def pending_requests_sync(client: SyncRedis, parts: Sequence[FrontierKeys]) -> tuple[int, int]:
    """Requests queued (in Redis or spilled to Kafka), and leased by any node, in every part
    (operator tools)."""
    with client.pipeline(transaction=False) as pipe:
        for keys in parts:
            pipe.zcard(keys.queue)
            pipe.zcard(keys.leases)
            pipe.get(keys.backlog)
        return _queued_and_leased(pipe.execute())


def leasing_script(name: Literal["lease", "spill_take"]) -> str:
    """``lua/<name>.lua`` after ``lua/take.lua``, the lease step both share."""
    return script_text("crawler.frontier", "take") + "\n" + script_text("crawler.frontier", name)


class FrontierClient:
    def __init__(
        self,
        client: AsyncRedis,
        keys: FrontierKeys,
        node_id: str,
        dedup: DedupConfig = DedupConfig(),  # noqa: B008 (frozen)
        *,
        link_check: bool | None = None,
    ) -> None:
        self.redis = client
        self.keys = keys
        self.node_id = node_id
        self.dedup = DedupStep.for_config(dedup)
        # FRONTIER_LINK_CHECK: bodies only for unseen links (None: where it pays, to_look_up)
        self.link_check = link_check
        self._lease = client.register_script(leasing_script("lease"))
        self._complete = client.register_script(self.dedup.script())
        self._seen = client.register_script(self.dedup.script("seen"))
        self._complete_keys = self.dedup.script_keys(keys)
        self._heartbeat = client.register_script(script_text("crawler.frontier", "heartbeat"))
        self._release = client.register_script(script_text("crawler.frontier", "release"))
        # Requests in the queue after this node's last lease call or heartbeat (None: not yet).
        self.queued: int | None = None

    async def lease(self, count: int, lease_ms: int, call: str = "") -> list[Lease]:
        """Lease up to ``count`` requests. Sent again with the same ``call`` id (after a
        timeout: the first may have run), it returns the leases the first one took."""
        k = self.keys
        flat = await self._lease(
            keys=[k.queue, k.data, k.leases, k.inflight, k.lease_fence(self.node_id)],
            args=[self.node_id, count, lease_ms, call or uuid.uuid4().hex],
        )
        self.queued = int(flat.pop())
        return [Lease(text(flat[i]), bytes(flat[i + 1])) for i in range(0, len(flat), 2)]

    async def complete(
        self,
        lease_id: str | None,
        outcome: str,
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
    ) -> Completion:
        """Finish every lease of ``finishes`` and enqueue the unseen ``children``, in one atomic
        step. With ``link_check``, the children's fingerprints are looked up first (read-only,
        ``seen``; ``known``: the positions such a lookup already found, see ``known_in_parts``)
        and only the unseen ones travel with their bodies; the script checks those again in
        its atomic step."""
        if known is None:
            (known,) = await known_in_parts([(self, children)])
        sent = [i for i in range(len(children)) if i not in known]
        encode = self.dedup.encode
        args: list[Any] = [
            ",".join(finish.lease_id for finish in finishes),
            self.node_id,
            ",".join(finish.outcome for finish in finishes),
            b"\n".join(finish.failure for finish in finishes),
            *self.dedup.args,
        ]
        for i in sent:
            child = children[i]
            score = f"F{child.score!r}" if child.force else repr(child.score)
            args += [encode(child.fingerprint), score, child.body]
        statuses, added, dropped = await self._complete(keys=self._complete_keys, args=args)
        positions = {*known, *(sent[int(i)] for i in dropped)}
        found = tuple(text(status) for status in statuses)
        first = found[0] if found else "none"
        return Completion(first, int(added), tuple(sorted(positions)), found)

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
        if self.plain_lookup:
            flags = await self.redis.smismember(self.keys.dupefilter, fingerprints)
        else:
            args = self.dedup.seen_args(fingerprints)
            flags = await self._seen(keys=self._complete_keys, args=args)
        return [bool(flag) for flag in flags]

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
        self, held: list[str], node_ttl_ms: int, lease_ms: int, reclaim_limit: int, epoch: str
    ) -> Heartbeat:
        """Extend ``held``, reclaim expired leases; nothing but the check when the frontier's
        epoch is no longer ``epoch`` (see ``Heartbeat.epoch``)."""
        k = self.keys
        extended, reclaimed, lost, current, queued = await self._heartbeat(
            keys=[k.nodes, k.leases, k.inflight, k.queue, k.epoch, k.node_epoch(self.node_id)],
            args=[self.node_id, node_ttl_ms, lease_ms, reclaim_limit, epoch, *held],
        )
        self.queued = int(queued)
        return Heartbeat(int(extended), int(reclaimed), int(lost), text(current), self.queued)

    async def record_incident(self, record: bytes) -> None:
        await self.redis.rpush(self.keys.incidents, record)

    async def release(self, lease_ids: list[str]) -> int:
        k = self.keys
        released = await self._release(
            keys=[k.leases, k.inflight, k.queue, k.nodes], args=[self.node_id, *lease_ids]
        )
        return int(released)

    async def pending(self) -> int:
        """Requests queued or leased by any node."""
        return await pending_requests(self.redis, [self.keys])

    async def aclose(self) -> None:
        await self.redis.aclose()
