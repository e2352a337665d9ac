"""``PartitionedFrontier``: one node's view of a frontier split into parts (no Scrapy imports).

Each part is a whole frontier (``FrontierClient``) under its own hash tag; a request
goes to the part of its site (``crawler.frontier.partitions``). With one part this
is exactly ``FrontierClient``: one call per step, lease ids unchanged. With more:

- a lease id is ``<part>/<id>``, so completions, heartbeats and releases go back to
  the part the lease came from;
- a lease call starts at a part chosen at random, weighted by the queue depth each
  part reported last, up to ``FULL_DEPTH`` (+1: an empty part is still asked now and
  then; a part that has not reported yet counts as full), and goes on to the next
  parts until it has what it asked for. Parts with more than ``FULL_DEPTH`` queued
  are asked alike: most links of a page go to its own part, so weighing deep parts
  by depth makes the deepest grow fastest (on ``bench.frontier_cluster``'s workload,
  3 parts: the busiest master 1.08-1.30x the idlest, against 1.02-1.08x). Every
  heartbeat refreshes every part's depth: a part the node seldom leases from still
  grows with other nodes' links;
- a turn's writes (``complete_turn``) go in two steps: first the links whose part is
  not their parent's, to their parts; then, per part, the leases that finished there
  with the links they found for it, in one atomic call each. The link check (read-only)
  runs once for both steps, every part's at once. A crash between the two
  steps only crawls the parents again (the dedup catches their links): nothing is lost.
  A lease the write carries (``LeaseAsk``) goes to the part a lease call would start at,
  with that part's write if it has one; the rest, as a lease call does;
- the heartbeat beats in every part (each part has its own node registry, leases and
  epoch); the node's epoch is the parts' epochs joined by spaces.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections import Counter
from collections.abc import Sequence

from crawler.frontier.client import (
    Completion,
    Finish,
    FrontierClient,
    Heartbeat,
    Lease,
    LeaseAsk,
    NewRequest,
    Outcome,
    known_in_parts,
)
from crawler.frontier.dedup import DedupConfig
from crawler.frontier.dedup_bloom import BloomState
from crawler.frontier.dedup_claim import claim_dedup_mode, claim_fingerprinter
from crawler.frontier.keys import FrontierKeys, frontier_parts
from crawler.frontier.layout import check_layout
from crawler.frontier.partitions import claim_partitions, part_of
from crawler.lua import text
from crawler.redis_connection import AsyncRedis

FULL_DEPTH = 1000  # queued requests from which a part is asked as often as any other


class PartitionedFrontier:
    def __init__(
        self, spider: str, parts: Sequence[FrontierClient], fingerprinter: str = ""
    ) -> None:
        self.spider = spider
        self.parts = tuple(parts)
        self.fingerprinter = fingerprinter  # its class's path, recorded by claim ("": none)
        self.node_id = self.parts[0].node_id
        self.keys: FrontierKeys = self.parts[0].keys  # part 0: the counts, incidents, logs
        self.lost_writes = asyncio.Event()  # Redis lost writes it had answered, in any part
        for part in self.parts:
            part.marks.lost = self.lost_writes
        self._claimed = False
        self._order: tuple[str, list[int]] = ("", [])  # the last lease call and its parts

    @classmethod
    def connect(
        cls,
        redis: AsyncRedis,
        spider: str,
        node_id: str,
        partitions: int,
        *,
        dedup: DedupConfig,
        link_check: bool | None,
        fingerprinter: str = "",
    ) -> PartitionedFrontier:
        """The ``partitions`` parts of ``spider``'s frontier, on one Redis client;
        ``fingerprinter``: the import path of the node's request fingerprinter's class."""
        parts = [
            FrontierClient(redis, keys, node_id, dedup, link_check=link_check)
            for keys in frontier_parts(spider, partitions)
        ]
        return cls(spider, parts, fingerprinter)

    @property
    def count(self) -> int:
        return len(self.parts)

    # -- routing ------------------------------------------------------------------------------

    def part_of(self, request: NewRequest) -> int:
        return part_of(request.site, self.count)

    def _lease_id(self, part: int, lease_id: str) -> str:
        return lease_id if self.count == 1 else f"{part}/{lease_id}"

    def split_lease_id(self, lease_id: str) -> tuple[int, str]:
        if self.count == 1:
            return 0, lease_id
        part, _, raw = lease_id.partition("/")
        return int(part), raw

    def _by_part(self, lease_ids: list[str]) -> dict[int, list[str]]:
        grouped: dict[int, list[str]] = {}
        for lease_id in lease_ids:
            part, raw = self.split_lease_id(lease_id)
            grouped.setdefault(part, []).append(raw)
        return grouped

    async def claim(self) -> None:
        """Record the spider's number of parts, dedup mode and fingerprinter, or raise
        ``PartitionsChanged``, ``DedupChanged`` or ``FingerprinterChanged``; raise
        ``OldLayout`` for requests stored by an older version (once per node)."""
        if not self._claimed:
            await claim_partitions(self.parts[0].redis, self.spider, self.count)
            await claim_dedup_mode(self.parts[0], self.spider)
            if self.fingerprinter:
                await claim_fingerprinter(self.parts[0], self.spider, self.fingerprinter)
            await check_layout(self.parts[0].redis, self.spider, [p.keys for p in self.parts])
            self._claimed = True

    # -- leasing ------------------------------------------------------------------------------

    def _lease_order(self, call: str) -> list[int]:
        """The parts a lease call asks, in order (the same for a call sent again)."""
        if self._order[0] != call:
            weights = [
                (FULL_DEPTH if part.queued is None else min(part.queued, FULL_DEPTH)) + 1
                for part in self.parts
            ]
            first = random.choices(range(self.count), weights=weights)[0]
            self._order = (call, [(first + step) % self.count for step in range(self.count)])
        return self._order[1]

    async def lease(self, count: int, lease_ms: int, call: str, *, idle_ms: int = 0) -> list[Lease]:
        await self.claim()
        ask = LeaseAsk(count, lease_ms, call, idle_ms)
        return await self._lease_on(self._lease_order(call), [], ask)

    async def _lease_on(self, order: list[int], leases: list[Lease], ask: LeaseAsk) -> list[Lease]:
        """``leases`` and more from the parts of ``order`` in turn, up to ``ask.count``."""
        for index in order:
            if len(leases) >= ask.count:
                break
            part = self.parts[index]
            found = await part.lease(
                ask.count - len(leases), ask.lease_ms, ask.call, idle_ms=ask.idle_ms
            )
            leases = leases + self._named(index, found)
        return leases

    def _named(self, part: int, leases: Sequence[Lease]) -> list[Lease]:
        return [Lease(self._lease_id(part, lease.id), lease.body) for lease in leases]

    # -- completing ---------------------------------------------------------------------------

    async def complete(
        self,
        lease_id: str | None,
        outcome: Outcome,
        children: list[NewRequest],
        failure: bytes = b"",
    ) -> Completion:
        """Finish ``lease_id`` (if any) and enqueue the unseen ``children`` (``complete_turn``)."""
        settled = [(Finish(lease_id, outcome, failure), children)] if lease_id else []
        return await self.complete_turn([] if lease_id else children, settled)

    async def complete_turn(
        self,
        fresh: list[NewRequest],
        settled: list[tuple[Finish, list[NewRequest]]],
        lease: LeaseAsk | None = None,
    ) -> Completion:
        """Enqueue ``fresh``, finish each lease of ``settled`` with its children and, with
        ``lease``, lease more. Positions in the result count ``fresh`` first, then each lease's
        children in order."""
        await self.claim()
        children = fresh + [child for _, found in settled for child in found]
        finishes = [finish for finish, _ in settled]
        if self.count == 1:
            return await self.parts[0].complete_many(finishes, children, lease=lease)
        finishing: dict[int, list[int]] = {}
        for index, (finish, _) in enumerate(settled):
            finishing.setdefault(self.split_lease_id(finish.lease_id)[0], []).append(index)
        early: dict[int, list[int]] = {}  # part -> children written before any lease finishes
        late: dict[int, list[int]] = {}  # part -> children written with the part's leases
        owners = [None] * len(fresh) + [
            self.split_lease_id(finish.lease_id)[0] for finish, found in settled for _ in found
        ]
        for position, (child, owner) in enumerate(zip(children, owners, strict=True)):
            part = self.part_of(child)
            same = part == owner if owner is not None else part in finishing
            (late if same else early).setdefault(part, []).append(position)
        known = await self._known(children, early, late)
        added, dropped, _ = await self._write(early, {}, children, settled, known)
        statuses: list[str] = ["none"] * len(settled)
        order = self._lease_order(lease.call) if lease is not None else []
        carried = (order[0], lease) if lease is not None else None
        late_added, late_dropped, leases = await self._write(
            late, finishing, children, settled, known, statuses=statuses, lease=carried
        )
        if lease is not None:
            leases = await self._lease_on(order[1:], leases, lease)
        found = tuple(statuses)
        return Completion(
            found[0] if found else "none",
            added + late_added,
            tuple(sorted(dropped + late_dropped)),
            found,
            tuple(leases),
        )

    async def _known(
        self, children: list[NewRequest], early: dict[int, list[int]], late: dict[int, list[int]]
    ) -> set[int]:
        """Positions of the children the dedup holds, looked up once per part for both steps
        (one round trip per master for the exact dedup)."""
        parts = sorted(set(early) | set(late))
        positions = [early.get(part, []) + late.get(part, []) for part in parts]
        found = await known_in_parts(
            [
                (self.parts[part], [children[i] for i in in_part])
                for part, in_part in zip(parts, positions, strict=True)
            ]
        )
        return {in_part[k] for in_part, ks in zip(positions, found, strict=True) for k in ks}

    async def _write(
        self,
        links: dict[int, list[int]],
        finishing: dict[int, list[int]],
        children: list[NewRequest],
        settled: list[tuple[Finish, list[NewRequest]]],
        known: set[int],
        *,
        statuses: list[str] | None = None,
        lease: tuple[int, LeaseAsk] | None = None,
    ) -> tuple[int, list[int], list[Lease]]:
        """One call per part of ``links`` and ``finishing`` (and of ``lease``'s part, which
        leases in it), at once; (added, dropped, leases)."""
        leasing = {lease[0]: lease[1]} if lease is not None else {}
        parts = sorted(set(links) | set(finishing) | set(leasing))
        results = await asyncio.gather(
            *(
                self.parts[part].complete_many(
                    [self._raw_finish(settled[i][0]) for i in finishing.get(part, [])],
                    [children[position] for position in links.get(part, [])],
                    {k for k, position in enumerate(links.get(part, [])) if position in known},
                    lease=leasing.get(part),
                )
                for part in parts
            )
        )
        added, dropped, leases = 0, [], []
        for part, result in zip(parts, results, strict=True):
            added += result.added
            positions = links.get(part, [])
            dropped += [positions[i] for i in result.dropped]
            leases += self._named(part, result.leases)
            if statuses is not None:
                for index, status in zip(finishing.get(part, []), result.statuses, strict=True):
                    statuses[index] = status
        return added, dropped, leases

    def _raw_finish(self, finish: Finish) -> Finish:
        return Finish(self.split_lease_id(finish.lease_id)[1], finish.outcome, finish.failure)

    # -- the node's heartbeat, epochs and release --------------------------------------------

    def whole(self, epoch: str) -> bool:
        """``epoch`` names an epoch for every part (none is missing: no part lost its data)."""
        epochs = epoch.split(" ")
        return len(epochs) == self.count and all(epochs)

    async def epochs(self) -> str:
        """The frontier's epoch as it is now ("" for a part without one), creating none."""
        found = await asyncio.gather(*(part.redis.get(part.keys.epoch) for part in self.parts))
        return " ".join(text(epoch) if epoch is not None else "" for epoch in found)

    def forget_marks(self) -> None:
        """This node adopted another epoch: its earlier writes measure nothing."""
        for part in self.parts:
            part.marks.forget()

    async def start_epoch(self) -> None:
        """Give every part a new epoch: each node then recovers as from lost data."""
        await asyncio.gather(
            *(part.redis.set(part.keys.epoch, uuid.uuid4().hex) for part in self.parts)
        )

    async def open_epoch(self) -> str:
        """The frontier's epoch (each part's, created where missing), after ``claim``."""
        await self.claim()
        epochs = await asyncio.gather(*(part.open_epoch() for part in self.parts))
        return " ".join(epochs)

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
        grouped = self._by_part(held)
        known = epoch.split(" ") if self.count > 1 else [epoch]
        known += [""] * (self.count - len(known))
        beats = await asyncio.gather(
            *(
                part.heartbeat(
                    grouped.get(i, []),
                    node_ttl_ms,
                    lease_ms,
                    reclaim_limit,
                    known[i],
                    interval_ms=interval_ms,
                )
                for i, part in enumerate(self.parts)
            )
        )
        return Heartbeat(
            sum(beat.extended for beat in beats),
            sum(beat.reclaimed for beat in beats),
            tuple(self._lease_id(i, raw) for i, beat in enumerate(beats) for raw in beat.lost),
            " ".join(beat.epoch for beat in beats),
            sum(beat.queued for beat in beats),
            sum((Counter(beat.reclaimed_from) for beat in beats), Counter()),
        )

    async def record_incident(self, record: bytes) -> None:
        await self.parts[0].record_incident(record)

    async def release(self, lease_ids: list[str]) -> int:
        """Return ``lease_ids`` to their queues and leave every part's node registry."""
        grouped = self._by_part(lease_ids)
        released = await asyncio.gather(
            *(part.release(grouped.get(i, [])) for i, part in enumerate(self.parts))
        )
        return sum(released)

    async def pending(self) -> int:
        """Requests queued or leased by any node, in every part."""
        return sum(await asyncio.gather(*(part.pending() for part in self.parts)))

    # -- dedup --------------------------------------------------------------------------------

    async def bloom_state(self) -> BloomState:
        """The fullest part's Bloom filter (mode bloom)."""
        states = await asyncio.gather(*(part.bloom_state() for part in self.parts))
        return max(states, key=lambda state: (state.slices, state.fill))
