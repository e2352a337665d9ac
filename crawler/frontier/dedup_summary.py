"""What a spider's dedup keys hold, for operator tools (``crawler status``) and a node's start
(``seen_entries``; no Scrapy).

A node's ``FRONTIER_DUPEFILTER`` is not stored in Redis: the summary covers each
mode whose keys exist (one, unless a crawl changed mode).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crawler.frontier.dedup_bloom import BloomState
from crawler.frontier.keys import FrontierKeys
from crawler.redis_connection import AsyncRedis, SyncRedis


@dataclass(frozen=True, slots=True)
class DedupSummary:
    mode: str  # exact | exact+ttl | compact | bloom
    entries: int  # URLs recorded (bloom: added to the filter)
    bytes: int  # MEMORY USAGE of the mode's keys (sampled for sets and hashes)
    fill: float | None  # bloom: share of the newest slice's capacity used
    fp_rate: float  # estimated chance that a new URL is taken for a seen one (0: exact modes)


def dedup_summary(client: SyncRedis, parts: Sequence[FrontierKeys]) -> list[DedupSummary]:
    """One summary per dedup mode with keys in Redis, over every part of the frontier
    (entries and bytes summed; a Bloom filter's fill and rate are its fullest part's)."""
    merged: dict[str, DedupSummary] = {}
    for keys in parts:
        for part in _part_summary(client, keys):
            seen = merged.get(part.mode)
            merged[part.mode] = part if seen is None else _merged(seen, part)
    return list(merged.values())


async def seen_entries(client: AsyncRedis, parts: Sequence[FrontierKeys]) -> int:
    """URLs recorded as seen by every dedup mode, in every part (one round trip)."""
    async with client.pipeline(transaction=False) as pipe:
        for keys in parts:
            _read_entries(pipe, keys)
        found = await pipe.execute()
    return sum(
        int(exact) + int(timed) + int(compact or 0) + BloomState.from_meta(*bloom).entries
        for exact, timed, compact, bloom in zip(
            found[0::4], found[1::4], found[2::4], found[3::4], strict=True
        )
    )


def _read_entries(pipe: Any, keys: FrontierKeys) -> None:
    """Queue on a pipeline (sync or async) the reads of what each dedup mode recorded: ``SCARD``
    of the exact set, ``ZCARD`` of the timed one, the compact filter's and the Bloom filter's
    counts."""
    pipe.scard(keys.dupefilter)
    pipe.zcard(keys.dupefilter_ttl)
    pipe.hget(keys.dupefilter_compact, "entries")
    pipe.hmget(keys.bloom_meta, BloomState.META_FIELDS)


def _merged(a: DedupSummary, b: DedupSummary) -> DedupSummary:
    fill = None if b.fill is None else max(b.fill, a.fill or 0.0)
    return DedupSummary(
        a.mode, a.entries + b.entries, a.bytes + b.bytes, fill, max(a.fp_rate, b.fp_rate)
    )


def _part_summary(client: SyncRedis, keys: FrontierKeys) -> list[DedupSummary]:
    """One summary per dedup mode with keys in one part (a few commands, none scans)."""
    with client.pipeline(transaction=False) as pipe:
        _read_entries(pipe, keys)
        for key in keys.dedup_keys():
            pipe.memory_usage(key)
        exact, timed, compact, (layout, slices, count), *usage = pipe.execute()
    size = dict(zip(keys.dedup_keys(), (int(u or 0) for u in usage), strict=True))
    found = []
    if size[keys.dupefilter]:
        found.append(DedupSummary("exact", int(exact), size[keys.dupefilter], None, 0.0))
    if size[keys.dupefilter_ttl]:
        found.append(DedupSummary("exact+ttl", int(timed), size[keys.dupefilter_ttl], None, 0.0))
    if size[keys.dupefilter_compact]:
        entries = int(compact or 0)
        found.append(DedupSummary("compact", entries, size[keys.dupefilter_compact], None, 0.0))
    if size[keys.bloom_meta]:
        state = BloomState.from_meta(layout, slices, count)
        found.append(
            DedupSummary(
                "bloom",
                state.entries,
                size[keys.bloom_meta] + sum(size[key] for key in keys.bloom_chunks),
                state.fill,
                state.false_positive_rate,
            )
        )
    return found
