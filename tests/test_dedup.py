"""Dedup modes against a real Redis: exact, compact, bloom; TTL; sizing; reporting; a crawl."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import logging
import math
import re
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis
from scrapy import Request, Spider
from scrapy.dupefilters import RFPDupeFilter
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler.demo.site import Site
from crawler.frontier import codec
from crawler.frontier.admin import FrontierAdmin, discover_spiders
from crawler.frontier.client import Completion, FrontierClient, NewRequest
from crawler.frontier.dedup import DedupConfig, DedupMode, DedupStep
from crawler.frontier.dedup_bloom import (
    BLOCK_BYTES,
    CHUNKS_PER_SLICE,
    GROWTH,
    MAX_BYTES,
    MAX_CHUNK_BYTES,
    MAX_CHUNKS,
    TIGHTENING,
    BloomSlice,
    BloomState,
    bloom_layout,
    chunk_lengths,
    decode_layout,
    encode_layout,
    slice_for,
    split_in_chunks,
)
from crawler.frontier.dedup_claim import DedupChanged, FingerprinterChanged
from crawler.frontier.dedup_report import DedupReport
from crawler.frontier.dedup_summary import dedup_summary
from crawler.frontier.keys import FrontierKeys, queue_pattern
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.frontier.purge import present_keys
from crawler.frontier.settings import FrontierSettings
from crawler.lua import text
from tests.aio import run
from tests.cluster import crawl_site_once
from tests.frontier_state import queued
from tests.one_node import crawl

KEYS = FrontierKeys.for_spider("unit")
CONFIGS = {
    "exact": DedupConfig(),
    "exact+ttl": DedupConfig(ttl=3600),
    "compact": DedupConfig(DedupMode.COMPACT, capacity=1000),
    "compact+ttl": DedupConfig(DedupMode.COMPACT, ttl=3600, capacity=1000),
    "bloom": DedupConfig(DedupMode.BLOOM, capacity=1000),
}


def fingerprint(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()


def requests(prefix: str, count: int) -> list[NewRequest]:
    return [NewRequest(fingerprint(f"{prefix}{i}"), 0.0, b"{}") for i in range(count)]


async def complete(client: FrontierClient, children: list[NewRequest]) -> Completion:
    result = await client.complete(None, "done", children)
    queue = [key async for key in client.redis.scan_iter(match=queue_pattern(KEYS))]
    if queue:  # only the dedup keys matter here
        await client.redis.delete(*queue)
    return result


@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_mode_dedups_within_one_call_and_across_calls(
    name: str, redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> tuple[Completion, Completion]:
        client = FrontierClient(Redis.from_url(url=redis_url), KEYS, "a", CONFIGS[name])
        batch = requests("u", 300)
        free = NewRequest("", 0.0, b"{}")  # dont_filter: never deduplicated
        first = await client.complete(None, "done", [*batch, batch[7], free, batch[0]])
        again = await client.complete(None, "done", [free, *requests("u", 10), *requests("v", 5)])
        await client.aclose()
        return first, again

    first, again = run(scenario())
    assert (first.added, first.dropped) == (301, (300, 302))
    assert (again.added, again.dropped) == (6, tuple(range(1, 11)))
    assert queued(redis_client, KEYS) == 307
    summary = dedup_summary(redis_client, [KEYS])
    assert [(s.mode, s.entries) for s in summary] == [(name.replace("compact+ttl", "compact"), 305)]
    assert summary[0].bytes > 0


@pytest.mark.parametrize("name", list(CONFIGS))
def test_seen_answers_without_recording_anything(
    name: str, redis_url: str, redis_client: redis.Redis
) -> None:
    """``seen`` agrees with what ``complete`` recorded and writes nothing, before the dedup
    keys exist too; compact over a single crowded bucket, bloom over several slices."""
    config = CONFIGS[name]
    if config.mode is DedupMode.COMPACT:
        config = DedupConfig(config.mode, ttl=config.ttl, capacity=1)
    if config.mode is DedupMode.BLOOM:
        config = DedupConfig(config.mode, capacity=100)
    old, new = requests("s", 400), requests("z", 400)
    asked = [r.fingerprint for r in (*old, *new)]

    async def scenario() -> tuple[list[bool], list[bool], int]:
        client = FrontierClient(Redis.from_url(redis_url), KEYS, "a", config)
        before = await client.seen(asked)
        await complete(client, old)
        state = redis_client.dump(KEYS.dupefilter_compact) or redis_client.dbsize()
        after = await client.seen(asked)
        unchanged = (redis_client.dump(KEYS.dupefilter_compact) or redis_client.dbsize()) == state
        await client.aclose()
        return before, after, int(unchanged)

    before, after, unchanged = run(scenario())
    assert before == [False] * 800
    assert redis_client.dbsize() > 0 and unchanged
    assert after[:400] == [True] * 400
    false_positives = sum(after[400:])
    assert false_positives <= (4 if config.mode is DedupMode.BLOOM else 0)
    if config.mode is DedupMode.BLOOM:
        assert int(redis_client.hget(KEYS.bloom_meta, "slices") or 0) > 1


def test_compact_mode_stays_exact_in_crowded_buckets(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """One bucket for 20,000 entries: it is split (twice over) instead of growing, and every
    fingerprint is found, none is confused."""
    config = DedupConfig(DedupMode.COMPACT, capacity=1)

    async def scenario() -> list[int]:
        client = FrontierClient(Redis.from_url(redis_url), KEYS, "a", config)
        added = [(await complete(client, requests("c", 10_000))).added]
        added.append((await complete(client, requests("c", 10_000))).added)
        added.append((await complete(client, requests("d", 10_000))).added)
        added.append((await complete(client, requests("d", 10_000))).added)
        await client.aclose()
        return added

    assert run(scenario()) == [10_000, 0, 10_000, 0]
    stored = redis_client.hgetall(KEYS.dupefilter_compact)
    fields = {text(key): value for key, value in stored.items()}
    assert fields["buckets"] == b"1" and fields["entries"] == b"20000"
    assert fields["0"] == b"*"  # split: its entries are in 0.<k>
    buckets = [v for k, v in fields.items() if k not in ("buckets", "entries") and v != b"*"]
    assert sum(len(v) for v in buckets) == 20_000 * 12  # each entry once
    assert max(len(v) for v in buckets) < 256 * 12  # none over the split size
    assert any(k.count(".") == 2 for k in fields)  # a second level: 20,000 / 16 > 256


def test_the_scripts_take_the_first_12_bytes_of_a_fingerprint() -> None:
    step = DedupStep.for_config(DedupConfig(DedupMode.BLOOM))
    assert step.encode("") == ""
    assert step.encode(fingerprint("x")) == bytes.fromhex(fingerprint("x"))[:12]
    with pytest.raises(ValueError, match="shorter than 12 bytes"):
        step.encode("abcd")


@pytest.mark.parametrize("name", ["exact+ttl", "compact+ttl"])
def test_ttl_lets_a_url_be_crawled_again(
    name: str, redis_url: str, redis_client: redis.Redis
) -> None:
    config = DedupConfig(CONFIGS[name].mode, ttl=1, capacity=1)  # compact: a single bucket

    async def scenario() -> list[int]:
        client = FrontierClient(Redis.from_url(redis_url), KEYS, "a", config)
        added = [(await complete(client, requests("t", 15))).added]
        added.append((await complete(client, requests("t", 15))).added)  # within the TTL
        await asyncio.sleep(2.1)  # > ttl + 1 s: the TTL is counted in whole server seconds
        added.append((await complete(client, requests("t", 3))).added)
        added.append((await complete(client, requests("t", 3))).added)  # recorded again
        added.append((await complete(client, requests("n", 1))).added)
        await client.aclose()
        return added

    assert run(scenario()) == [15, 0, 3, 0, 1]
    # Expired entries are forgotten: the sorted set prunes them on each call, a compact bucket
    # when its entry count reaches a multiple of 16 (here: 15 + 1).
    summary = dedup_summary(redis_client, [KEYS])
    assert [s.entries for s in summary] == [4]


def test_bloom_layout_grows_and_tightens_within_the_error_rate() -> None:
    layout = bloom_layout(10_000, 0.001)
    assert layout[0].capacity == 10_000
    for before, after in itertools.pairwise(layout):
        assert after.capacity == GROWTH * before.capacity
        assert after.hashes > before.hashes
    # Full slices together stay below the filter's error rate.
    miss = math.prod(1 - s.false_positive_rate(s.capacity) for s in layout)
    assert 1 - miss <= 0.001
    assert layout[0].false_positive_rate(10_000) <= 0.001 * (1 - TIGHTENING)
    # As many slices as fit in MAX_BYTES and in the chunk keys.
    assert len(layout) == 15 and sum(s.size for s in layout) <= MAX_BYTES
    assert sum(len(s.chunks) for s in layout) <= MAX_CHUNKS
    assert sum(len(s.chunks) for s in bloom_layout(1, 0.001)) <= MAX_CHUNKS
    longest = chunk_lengths()[-1]
    for piece in layout:  # beyond CHUNKS_PER_SLICE, only the longest chunks
        assert len([c for c in piece.chunks if c != longest]) <= CHUNKS_PER_SLICE
    assert decode_layout(encode_layout(layout)) == layout
    # Past what one Redis string holds: from the default capacity to 1e9 URLs in 6 GB.
    default = bloom_layout(1_000_000, 0.001)
    assert sum(s.capacity for s in default) > 1e9
    assert sum(s.size for s in default) > 10 * MAX_CHUNK_BYTES
    assert all(c <= MAX_CHUNK_BYTES for s in default for c in s.chunks)
    # Under 2 bytes per URL at 0.1% (a classic filter needs 1.8), at any capacity.
    for capacity in (10_000, 1_000_000, 3_000_000, 10_000_000, 17_000_000):
        assert 1.8 < bloom_layout(capacity, 0.001)[0].size / capacity < 1.95


def test_bloom_chunks_fill_their_allocation_and_hold_whole_blocks(
    redis_client: redis.Redis,
) -> None:
    """A chunk is as long as the allocation Redis makes for it anyway: one block longer
    would take the next size class; blocks never straddle chunks."""
    lengths = chunk_lengths()
    assert all(length % BLOCK_BYTES == 0 for length in lengths)
    for length in (256, 1792, 65280, 261888, 2096896, 16776960, 20971264):
        assert length in lengths
        redis_client.setrange("chunk", length - 1, b"\0")
        redis_client.setrange("longer", length + BLOCK_BYTES - 1, b"\0")
        used, more = redis_client.memory_usage("chunk"), redis_client.memory_usage("longer")
        assert used is not None and more is not None
        assert more - used > BLOCK_BYTES  # the next size class
        redis_client.delete("chunk", "longer")


def test_bloom_slices_waste_little_of_their_chunks() -> None:
    for size in range(BLOCK_BYTES, 40_000_000, 99_991 * BLOCK_BYTES):
        chunks = split_in_chunks(size)
        assert len(chunks) <= CHUNKS_PER_SLICE
        assert size <= sum(chunks) < 1.02 * size + 2 * BLOCK_BYTES
    longest = MAX_CHUNK_BYTES - BLOCK_BYTES
    assert split_in_chunks(MAX_CHUNK_BYTES - 1) == (longest, BLOCK_BYTES)
    five_gb = split_in_chunks(5 * 2**30)
    assert five_gb[:10] == (longest,) * 10 and len(five_gb) == 11 and five_gb[10] < 4096
    assert 5 * 2**30 <= sum(five_gb) < 1.02 * 5 * 2**30
    needed = slice_for(1_000_000, 0.0008)
    assert needed is not None and needed.chunks == split_in_chunks(needed.size)


def test_bloom_sizing_is_validated() -> None:
    with pytest.raises(ValueError, match=r"FRONTIER_DEDUP_CAPACITY=10000000000 .*16 GB"):
        DedupConfig.parse("bloom", 0, 10_000_000_000, 0.001)


def state_after(layout: tuple[BloomSlice, ...], entries: int) -> BloomState:
    """The filter's state once ``entries`` fingerprints went in (slice by slice)."""
    slices = 1
    while slices < len(layout) and entries > layout[slices - 1].capacity:
        entries -= layout[slices - 1].capacity
        slices += 1
    return BloomState(layout, slices, entries)


