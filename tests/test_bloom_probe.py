"""Bloom positions computed on the node are the ones the filter in Redis holds."""

from __future__ import annotations

import asyncio
import hashlib

import redis
from redis.asyncio import Redis

from crawler.frontier.bloom_probe import draws, geometry, locate, split_digest
from crawler.frontier.client import FrontierClient, NewRequest
from crawler.frontier.dedup import DedupConfig, DedupMode, DedupStep
from crawler.frontier.dedup_bloom import BloomState, bloom_layout
from crawler.frontier.keys import FrontierKeys

KEYS = FrontierKeys.for_spider("probe")


def fingerprint(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()


def request(name: str) -> NewRequest:
    return NewRequest(fingerprint(name), 0.0, b"{}")


def test_the_bits_of_a_fingerprint_are_where_the_node_computes_them(
    redis_url: str, redis_client: redis.Redis
) -> None:
    config = DedupConfig(DedupMode.BLOOM, capacity=1000, error_rate=0.001)

    async def add() -> None:
        client = FrontierClient(Redis.from_url(redis_url), KEYS, "a", config, link_check=False)
        await client.complete(None, "done", [request("only")])
        await client.aclose()

    asyncio.run(add())
    (first, *_) = geometry(bloom_layout(1000, 0.001))
    h1, seed = split_digest(DedupStep.digest(fingerprint("only")))
    key, start = locate(first, h1)
    chunk = redis_client.get(KEYS.bloom_chunks[key])
    assert isinstance(chunk, bytes)
    found = {
        8 * at + bit - 8 * start
        for at, byte in enumerate(chunk)
        for bit in range(8)
        if byte >> bit & 1
    }
    assert found == set(draws(seed, first.hashes))


def test_the_node_check_answers_as_the_script_does_over_many_slices(redis_url: str) -> None:
    """A filter grown to several slices (capacity 150): the link check, made on the node from
    the blocks it reads, says what the script's own lookup says, fingerprint by fingerprint."""
    config = DedupConfig(DedupMode.BLOOM, capacity=150, error_rate=0.01)

    async def scenario() -> tuple[list[bool], list[bool], int]:
        client = FrontierClient(Redis.from_url(redis_url), KEYS, "a", config, link_check=False)
        for start in range(0, 1200, 100):
            batch = [request(f"added{n}") for n in range(start, start + 100)]
            await client.complete(None, "done", batch)
        probes = [fingerprint(f"added{n}") for n in range(0, 1200, 3)]
        probes += [fingerprint(f"other{n}") for n in range(3000)]
        on_node = await client.seen(probes)
        args = client.dedup.seen_args(probes)
        in_script = [bool(flag) for flag in await client._seen(keys=client._dedup_keys, args=args)]
        slices = (await client.bloom_state()).slices
        await client.aclose()
        return on_node, in_script, slices

    on_node, in_script, slices = asyncio.run(scenario())
    assert slices >= 4
    assert on_node == in_script
    assert all(on_node[:400])  # every fingerprint added is seen
    assert 0 < sum(on_node[400:]) < 300  # false positives, around the 1% the filter allows


def test_writes_at_the_nodes_positions_leave_the_filter_as_the_script_would(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The same batches (repeats, a link with no fingerprint, slices filling up) through a node
    that sends positions and one that sends only the 12 bytes: the same answers, and the
    filters byte for byte alike; most writes used the positions."""
    config = DedupConfig(DedupMode.BLOOM, capacity=150, error_rate=0.01)
    batches = [
        [request(f"u{(n * 7 + b * 31) % 900}") for n in range(40)] + [NewRequest("", 0.0, b"{}")]
        for b in range(40)
    ]
    fast, slow = FrontierKeys.for_spider("fast"), FrontierKeys.for_spider("slow")

    async def write(keys: FrontierKeys, positions: bool) -> tuple[list[object], list[str]]:
        client = FrontierClient(Redis.from_url(redis_url), keys, "a", config, link_check=True)
        assert client._bloom is not None
        learnt: list[str] = []
        learn = client._bloom.learn

        def spying(feedback: str) -> None:
            learnt.append(feedback)
            learn(feedback)

        client._bloom.learn = spying  # type: ignore[method-assign]
        if not positions:
            client._bloom.view = lambda: ""  # type: ignore[method-assign]
        answers: list[object] = []
        for batch in batches:
            done = await client.complete(None, "done", batch)
            answers.append((done.added, done.dropped))
        await client.aclose()
        return answers, learnt

    fast_answers, fast_learnt = asyncio.run(write(fast, True))
    slow_answers, slow_learnt = asyncio.run(write(slow, False))
    assert fast_answers == slow_answers
    assert fast_learnt.count("") > len(batches) // 2  # the positions were used
    assert slow_learnt.count("") == 0
    assert redis_client.hgetall(fast.bloom_meta) == redis_client.hgetall(slow.bloom_meta)
    state = BloomState.from_meta(*redis_client.hmget(fast.bloom_meta, BloomState.META_FIELDS))
    assert state.slices >= 3
    for mine, theirs in zip(fast.bloom_chunks, slow.bloom_chunks, strict=True):
        assert redis_client.get(mine) == redis_client.get(theirs)
