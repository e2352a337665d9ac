"""Dedup modes: bytes per URL, measured false-positive rate and insert rate.

    .venv/bin/python -m bench.dedup [--sizes 1000000,10000000] [--modes exact,compact,bloom]

For each mode and size N, a fresh local ``redis-server`` (no persistence) gets N
synthetic fingerprints through the real path: ``FrontierClient.complete`` with
``--batch`` children per call (the queue and request bodies it also writes are
deleted after every call, outside the timing). Bytes per URL: the ``used_memory``
delta of the whole server and the ``MEMORY USAGE ... SAMPLES 0`` of the dedup keys,
divided by N. Before each reading the slow log is emptied (its entries keep copies of slow
calls' arguments); before the first one, a call of ``--batch`` children is made on other
keys (Redis keeps about 300 KB after its first large script call, in no key). False
positives: N/10 fresh fingerprints sent the same way, counted
when reported as seen; a Bloom filter is probed on a copy, refreshed every
N/1000 probes, so probing does not fill it. The Bloom filter is sized for N
(``FRONTIER_DEDUP_CAPACITY = N``); ``bloom/10`` is sized for N/10: at 10x its capacity it
uses four slices. Insert rate: fingerprints per second of ``complete`` calls, one
client, one call at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from crawler.devservices import RedisServer, RedisServerConfig, free_port
from crawler.frontier.client import FrontierClient, NewRequest
from crawler.frontier.dedup import DedupConfig, DedupMode
from crawler.frontier.keys import FrontierKeys, queue_pattern
from crawler.redis_connection import AsyncRedis, async_client

KEYS = FrontierKeys.for_spider("bench")
PROBE_KEYS = FrontierKeys.for_spider("probe")
WARMUP_KEYS = FrontierKeys.for_spider("warmup")
MODES = {
    "exact": (DedupMode.EXACT, 1),
    "compact": (DedupMode.COMPACT, 1),
    "bloom": (DedupMode.BLOOM, 1),
    "bloom/10": (DedupMode.BLOOM, 10),
}


@dataclass(frozen=True)
class Row:
    mode: str
    size: int
    used_memory: int
    memory_usage: int
    false_positives: int
    probes: int
    estimate: str
    rate: float

    def markdown(self) -> str:
        return (
            f"| {self.mode} | {self.size:,} | {self.used_memory / self.size:.2f} "
            f"| {self.memory_usage / self.size:.2f} "
            f"| {self.false_positives / self.probes:.5%} ({self.false_positives}) "
            f"| {self.estimate} | {self.rate:,.0f} |"
        )


def fingerprints(prefix: bytes, start: int, count: int) -> list[NewRequest]:
    return [
        NewRequest(hashlib.sha1(prefix + i.to_bytes(8, "big")).hexdigest(), 0.0, b"{}")
        for i in range(start, start + count)
    ]


async def used_memory(redis: AsyncRedis) -> int:
    await asyncio.sleep(3)  # let the server trim idle client buffers
    await redis.slowlog_reset()
    return int((await redis.info("memory"))["used_memory"])


async def drop_queue(redis: AsyncRedis, keys: FrontierKeys) -> None:
    queue = [key async for key in redis.scan_iter(match=queue_pattern(keys))]
    await redis.delete(*queue, keys.seq)


async def insert(client: FrontierClient, size: int, batch: int) -> float:
    """Insert ``size`` fingerprints; return the seconds spent in ``complete``."""
    spent = 0.0
    for start in range(0, size, batch):
        children = fingerprints(b"seen", start, min(batch, size - start))
        began = time.perf_counter()
        result = await client.complete(None, "done", children)
        spent += time.perf_counter() - began
        if result.duplicates and client.dedup.snippet != "dedup_bloom":
            raise AssertionError(f"{result.duplicates} fresh fingerprints taken as seen")
        await drop_queue(client.redis, client.keys)
    return spent


async def probe(redis: AsyncRedis, config: DedupConfig, size: int, batch: int) -> int:
    """False positives among ``size // 10`` fresh fingerprints."""
    bloom = config.mode is DedupMode.BLOOM
    prober = FrontierClient(redis, PROBE_KEYS if bloom else KEYS, "probe", config)
    refresh = max(batch, size // 1000)
    found = 0
    for start in range(0, size // 10, batch):
        if bloom and start % refresh == 0:
            pairs = zip(KEYS.bloom_chunks, PROBE_KEYS.bloom_chunks, strict=True)
            for key, copy in [(KEYS.bloom_meta, PROBE_KEYS.bloom_meta), *pairs]:
                await redis.copy(key, copy, replace=True)
        children = fingerprints(b"new", start, min(batch, size // 10 - start))
        found += (await prober.complete(None, "done", children)).duplicates
        await drop_queue(redis, prober.keys)
    return found


async def measure(url: str, name: str, size: int, batch: int) -> Row:
    mode, shrink = MODES[name]
    config = DedupConfig(mode, capacity=max(1, size // shrink))
    redis = async_client(url, socket_timeout=600)  # emptying 10M entries takes seconds
    await redis.flushall()
    warmup = FrontierClient(redis, WARMUP_KEYS, "warmup", config)
    await warmup.complete(None, "done", fingerprints(b"warmup", 0, batch))  # loads the script
    await redis.delete(*WARMUP_KEYS.all())
    client = FrontierClient(redis, KEYS, "bench", config)
    before = await used_memory(redis)
    spent = await insert(client, size, batch)
    after = await used_memory(redis)
    usage = 0
    for key in client.dedup.keys(KEYS):
        usage += int(await redis.memory_usage(key, samples=0) or 0)
    estimate = "-"
    if mode is DedupMode.BLOOM:
        state = await client.bloom_state()
        estimate = f"{state.false_positive_rate:.5%} ({state.slices} slices)"
    false_positives = await probe(redis, config, size, batch)
    await redis.aclose()
    return Row(
        name, size, after - before, usage, false_positives, size // 10, estimate, size / spent
    )


async def call_cost(url: str, capacity: int, multiples: list[int], batch: int) -> list[float]:
    """Milliseconds per ``complete`` call of ``batch`` fresh fingerprints once the compact
    filter (sized for ``capacity``) holds each of ``multiples`` x its capacity."""
    config = DedupConfig(DedupMode.COMPACT, capacity=capacity)
    redis = async_client(url, socket_timeout=600)
    await redis.flushall()
    client = FrontierClient(redis, KEYS, "bench", config)
    costs, held, calls = [], 0, 20
    for multiple in multiples:
        while held < multiple * capacity:
            count = min(batch, multiple * capacity - held)
            await client.complete(None, "done", fingerprints(b"fill", held, count))
            await drop_queue(redis, KEYS)
            held += count
        spent = 0.0
        for _ in range(calls):
            children = fingerprints(b"fill", held, batch)  # fresh: past those held
            began = time.perf_counter()
            await client.complete(None, "done", children)
            spent += time.perf_counter() - began
            await drop_queue(redis, KEYS)
            held += batch
        costs.append(spent * 1000 / calls)
    await redis.aclose()
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dedup", description=__doc__)
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--batch", type=int, default=1000, help="children per complete() call")
    parser.add_argument(
        "--flat",
        type=int,
        default=0,
        metavar="CAPACITY",
        help="instead: ms per complete() call of --batch new URLs in a compact filter of "
        "CAPACITY at 1x, 4x and 16x its capacity",
    )
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    names = args.modes.split(",")
    unknown = set(names) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}; choose from {', '.join(MODES)}")
    workdir = Path(tempfile.mkdtemp(prefix="bench-dedup-"))
    server = RedisServer(
        RedisServerConfig(port=free_port(), data_dir=workdir / "redis", appendonly=False)
    )
    server.start()
    if args.flat:
        multiples = [1, 4, 16]
        try:
            costs = asyncio.run(call_cost(server.url, args.flat, multiples, args.batch))
        finally:
            server.stop()
        print(f"| compact, capacity {args.flat:,} | " + " | ".join(f"{m}x" for m in multiples))
        print("|---|" + "---|" * len(multiples))
        print(f"| ms per {args.batch}-URL call | " + " | ".join(f"{c:.1f}" for c in costs))
        return
    try:
        print("| mode | URLs | B/URL (used_memory) | B/URL (MEMORY USAGE) | measured FP rate "
              "(count) | estimated FP rate | inserts/s |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        for size in sizes:
            for name in names:
                row = asyncio.run(measure(server.url, name, size, args.batch))
                print(row.markdown(), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