@pytest.mark.slow
def test_bloom_grows_slices_and_keeps_its_false_positive_rate(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """Far past its capacity, new URLs are taken for seen ones as often as the estimate says
    (below the error rate), and nothing added is ever missed."""
    config = DedupConfig(DedupMode.BLOOM, capacity=1000, error_rate=0.01)
    inserted = 40_000

    async def scenario() -> tuple[int, list[int], BloomState]:
        client = FrontierClient(Redis.from_url(redis_url), KEYS, "a", config)
        false_positives = 0
        for start in range(0, inserted, 2000):
            batch = [
                NewRequest(fingerprint(f"b{i}"), 0.0, b"{}") for i in range(start, start + 2000)
            ]
            false_positives += (await complete(client, batch)).duplicates
        # No false negatives: everything added is found again, in every slice.
        again = [(await complete(client, requests("b", inserted))).added]
        state = await client.bloom_state()
        await client.aclose()
        return false_positives, again, state

    false_positives, again, state = run(scenario())
    assert again == [0]
    assert state.slices == 6  # 1000 + 2000 + ... + 16000 full, then the 32000 slice
    assert state.entries == inserted - false_positives
    assert state.false_positive_rate <= 0.01
    # What the model expects, summed along the way (about 380 here, sd about 20).
    expected = sum(
        100 * state_after(state.layout, entries).false_positive_rate
        for entries in range(0, inserted, 100)
    )
    assert 0.75 * expected <= false_positives <= 1.25 * expected <= 0.0125 * inserted
    # Each slice in use is allocated whole, in its chunks; no other chunk exists.
    chunks = [c for s in state.layout[:6] for c in s.chunks]
    assert [redis_client.strlen(key) for key in KEYS.bloom_chunks[: len(chunks) + 1]] == [
        *chunks,
        0,
    ]
    (summary,) = dedup_summary(redis_client, [KEYS])
    assert (summary.mode, summary.entries) == ("bloom", state.entries)
    assert summary.fill == pytest.approx(state.count / 32_000)


def test_a_filter_keeps_the_layout_it_was_created_with(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> tuple[int, BloomState]:
        first = FrontierClient(Redis.from_url(redis_url), KEYS, "a", CONFIGS["bloom"])
        await complete(first, requests("k", 100))
        larger = DedupConfig(DedupMode.BLOOM, capacity=50_000)
        second = FrontierClient(Redis.from_url(redis_url), KEYS, "b", larger)
        added = (await complete(second, requests("k", 100))).added
        state = await second.bloom_state()
        await first.aclose()
        await second.aclose()
        return added, state

    added, state = run(scenario())
    assert added == 0
    assert state.layout == bloom_layout(1000, 0.001)


async def added_twice(redis_url: str, prefix: str, count: int) -> tuple[int, int, BloomState]:
    """Requests added into the bloom filter, then the same again; the filter's state after."""
    client = FrontierClient(Redis.from_url(redis_url), KEYS, "a", CONFIGS["bloom"])
    added = (await complete(client, requests(prefix, count))).added
    again = (await complete(client, requests(prefix, count))).added
    state = await client.bloom_state()
    await client.aclose()
    return added, again, state


def test_a_filter_of_the_single_string_layout_does_not_break_anything(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A meta hash written before the chunks (``bytes:hashes:capacity``, 64-byte blocks)."""
    redis_client.hset(KEYS.bloom_meta, mapping={"layout": "64:7:20,4096:9:40", "slices": 1})
    redis_client.set("{unit}:dupefilter:bloom", bytes(4160))

    added, again, state = run(added_twice(redis_url, "s", 60))
    assert (added, again, state.slices) == (60, 0, 2)
    assert 0 < state.false_positive_rate < 1
    (summary,) = dedup_summary(redis_client, [KEYS])
    assert summary.entries == 60


def test_a_slice_larger_than_a_redis_string_lies_in_several(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A filter grows past 512 MB, what one Redis string holds: its second slice here is
    768 MB in two strings, and fingerprints land in both."""
    longest = MAX_CHUNK_BYTES - BLOCK_BYTES
    layout = f"2048:7:4,{longest}+{MAX_CHUNK_BYTES // 2}:10:1000"
    redis_client.hset(KEYS.bloom_meta, mapping={"layout": layout, "slices": 1})
    redis_client.setrange(KEYS.bloom_chunks[0], 2047, b"\0")

    try:
        added, again, state = run(added_twice(redis_url, "big", 300))
        assert (added, again, state.slices, state.entries) == (300, 0, 2, 300)
        second = [KEYS.bloom_chunks[1], KEYS.bloom_chunks[2]]
        assert [redis_client.strlen(key) for key in second] == [longest, MAX_CHUNK_BYTES // 2]
        assert all(redis_client.bitcount(key) > 0 for key in second)
    finally:
        redis_client.delete(KEYS.bloom_meta, *KEYS.bloom_chunks[:3])


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"FRONTIER_DUPEFILTER": "redis"}, r"FRONTIER_DUPEFILTER='redis' is not one of"),
        (
            {"FRONTIER_DUPEFILTER": "bloom", "FRONTIER_DEDUP_TTL": "3600"},
            r"FRONTIER_DEDUP_TTL=3600 needs FRONTIER_DUPEFILTER='exact' or 'compact'.*"
            r"FRONTIER_DUPEFILTER='bloom'",
        ),
        ({"FRONTIER_DEDUP_TTL": "-1"}, r"FRONTIER_DEDUP_TTL=-1 must be >= 0"),
        ({"FRONTIER_DEDUP_CAPACITY": "0"}, r"FRONTIER_DEDUP_CAPACITY=0 must be >= 1"),
        ({"FRONTIER_BLOOM_ERROR_RATE": "1"}, r"FRONTIER_BLOOM_ERROR_RATE=1.0 must be in \(0, 1\)"),
    ],
)
def test_dedup_settings_are_validated(values: dict[str, str], message: str) -> None:
    from settings import base

    settings = Settings({k: v for k, v in vars(base).items() if k.isupper()})
    settings.setdict({"REDIS_URL": "redis://localhost:6379/0", **values})
    with pytest.raises(ValueError, match=message):
        FrontierSettings.from_settings(settings)


