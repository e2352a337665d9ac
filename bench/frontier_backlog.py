"""Bounded Redis memory: many requests queued through ``FRONTIER_QUEUE_MAX``, then drained.

    .venv/bin/python -m bench.frontier_backlog [--requests 4000000] [--bound 200000]
        [--unbounded]

On a fresh ``redis-server`` (no persistence) and a Kafka broker (``KAFKA_BOOTSTRAP_SERVERS``,
else one started here, as ``make demo`` does), ``--requests`` requests, each a different URL
with the lean body of a typical link (the shape of ``bench.frontier_load``'s), go through
the real path: ``FrontierClient.complete`` in calls of ``--call`` requests into a frontier
with the bloom dedup sized for all of them, and the real ``Backlog`` stepping after every call, as a
node does every ``FRONTIER_SPILL_INTERVAL``, with ``FRONTIER_QUEUE_MAX = --bound``. Redis's
``used_memory`` is read after every step (its peak is reported). Then everything is
drained as nodes do: leases of 1,000 finished at once, the backlog stepping between
them, until nothing is queued, leased or in Kafka; every request's number is counted,
so a request lost or leased twice shows.

Baseline in the same run: bytes per queued request of the same requests with no bound
(``--baseline`` of them, in another fresh Redis), and the memory the whole run would
take unbounded at that rate; ``--unbounded`` measures the whole run unbounded instead, and
``--baseline-only`` measures only the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from bench.frontier_load import fresh_redis
from bench.load_workload import SPIDER, link_request
from crawler.demo.run import kafka_service
from crawler.frontier import codec
from crawler.frontier.backlog import Backlog
from crawler.frontier.backlog_settings import BacklogSettings
from crawler.frontier.client import Finish, FrontierClient, NewRequest
from crawler.frontier.dedup import DedupConfig, DedupMode
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.pending import pending_requests
from crawler.kafka.reader import end_offsets
from crawler.redis_connection import AsyncRedis, async_client
from crawler.redis_url import RedisConfig

KEYS = FrontierKeys.for_spider("spill")
# one per run: a broker given with KAFKA_BOOTSTRAP_SERVERS keeps an earlier run's messages
TOPIC = f"bench-backlog-{uuid.uuid4().hex[:8]}"
LEASE = 1000
SITES = 50


class Requests:
    """Request ``n``: its URL on one of ``SITES`` sites, and a lean body made by the codec,
    compressed as ``FRONTIER_COMPRESS`` (the default) stores it."""

    def __init__(self) -> None:
        marker = "http://site0.test:8000/p/MARKER.html"
        request = link_request(marker, "http://site0.test:8000/p/0.html")
        self.template = codec.dumps(request.to_dict(spider=SPIDER), lean=True, compress=False)
        assert self.template.count(b"MARKER") == 1
        assert self.template.count(b"site0.test") == 3

    def make(self, n: int) -> NewRequest:
        site = f"site{n % SITES}.test:8000"
        url = f"http://{site}/p/{n}.html"
        body = self.template.replace(b"MARKER", str(n).encode()).replace(
            b"site0.test:8000", site.encode()
        )
        digest = hashlib.sha1(url.encode()).hexdigest()
        return NewRequest(digest, 0.0, codec.deflate(body), site=site)

    @staticmethod
    def number(body: bytes) -> int:
        return int(codec.loads(body)["url"].rsplit("/", 1)[1].removesuffix(".html"))


@dataclass
class Run:
    requests: int
    peak_memory: int = 0  # used_memory's highest reading, bytes
    empty_memory: int = 0  # used_memory of the empty server
    fill_seconds: float = 0.0
    drain_seconds: float = 0.0
    spilled: int = 0
    refilled: int = 0
    dropped: int = 0  # taken for seen by the bloom filter (its false positives), never queued
    lost: int = 0
    twice: int = 0
    in_kafka: int = 0  # messages in the backlog topic

    def sample(self, memory: int) -> None:
        self.peak_memory = max(self.peak_memory, memory)


async def memory(redis: AsyncRedis) -> int:
    return int((await redis.info("memory"))["used_memory"])


def client(url: str, count: int) -> FrontierClient:
    config = DedupConfig(DedupMode.BLOOM, capacity=count)
    return FrontierClient(async_client(RedisConfig.from_url(url)), KEYS, "bench", config)


async def unbounded(url: str, count: int, call: int) -> float:
    """Bytes per queued request with no bound: ``count`` requests queued, nothing spilled."""
    frontier, made = client(url, count), Requests()
    empty = await memory(frontier.redis)
    for start in range(0, count, call):
        await frontier.complete(None, "done", [made.make(n) for n in range(start, start + call)])
    used = await memory(frontier.redis) - empty
    await frontier.aclose()
    return used / count


async def bounded(url: str, bootstrap: str, args: argparse.Namespace) -> Run:
    frontier, made, run = client(url, args.requests), Requests(), Run(args.requests)
    settings = BacklogSettings(
        queue_max=args.bound,
        batch=args.spill_batch,
        interval=0.1,
        topic=TOPIC,
        bootstrap=bootstrap,
        replication=1,
        ack_timeout=60.0,
    )
    backlog = Backlog([frontier], settings, lease_ms=600_000)
    try:
        await backlog.open()
        run.empty_memory = await memory(frontier.redis)
        counts = bytearray(args.requests)  # leases of each request (dropped ones: 255)
        started = time.monotonic()
        for start in range(0, args.requests, args.call):
            end = min(args.requests, start + args.call)
            result = await frontier.complete(
                None, "done", [made.make(n) for n in range(start, end)]
            )
            for position in result.dropped:
                counts[start + position] = 255
            run.dropped += len(result.dropped)
            step = await backlog.step()
            run.spilled += step.spilled
            run.sample(await memory(frontier.redis))
        run.fill_seconds = time.monotonic() - started
        started = time.monotonic()
        while await pending_requests(frontier.redis, [KEYS]):
            for _ in range(10):
                leases = await frontier.lease(LEASE, 600_000)
                for lease in leases:
                    number = Requests.number(lease.body)
                    counts[number] = min(254, counts[number] + 1)
                await frontier.complete_many([Finish(lease.id, "done") for lease in leases], [])
            step = await backlog.step()
            run.refilled += step.refilled
            run.sample(await memory(frontier.redis))
        run.drain_seconds = time.monotonic() - started
        run.lost = counts.count(0)
        run.twice = args.requests - run.dropped - run.lost - counts.count(1)
        run.in_kafka = sum(high for _, high in end_offsets(bootstrap, TOPIC).values())
    finally:
        await backlog.close()
        await frontier.aclose()
    return run


def megabytes(count: float) -> str:
    return f"{count / 2**20:,.0f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=4_000_000)
    parser.add_argument("--bound", type=int, default=200_000, help="FRONTIER_QUEUE_MAX")
    parser.add_argument("--spill-batch", type=int, default=10_000, help="FRONTIER_SPILL_BATCH")
    parser.add_argument("--call", type=int, default=5_000, help="requests per complete()")
    parser.add_argument("--baseline", type=int, default=1_000_000)
    parser.add_argument("--unbounded", action="store_true", help="baseline: all --requests")
    parser.add_argument("--baseline-only", action="store_true", help="no bounded run")
    args = parser.parse_args()
    baseline = args.requests if args.unbounded else min(args.baseline, args.requests)
    with tempfile.TemporaryDirectory(prefix="frontier-backlog-") as tmp:
        workdir = Path(tmp)
        with fresh_redis(workdir / "unbounded") as (_, url):
            per_request = asyncio.run(unbounded(url, baseline, args.call))
        if args.baseline_only:
            print(f"\n{baseline:,} requests queued, no bound: {per_request:.0f} B per request")
            return
        with (
            kafka_service(workdir) as (bootstrap, broker),
            fresh_redis(workdir / "bounded") as (_, url),
        ):
            run = asyncio.run(bounded(url, bootstrap, args))
            segments = broker.log_dirs.rglob(f"{TOPIC}-*/*.log") if broker else ()
            kafka_bytes = sum(segment.stat().st_size for segment in segments)
    held = run.peak_memory - run.empty_memory
    projected = per_request * args.requests
    measured = (
        "measured" if args.unbounded else f"{per_request:.0f} B x requests, from {baseline:,}"
    )
    print(
        f"\n{args.requests:,} requests, FRONTIER_QUEUE_MAX={args.bound:,}, bloom dedup for "
        f"{args.requests:,}, spill batch {args.spill_batch:,}\n"
    )
    print("| | Redis used_memory (over the empty server) | ratio |")
    print("|---|---|---|")
    print(f"| unbounded ({measured}) | {megabytes(projected)} | 1.00x |")
    print(f"| bounded, peak | {megabytes(held)} | {held / projected:.3f}x |")
    print(
        f"\nspilled to Kafka {run.spilled:,} ({run.in_kafka:,} messages in the topic"
        + (f", {megabytes(kafka_bytes)} in the broker's log segments" if kafka_bytes else "")
        + f"), read back {run.refilled:,}; lost {run.lost:,}, leased twice {run.twice:,}; "
        f"{run.dropped:,} never queued: the bloom filter took them for seen (false positives)"
    )
    print(
        f"fill {run.requests / run.fill_seconds:,.0f} requests/s, "
        f"drain {run.requests / run.drain_seconds:,.0f} requests/s"
    )


if __name__ == "__main__":
    main()
