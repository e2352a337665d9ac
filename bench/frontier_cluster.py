"""One spider's frontier on a local 3-master Redis Cluster: FRONTIER_PARTITIONS 1, 3 and 12.

    .venv/bin/python -m bench.frontier_cluster [--pages 8000] [--nodes 6] [--parts 1,3,12]

Simulated nodes drive ``PartitionedFrontier`` as ``LeasingScheduler`` does: lease batches
of 8, the batch's completions written as one reactor turn (``complete_turn``: links for
other parts first, then one call per part, the next 8 leased with the write of the part a
lease call would start at), a heartbeat in every part every 5 s, on the
workload of ``bench.frontier_load`` (20 links per page, 16 of them seen before). Links go
to the parent's own site with the share ``--same-site`` (default 0.8: pages mostly link
within their site) and to any of ``--sites`` (500) otherwise; a link to a site of another part is
a cross-part write.

Each variant runs on a fresh cluster (3 masters, equal slot ranges, no persistence).
Figures from each master's own counters, asked of it directly: Redis main-thread CPU
per page on each master and its share, the balance (busiest / idlest master), and the
capacity of the cluster = the pages/s it serves when its busiest master is saturated
(1 / that master's CPU per page), with its ratio to one part (the whole spider on one
master). This machine has 2 cores: the load generator, not Redis, limits the wall-clock
rate here, so the capacity is computed from Redis's CPU, not timed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import redis

from bench.frontier_load import Counters, new_request
from bench.load_workload import HEARTBEAT_SECONDS, IDLE_POLL_MS, LEASE_BATCH, link_request
from crawler.devservices import free_port
from crawler.devservices.redis_cluster import LocalRedisCluster, RedisClusterConfig
from crawler.frontier import codec
from crawler.frontier.client import Finish, Lease, LeaseAsk, NewRequest
from crawler.frontier.dedup import DedupConfig
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.redis_connection import AsyncRedis, async_client

SPIDER = "load"
LINKS, NEW_LINKS = 20, 4
MASTERS = 3


class SiteSpace:
    """URLs per site: a page links 4 new URLs and 16 enqueued before, each on the parent's
    site with the share ``same``, else on a random site."""

    def __init__(self, seed: int, same: float, sites: int) -> None:
        self.random = random.Random(seed)
        self.same = same
        self.sites = sites
        self.count = 0
        self.known: list[list[str]] = [[] for _ in range(sites)]

    def fresh(self, site: int) -> str:
        self.count += 1
        url = f"http://site{site}.test:8000/p/{self.count}.html"
        self.known[site].append(url)
        return url

    def _site(self, parent: int) -> int:
        return parent if self.random.random() < self.same else self.random.randrange(self.sites)

    def links(self, parent_url: str) -> list[str]:
        parent = int(parent_url.split("/")[2].split(".", maxsplit=1)[0].removeprefix("site"))
        fresh = [self.fresh(self._site(parent)) for _ in range(NEW_LINKS)]
        seen = []
        for _ in range(LINKS - NEW_LINKS):
            known = self.known[self._site(parent)] or self.known[parent]
            seen.append(self.random.choice(known))
        return fresh + seen


@dataclass(frozen=True)
class Result:
    parts: int
    pages: int
    cpu_us: list[float]  # per master, per page
    commands: float  # commands run per page, every master (those scripts run included)

    @property
    def busiest(self) -> float:
        return max(self.cpu_us)

    def row(self, baseline: Result) -> str:
        total = sum(self.cpu_us)
        shares = " / ".join(f"{cpu / total:.0%}" for cpu in self.cpu_us)
        capacity = 1e6 / self.busiest
        ratio = baseline.busiest / self.busiest
        balance = max(self.cpu_us) / max(1e-9, min(self.cpu_us))
        return (
            f"| {self.parts} | {' / '.join(f'{cpu:.0f}' for cpu in self.cpu_us)} us | {shares} "
            f"| {balance:.2f} | {total:.0f} us | {self.commands:.1f} "
            f"| {capacity:,.0f} ({ratio:.2f}x) |"
        )


@contextlib.contextmanager
def fresh_cluster(workdir: Path) -> Iterator[tuple[LocalRedisCluster, list[redis.Redis]]]:
    ports = tuple(free_port() for _ in range(MASTERS))
    bus = tuple(free_port() for _ in range(MASTERS))
    cluster = LocalRedisCluster(RedisClusterConfig(ports, bus, workdir))
    cluster.start()
    masters = [redis.Redis(host="127.0.0.1", port=port) for port in ports]
    try:
        yield cluster, masters
    finally:
        for master in masters:
            master.close()
        cluster.stop()


class ClusterLoad:
    def __init__(self, parts: int, nodes: int, same: float, sites: int) -> None:
        self.parts = parts
        self.nodes = nodes
        self.space = SiteSpace(1, same, sites)

    def frontier(self, client: AsyncRedis, node: str) -> PartitionedFrontier:
        return PartitionedFrontier.connect(
            client, SPIDER, node, self.parts, dedup=DedupConfig(), link_check=True
        )

    def _new(self, url: str, parent: str) -> NewRequest:
        return new_request(link_request(url, parent))

    async def fill(self, url: str, count: int) -> None:
        client = async_client(url, max_connections=8)
        frontier = self.frontier(client, "filler")
        urls = [self.space.fresh(n % self.space.sites) for n in range(count)]
        for start in range(0, count, 500):
            batch = [self._new(u, "http://seed/") for u in urls[start : start + 500]]
            await frontier.complete_turn(batch, [])
        await client.aclose()

    async def run(self, url: str, pages: int) -> None:
        quota = [pages]
        await asyncio.gather(*(self._node(url, f"node-{n}", quota) for n in range(self.nodes)))

    async def _node(self, url: str, node: str, quota: list[int]) -> None:
        client = async_client(url, max_connections=8)
        frontier = self.frontier(client, node)
        loop = asyncio.get_running_loop()
        epoch = await frontier.open_epoch()
        next_beat = loop.time() + HEARTBEAT_SECONDS
        calls = 0
        held: list[Lease] = []
        try:
            while quota[0] > 0:
                calls += 1
                if not held:  # the buffer ran dry: a lease call of its own
                    held = await frontier.lease(
                        LEASE_BATCH, 60_000, f"{node}-{calls}", idle_ms=IDLE_POLL_MS
                    )
                    if not held:
                        await asyncio.sleep(0.01)
                        continue
                    calls += 1
                settled = []
                for lease in held:
                    parent = codec.loads(lease.body)["url"]
                    links = [self._new(link, parent) for link in self.space.links(parent)]
                    settled.append((Finish(lease.id, "done"), links))
                quota[0] -= len(held)
                # the turn's write leases the next batch in the same call (TurnWriter)
                ask = LeaseAsk(LEASE_BATCH if quota[0] > 0 else 0, 60_000, f"{node}-{calls}")
                held = list((await frontier.complete_turn([], settled, ask)).leases)
                if loop.time() >= next_beat:
                    await frontier.heartbeat([], 60_000, 60_000, 100, epoch)
                    next_beat += HEARTBEAT_SECONDS
        finally:
            await client.aclose()


def measure(parts: int, args: argparse.Namespace, workdir: Path) -> Result:
    with fresh_cluster(workdir / f"parts-{parts}") as (cluster, masters):
        load = ClusterLoad(parts, args.nodes, args.same_site, args.sites)
        asyncio.run(load.fill(cluster.url, 2000))
        before = [Counters.read(master) for master in masters]
        asyncio.run(load.run(cluster.url, args.pages))
        after = [Counters.read(master) for master in masters]
    cpu = [a.cpu_since(b) * 1e6 / args.pages for a, b in zip(after, before, strict=True)]
    commands = sum(a.commands - b.commands for a, b in zip(after, before, strict=True))
    return Result(parts, args.pages, cpu, commands / args.pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=8_000)
    parser.add_argument("--nodes", type=int, default=6)
    parser.add_argument("--parts", default="1,3,12")
    parser.add_argument("--same-site", type=float, default=0.8)
    parser.add_argument("--sites", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="frontier-cluster-") as tmp:
        results = [measure(int(parts), args, Path(tmp)) for parts in args.parts.split(",")]
    baseline = results[0]
    print(
        f"\n{args.pages} pages, {args.nodes} simulated nodes, {LINKS} links per page "
        f"({LINKS - NEW_LINKS} seen, {args.same_site:.0%} on the parent's site, "
        f"{args.sites} sites), exact dedup, "
        f"{MASTERS} masters; ratios against {baseline.parts} part\n"
    )
    print(
        "| FRONTIER_PARTITIONS | Redis CPU per page, each master | share per master "
        "| busiest / idlest | cluster CPU per page | commands per page "
        "| cluster capacity, pages/s |"
    )
    print("|---|---|---|---|---|---|---|")
    for result in results:
        print(result.row(baseline))


if __name__ == "__main__":
    main()