def test_default_settings_are_exact_forever() -> None:
    from settings import base

    settings = Settings({k: v for k, v in vars(base).items() if k.isupper()})
    settings.set("REDIS_URL", "redis://localhost:6379/0")
    assert FrontierSettings.from_settings(settings).dedup == DedupConfig()


@pytest.mark.parametrize(
    ("values", "looked_up"),
    [
        # exact: one SMISMEMBER saves bytes and CPU for any completion with links
        ({}, (True, True)),
        # a script: it saves bytes, and pays for its call only for a large completion
        ({"FRONTIER_DEDUP_TTL": "60"}, (False, True)),
        ({"FRONTIER_DUPEFILTER": "bloom"}, (False, True)),
        ({"FRONTIER_DUPEFILTER": "compact"}, (False, True)),
        ({"FRONTIER_DUPEFILTER": "bloom", "FRONTIER_LINK_CHECK": "True"}, (True, True)),
        ({"FRONTIER_LINK_CHECK": "False"}, (False, False)),
        ({"FRONTIER_DUPEFILTER": "bloom", "FRONTIER_LINK_CHECK": "False"}, (False, False)),
    ],
)
def test_the_link_check_runs_where_it_saves_redis_cpu(
    values: dict[str, str], looked_up: tuple[bool, bool]
) -> None:
    """A page's 20 links, and a turn's 160 (8 pages settled at once)."""
    from settings import base

    settings = Settings({k: v for k, v in vars(base).items() if k.isupper()})
    settings.setdict({"REDIS_URL": "redis://localhost:6379/0", **values}, priority="cmdline")
    frontier = FrontierSettings.from_settings(settings)
    never_connects = Redis.from_url("redis://127.0.0.1:1")
    client = FrontierClient(
        never_connects, KEYS, "n", frontier.dedup, link_check=frontier.link_check
    )
    found = tuple(bool(client.to_look_up(requests("p", links))) for links in (20, 160))
    assert found == looked_up


