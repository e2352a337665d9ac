"""What a quarter of 53a9ec3's Redis CPU per page would take, measured before it is built.

    .venv/bin/python -m bench.layout_prototype [--pages 8000] [--nodes 12] [--repeat 2]

``bench.frontier_load``'s workload (12 simulated nodes, leases of 8, 20 links a page of which
16 were seen, heartbeats every 5 s, each node's ``SeenCache``), exact dedup, 8 pages a write,
Redis CPU per page on a fresh ``redis-server`` per run, every variant once per round and each
round starting one variant later:

- ``53a9ec3``: the frontier issue 14 started from (``BaselineLoad``);
- ``now``: the frontier as it is (``OursLoad``);
- ``now, one seen-cache``: the same, with one cache every node reads and fills: an ideal of
  nodes learning at once every link any node sent (``FRONTIER_SEEN_FEED`` learns it later:
  ``bench.frontier_load --seen-feed``);
- ``prototype``: a layout not built (``bench/layout_prototype.lua``): a write's bodies in one
  list entry, a lease batch as one record, arguments packed into a few strings, and the link
  check of a write sent in the round trip of the write before; exact dedup, one priority
  level, no failures, requeues, resends or reclaim, so a real one would cost more;
- ``prototype, own round trip``: the same with the link check in a round trip of its own;
- ``prototype, one seen-cache``: the prototype with the ideal cache.

Each row gives the run's Redis CPU per page, its ratio to the same round's ``53a9ec3``, and the
requests left queued at the end (the same in every variant but ``53a9ec3``, whose queue is not
counted: the same work was done).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
import redis.asyncio

from bench.frontier_load import (
    BASELINE_COMMIT,
    KEYS,
    BaselineLoad,
    Counters,
    Load,
    OursLoad,
    SimulatedNodes,
    children_of,
    fresh_redis,
    new_request,
)
from bench.load_workload import HEARTBEAT_SECONDS, LEASE_BATCH, UrlSpace, link_request
from crawler.frontier import codec
from crawler.frontier.client import NewRequest
from crawler.frontier.dedup import DIGEST_BYTES, DedupConfig, DedupMode
from crawler.frontier.seen_cache import SeenCache

WRITE = Path(__file__).with_name("layout_prototype.lua").read_text()
# Extend the node's batches, look for expired ones (the frontier's heartbeat reclaims them).
BEAT = """
local now = redis.call('TIME')
local deadline = now[1] * 1000 + math.floor(now[2] / 1000) + 60000
redis.call('ZADD', KEYS[2], deadline, ARGV[1])
redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', deadline - 60000, 'LIMIT', 0, 100)
local pairs = {}
for i = 2, #ARGV do
  pairs[#pairs + 1], pairs[#pairs + 2] = deadline, ARGV[i]
end
if #pairs > 0 then
  redis.call('ZADD', KEYS[1], 'XX', unpack(pairs))
end
return 1
"""
PROTO_KEYS = [
    f"{{proto}}:{name}"
    for name in ("seen", "queue", "count", "seq", "leases", "inflight", "fence", "waiting")
]
SHARED_CACHE_SIZE = 1_000_000  # holds every link of the run


def digest(request: NewRequest) -> bytes:
    return bytes.fromhex(request.fingerprint[: 2 * DIGEST_BYTES])


@dataclass
class Pending:
    """A write's pages to finish and the links its check found new, sent with the next write."""

    finishes: list[str]
    new: list[NewRequest]


@dataclass(frozen=True)
class PrototypeLoad(SimulatedNodes):
    nodes: int
    seen_cache: int
    paired: bool = True  # the link check rides with the write before
    shared_cache: SeenCache | None = None

    async def _fill(self, url: str, count: int, space: UrlSpace) -> None:
        client = redis.asyncio.Redis.from_url(url)
        for start in range(0, count, 32):
            batch = [
                new_request(link_request(space.fresh(), "http://seed/"))
                for _ in range(min(32, count - start))
            ]
            await client.sadd(PROTO_KEYS[0], *(digest(request) for request in batch))
            entry = b"%d\n" % len(batch) + framed([request.body for request in batch])
            await client.rpush(PROTO_KEYS[1], entry)
            await client.incrby(PROTO_KEYS[2], len(batch))
        await client.aclose()

    async def _node(self, node: str, url: str, space: UrlSpace, quota: list[int]) -> None:
        client = redis.asyncio.Redis.from_url(url)
        write, beat = await client.script_load(WRITE), await client.script_load(BEAT)
        cache = self.shared_cache if self.shared_cache is not None else SeenCache(self.seen_cache)
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + HEARTBEAT_SECONDS
        held: list[tuple[str, bytes]] = []
        pending: Pending | None = None

        def send(pipe: Any, sent: Pending, want: int) -> None:
            digests, bodies = b"".join(digest(r) for r in sent.new), [r.body for r in sent.new]
            args: list[str | bytes | int] = [node, ",".join(sent.finishes), digests]
            args += [framed(bodies), want, 60_000, uuid.uuid4().hex]
            pipe.evalsha(write, len(PROTO_KEYS), *PROTO_KEYS, *args)

        async def round_trip(sent: Pending | None, want: int, check: list[NewRequest]) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            if sent is not None:
                send(pipe, sent, want)
            replies: list[Any] = []
            if check and not self.paired and sent is not None:
                replies, pipe = await pipe.execute(), client.pipeline(transaction=False)
            if check:
                pipe.smismember(PROTO_KEYS[0], [digest(request) for request in check])
            return [*replies, *await pipe.execute()]

        try:
            while quota[0] > 0:
                if not held and pending is None:
                    (reply,) = await round_trip(Pending([], []), LEASE_BATCH, [])
                    held = leased(reply)
                    if not held:
                        await asyncio.sleep(0.01)
                    continue
                pages, held = held[:LEASE_BATCH], held[LEASE_BATCH:]
                quota[0] -= len(pages)
                links = [
                    child
                    for _, body in pages
                    for child in children_of(cache, space.links(), codec.loads(body)["url"])
                ]
                want = LEASE_BATCH - len(held) if len(held) <= LEASE_BATCH // 2 else 0
                replies = await round_trip(pending, want if quota[0] > 0 else 0, links)
                if pending is not None:
                    held += leased(replies[0])
                found = replies[-1] if links else []
                pending = Pending(
                    [lease_id for lease_id, _ in pages],
                    [link for link, seen in zip(links, found, strict=True) if not seen],
                )
                if loop.time() >= next_beat:
                    batches = sorted({lease_id.split(".")[0] for lease_id, _ in held})
                    await client.evalsha(beat, 2, PROTO_KEYS[4], "{proto}:nodes", node, *batches)
                    next_beat += HEARTBEAT_SECONDS
            if pending is not None:
                await round_trip(pending, 0, [])
        finally:
            await client.aclose()


def framed(bodies: list[bytes]) -> bytes:
    """Bodies as the prototype keeps them: each after its length (2 bytes, big-endian)."""
    return b"".join(len(body).to_bytes(2, "big") + body for body in bodies)


def leased(reply: list[Any]) -> list[tuple[str, bytes]]:
    """The (lease id, body) pairs of a write's reply."""
    lease = reply[2]
    if not lease:
        return []
    batch, packed, bodies, at = lease[0].decode(), bytes(lease[2]), [], 0
    while at < len(packed):  # each body after its length (2 bytes, big-endian): ``framed``
        end = at + 2 + int.from_bytes(packed[at : at + 2], "big")
        bodies.append(packed[at + 2 : end])
        at = end
    return [(f"{batch}.{n}", body) for n, body in enumerate(bodies, start=1)]


def queued(client: redis.Redis) -> int | None:
    """Requests queued, in the prototype's layout or today's (None: 53a9ec3's, not counted)."""
    counts = [count for count in client.mget([PROTO_KEYS[2], KEYS.queue_count]) if count]
    return int(counts[0]) if counts else None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=8000)
    parser.add_argument("--nodes", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--seen-cache", type=int, default=100_000)
    args = parser.parse_args()
    exact, nodes, size = (
        DedupConfig(DedupMode.EXACT, capacity=1_000_000),
        args.nodes,
        args.seen_cache,
    )
    with tempfile.TemporaryDirectory(prefix="layout-prototype-") as tmp:
        tree = BaselineLoad.extract(BASELINE_COMMIT, Path(tmp) / "baseline")
        if tree is None:
            raise SystemExit("needs the repository's history for the baseline")
        shared: Callable[[], SeenCache] = lambda: SeenCache(SHARED_CACHE_SIZE)  # noqa: E731
        variants: list[tuple[str, Callable[[], Load]]] = [
            (BASELINE_COMMIT, lambda: BaselineLoad(tree, "exact", nodes, size)),
            ("now", lambda: OursLoad(exact, nodes, LEASE_BATCH, None, size)),
            (
                "now, one seen-cache",
                lambda: OursLoad(exact, nodes, LEASE_BATCH, None, size, shared()),
            ),
            ("prototype", lambda: PrototypeLoad(nodes, size)),
            ("prototype, own round trip", lambda: PrototypeLoad(nodes, size, paired=False)),
            ("prototype, one seen-cache", lambda: PrototypeLoad(nodes, size, True, shared())),
        ]
        cpu: dict[str, list[float]] = {name: [] for name, _ in variants}
        left: dict[str, int | None] = {}
        for round_ in range(args.repeat):
            for step in range(len(variants)):
                name, load = variants[(round_ + step) % len(variants)]
                with fresh_redis(Path(tmp) / f"{name}-{round_}") as (client, url):
                    before = Counters.read(client)
                    load().run(url, args.pages)
                    after = Counters.read(client)
                    cpu[name].append(after.cpu_since(before) * 1e6 / args.pages)
                    left[name] = queued(client)
    print(f"{args.pages} pages, {nodes} simulated nodes, exact dedup, 8 pages a write,", end=" ")
    print(f"{args.repeat} rounds")
    print("\n| variant | Redis CPU per page | vs 53a9ec3 | queued at the end |\n|---|---|---|---|")
    for name, runs in cpu.items():
        ratios = " / ".join(
            f"{run / base:.2f}x" for run, base in zip(runs, cpu[BASELINE_COMMIT], strict=True)
        )
        figures = " / ".join(f"{run:.1f}" for run in runs)
        count = left[name]
        print(f"| {name} | {figures} us | {ratios} | {'-' if count is None else f'{count:,}'} |")


if __name__ == "__main__":
    main()