def test_purge_removes_every_dedup_key(redis_url: str, redis_client: redis.Redis) -> None:
    grown = DedupConfig(DedupMode.BLOOM, capacity=1)  # 1 + 2 + 4 + 8 + ...: many chunks

    async def scenario() -> BloomState:
        for name, config in {**CONFIGS, "bloom": grown}.items():
            client = FrontierClient(Redis.from_url(redis_url), KEYS, name, config)
            await client.complete(None, "done", requests("p", 20))
            state = await client.bloom_state()
            await client.aclose()
        return state

    state = run(scenario())
    found = redis_client.keys("{unit}:dupefilter*")
    present = {key.decode() if isinstance(key, bytes) else key for key in found}
    chunks = sum(len(s.chunks) for s in state.layout[: state.slices])
    assert state.slices == 5 and chunks >= 5
    assert present == set(KEYS.dedup_keys()) - set(KEYS.bloom_chunks[chunks:])
    assert sorted(discover_spiders(redis_client)) == ["unit"]
    redis_client.delete(*present_keys(redis_client, "unit", keep_seeds=True))
    assert redis_client.keys("{unit}:*") == []


def test_other_modes_keys_are_reported(redis_url: str) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        exact = FrontierClient(Redis.from_url(redis_url), KEYS, "a", CONFIGS["exact"])
        bloom = FrontierClient(Redis.from_url(redis_url), KEYS, "b", CONFIGS["bloom"])
        before = await bloom.other_dedup_keys()
        await exact.complete(None, "done", requests("o", 1))
        after = await bloom.other_dedup_keys()
        await exact.aclose()
        await bloom.aclose()
        return before, after

    assert run(scenario()) == ([], [KEYS.dupefilter])


def test_a_node_of_another_dedup_mode_is_refused(redis_url: str, redis_client: redis.Redis) -> None:
    """A node with another FRONTIER_DUPEFILTER joined a running crawl with a warning only: it
    did not know what the others had recorded (an audit: 99 duplicates of 207 items). The
    crawl records its mode, and a node of another is refused, as one of another part count."""

    async def scenario() -> None:
        client = Redis.from_url(redis_url)

        def frontier(name: str, config: DedupConfig) -> PartitionedFrontier:
            return PartitionedFrontier.connect(
                client, "unit", name, 1, dedup=config, link_check=None
            )

        try:
            exact, bloom, again = (
                frontier("a", CONFIGS["exact"]),
                frontier("b", CONFIGS["bloom"]),
                frontier("c", CONFIGS["exact"]),
            )
            await exact.claim()
            await again.claim()
            with pytest.raises(DedupChanged, match=r"FRONTIER_DUPEFILTER=exact"):
                await bloom.claim()
            redis_client.delete(KEYS.dedup_mode)  # a crawl from before the record
            await exact.parts[0].complete(None, "done", requests("m", 1))
            with pytest.raises(DedupChanged, match="keys of another dedup"):
                await frontier("d", CONFIGS["bloom"]).claim()
        finally:
            await client.aclose()

    run(scenario())


def test_a_node_of_another_request_fingerprinter_is_refused(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A redeploy that changed REQUEST_FINGERPRINTER_CLASS resumed the crawl with a warning
    nowhere: every request had another fingerprint, and 149 of 160 pages were fetched twice
    (an audit). The crawl records its fingerprinter, and a node of another one is refused."""
    scrapy_s = "scrapy.utils.request.RequestFingerprinter"

    async def scenario() -> None:
        client = Redis.from_url(redis_url)

        def frontier(name: str, fingerprinter: str) -> PartitionedFrontier:
            return PartitionedFrontier.connect(
                client,
                "unit",
                name,
                1,
                dedup=CONFIGS["exact"],
                link_check=None,
                fingerprinter=fingerprinter,
            )

        try:
            await frontier("a", scrapy_s).claim()
            await frontier("b", scrapy_s).claim()
            with pytest.raises(FingerprinterChanged) as refused:
                await frontier("c", "project.fp.UrlOnly").claim()
        finally:
            await client.aclose()
        message = str(refused.value)
        assert f"fingerprints requests with {scrapy_s}" in message
        assert "this node has REQUEST_FINGERPRINTER_CLASS=project.fp.UrlOnly" in message
        assert f"start it with REQUEST_FINGERPRINTER_CLASS={scrapy_s}" in message
        assert "crawler purge 'unit'" in message or "crawler purge unit" in message

    run(scenario())
    assert redis_client.get(KEYS.fingerprinter) == b"scrapy.utils.request.RequestFingerprinter"


def test_report_counts_bloom_drops_apart_and_sums_them_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stats = get_crawler().stats
    assert stats is not None
    bloom = DedupReport(stats, CONFIGS["bloom"])
    children = [
        NewRequest(fingerprint("a"), 0.0, b'{"url": "http://a/"}'),
        NewRequest(fingerprint("b"), 0.0, b'{"url": "http://b/"}'),
        NewRequest("", 0.0, b'{"url": "http://c/"}'),
    ]
    with caplog.at_level(logging.DEBUG, logger="crawler.frontier.dedup_report"):
        bloom.completed(Completion("done", 2, (1,)), children)
    assert "http://b/ maybe seen before, dropped" in caplog.text
    layout = bloom_layout(1000, 0.001)
    state = BloomState(layout, slices=1, count=500)
    bloom.bloom_state(state)
    assert stats.get_value("dupefilter/bloom_maybe_seen") == 1
    assert stats.get_value("dupefilter/bloom_slices") == 1
    assert stats.get_value("dupefilter/bloom_fill") == 0.5
    assert stats.get_value("dupefilter/bloom_fp_rate") == state.false_positive_rate
    assert stats.get_value("dupefilter/filtered") is None
    with caplog.at_level(logging.INFO, logger="crawler.frontier.dedup_report"):
        bloom.summary()
    expected = f"about {state.false_positive_rate:.2f} of them false positives (1 new URLs"
    assert "1 requests dropped as maybe seen" in caplog.text
    assert expected in caplog.text
    assert "over capacity" not in caplog.text
    bloom.completed(Completion("done", 0, (0,)), children[:1])
    bloom.bloom_state(BloomState(layout, slices=len(layout), count=layout[-1].capacity * 8))
    with caplog.at_level(logging.INFO, logger="crawler.frontier.dedup_report"):
        bloom.summary()
    assert "the filter was sized for: its last slice is over capacity" in caplog.text
    assert "made by a node with another" not in caplog.text

    exact = DedupReport(stats, CONFIGS["exact"])
    exact.completed(Completion("done", 1, (0, 1)), children)
    assert stats.get_value("dupefilter/filtered") == 2
    assert stats.get_value("dupefilter/bloom_maybe_seen") == 2


def test_a_node_whose_bloom_settings_are_not_the_filters_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A node joining a crawl whose filter another node made with another error rate ran with
    no word, then warned that a slice 22% full was over capacity (it compared the filter's
    estimate with its own FRONTIER_BLOOM_ERROR_RATE: an audit)."""
    stats = get_crawler().stats
    assert stats is not None
    joining = DedupReport(stats, CONFIGS["bloom"])  # capacity 1000, rate 0.001
    layout = bloom_layout(1000, 0.9)  # the filter's: made by the first node
    child = NewRequest(fingerprint("a"), 0.0, b'{"url": "http://a/"}')
    with caplog.at_level(logging.INFO, logger="crawler.frontier.dedup_report"):
        for _ in range(2):
            joining.completed(Completion("done", 0, (0,)), [child])
            joining.bloom_state(BloomState(layout, slices=1, count=220))
            joining.summary()
    assert caplog.text.count("made by a node with another FRONTIER_DEDUP_CAPACITY") == 1
    assert "this node's (1000, 0.001)" in caplog.text
    assert "over capacity" not in caplog.text


def test_bloom_crawl_gets_every_page_exactly_once(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """Two nodes, a Bloom filter far smaller than the site: it grows; no page is missed."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "FRONTIER_DUPEFILTER": "bloom",
        "FRONTIER_DEDUP_CAPACITY": "50",
        "FRONTIER_BLOOM_ERROR_RATE": "0.000001",  # a missed page in a test run: ~1e-4
        "FRONTIER_LEASE_TIMEOUT": "4",
        "FRONTIER_HEARTBEAT_INTERVAL": "1",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
        "CRAWLER_STANDALONE_FEED": "",
    }
    with Site(300) as site:
        seed = functools.partial(redis_client.lpush, "pages:start_urls")
        node_logs = crawl_site_once(
            site, seed, nodes=2, workdir=tmp_path, env=env, settings=settings
        )
    keys = FrontierKeys.for_spider("pages")
    (summary,) = dedup_summary(redis_client, [keys])
    assert (summary.mode, summary.entries) == ("bloom", site.pages)
    assert not redis_client.exists(keys.dupefilter)
    assert discover_spiders(redis_client) == ["pages"]  # found by its Bloom keys alone
    snapshot = FrontierAdmin(redis_client, "pages").snapshot()
    (shown,) = snapshot["dedup_modes"]
    assert snapshot["dedup"] == site.pages
    assert shown["mode"] == "bloom"
    assert shown["fill"] is not None
    assert 0 < shown["fp_rate"] < 0.000001
    assert shown["bytes"] == summary.bytes
    assert "'dupefilter/bloom_maybe_seen'" in node_logs
    # Certain duplicates are only those a node drops from its own cache of what it sent.
    filtered = re.findall(r"'dupefilter/filtered': (\d+)", node_logs)
    assert filtered  # every page links back to "/": a node knows it sent that one already
    assert filtered == re.findall(r"'frontier/seen_cache_hit': (\d+)", node_logs)
    assert "dupefilter bloom" in node_logs
    assert int(redis_client.hget(keys.bloom_meta, "slices") or 0) >= 3  # 50, 100, 200 + ...


@pytest.mark.parametrize("mode", ["exact", "compact", "bloom"])
def test_a_fingerprinter_of_the_users_own_dedups_as_standalone_scrapy_does(
    mode: str, redis_url: str, tmp_path: Path
) -> None:
    """Its fingerprints are the canonical URLs, which share their first bytes: each page is
    still crawled once (not all but the first dropped as seen)."""
    with Site(30) as site:
        run = crawl(
            "pages",
            [site.url(0)],
            workdir=tmp_path,
            redis_url=redis_url,
            settings={
                "REQUEST_FINGERPRINTER_CLASS": "tests.spiders.fingerprints.UrlFingerprinter",
                "FRONTIER_DUPEFILTER": mode,
            },
        )
    assert run.urls() == site.all_urls(), run.log
    assert run.stat("item_scraped_count") == 30


@pytest.mark.parametrize("debug", [True, False])
def test_duplicates_are_logged_in_scrapy_s_words(
    debug: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Scrapy's dupefilter logs ``Filtered duplicate request: <GET url> (referer: ...)`` on
    ``scrapy.dupefilters`` (its tests pin the line); the frontier logged the URL alone on a
    logger of its own (an audit), and read every duplicate's record for it even when no line
    was logged."""
    spider = Spider.from_crawler(get_crawler(Spider), name="shop")
    requests = [
        Request(f"http://shop.test/p/{n}", method="POST", headers={"Referer": referer})
        # a Referer stored as bytes (not ASCII) was written as its tagged JSON (a review)
        for n, referer in enumerate(["http://shop.test/", "http://shop.test/é".encode()])
    ]
    with caplog.at_level(logging.DEBUG, logger="scrapy.dupefilters"):
        scrapy_filter = RFPDupeFilter(debug=debug)
        for request in requests:
            scrapy_filter.log(request, spider)
        scrapy_said = [(r.name, r.getMessage()) for r in caplog.records]
        caplog.clear()
        stats = get_crawler().stats
        assert stats is not None
        report = DedupReport(stats, CONFIGS["exact"], debug=debug)
        children = [
            NewRequest(f"f{n}", 0.0, codec.dumps(request.to_dict()))
            for n, request in enumerate(requests)
        ]
        report.completed(Completion("done", 0, (0, 1)), children)
    assert [(r.name, r.getMessage()) for r in caplog.records] == scrapy_said
    assert len(scrapy_said) == (2 if debug else 1)
