"""Frontier load generator: Redis CPU and bytes per page, ours before/now vs scrapy-redis.

    .venv/bin/python -m bench.frontier_load [--pages 20000] [--nodes 12] [--modes exact,bloom]

Simulated nodes drive the frontier's Lua scripts exactly as ``LeasingScheduler``
does, without Scrapy's engine in the loop: lease batches of 8; for each leased
page one ``complete`` with 20 links, 16 of them already seen by the cluster (links
to pages enqueued before) and 4 new; a heartbeat every 5 s with the leases held.
Request bodies are real ``Request.to_dict()`` output through the frontier's codec. Each
node keeps the scheduler's ``SeenCache`` (``--seen-cache``, ``FRONTIER_SEEN_CACHE``'s
default): a link it sent before is dropped without a call. The seen links are drawn
uniformly from every URL of the crawl, so the cache catches few of them (a real site's
pages repeat their navigation links, which it catches all but once per node).
Variants, each on a fresh ``redis-server`` (no persistence), in one run:

- ``ours before``: every link's body sent, full request JSON (``FRONTIER_LINK_CHECK``
  off, ``codec.dumps(lean=False)``): the code path before these changes;
- ``ours now``: the defaults: lean requests, and the link check where it pays (every
  completion with the exact dedup; with compact and bloom, whose lookup is a script, only
  completions of at least ``SCRIPT_CHECK_MIN`` links); ``--link-check``: every completion;
- ``ours now, 8 per call``: the completions of a lease batch in one call, as the scheduler
  writes the leases that settle in one reactor turn (the most it can gather);
- ``scrapy-redis 0.9.1``: its own ``PriorityQueue`` (pickle) and ``RFPDupeFilter`` over
  the same workload: ``pop`` 8, then per link ``request_seen`` and ``push`` if new.

Figures per page, from the server's own counters between the start and the end of
the run: Redis CPU (``used_cpu_user_main_thread + used_cpu_sys_main_thread``), bytes
received (``total_net_input_bytes``); pages/s per Redis core = 1 / CPU per page;
memory per queued request (``used_memory`` delta over ``--queued`` requests
enqueued into an empty frontier). Then a short profiled pass (``SLOWLOG`` of every
command, which costs CPU itself, so it is kept apart) gives each script's p50/p99
server time and share of the time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import itertools
import random
import statistics
import tempfile
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import redis
from scrapy import Request, Spider
from scrapy.utils.request import fingerprint

from crawler.devservices import RedisServer, RedisServerConfig, free_port
from crawler.frontier import codec
from crawler.frontier.client import Finish, FrontierClient, LeaseAsk, NewRequest
from crawler.frontier.dedup import DedupConfig, DedupMode, DedupStep
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.seen_cache import SeenCache
from crawler.lua import frontier_script
from crawler.redis_connection import RedisConfig, async_client
from crawler.scope import site_of

KEYS = FrontierKeys.for_spider("load")
LEASE_BATCH, LINKS, NEW_LINKS = 8, 20, 4
HEARTBEAT_SECONDS = 5.0
SITES = 50


class LoadSpider(Spider):
    name = "load"

    def parse(self, response: Any) -> None:
        """The callback the links name (stored by name)."""


SPIDER = LoadSpider()


@dataclass(frozen=True)
class Figures:
    variant: str
    mode: str
    pages: int
    cpu_us: float  # Redis main-thread CPU per page
    system_share: float  # of it, in the kernel (socket reads and writes)
    bytes_in: float  # bytes Redis received per page
    queued_bytes: float  # used_memory per queued request
    scripts: dict[str, tuple[float, float, float]]  # name -> p50 us, p99 us, share of time

    def row(self, baseline: Figures) -> str:
        ratio = self.cpu_us / baseline.cpu_us
        return (
            f"| {self.variant} | {self.mode} | {self.cpu_us:.0f} us ({ratio:.2f}x), "
            f"{self.system_share:.0%} kernel "
            f"| {1e6 / self.cpu_us:,.0f} | {self.bytes_in / 1000:.1f} KB "
            f"| {self.queued_bytes:.0f} B |"
        )


class UrlSpace:
    """The workload's URLs: each page links 4 new URLs and 16 enqueued before."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.counter = itertools.count()
        self.known: list[str] = []

    def fresh(self) -> str:
        n = next(self.counter)
        url = f"http://site{n % SITES}.test:8000/p/{n}.html"
        self.known.append(url)
        return url

    def links(self) -> list[str]:
        seen = [self.random.choice(self.known) for _ in range(LINKS - NEW_LINKS)]
        return [self.fresh() for _ in range(NEW_LINKS)] + seen


def link_request(url: str, parent: str) -> Request:
    site = url.split("/")[2]
    return Request(
        url,
        callback=SPIDER.parse,
        meta={"depth": 3, "crawler_scope": site},
        headers={"Referer": parent},
    )


def new_request(request: Request, lean: bool) -> NewRequest:
    body = codec.dumps(request.to_dict(spider=SPIDER), lean=lean)
    return NewRequest(
        fingerprint=fingerprint(request).hex(),
        score=-float(request.priority),
        body=body,
        site=site_of(request.url),
    )


@contextlib.contextmanager
def fresh_redis(workdir: Path) -> Iterator[tuple[redis.Redis, str]]:
    server = RedisServer(RedisServerConfig(port=free_port(), data_dir=workdir, appendonly=False))
    server.start()
    client = redis.Redis.from_url(server.url)
    try:
        yield client, server.url
    finally:
        client.close()
        server.stop()


@dataclass(frozen=True)
class Counters:
    user: float  # CPU seconds of Redis's main thread
    system: float
    bytes_in: int
    commands: int  # commands processed (those scripts call included)
    memory: int

    @classmethod
    def read(cls, client: redis.Redis) -> Counters:
        cpu, stats, memory = client.info("cpu"), client.info("stats"), client.info("memory")
        return cls(
            float(cpu["used_cpu_user_main_thread"]),
            float(cpu["used_cpu_sys_main_thread"]),
            int(stats["total_net_input_bytes"]),
            int(stats["total_commands_processed"]),
            int(memory["used_memory"]),
        )


# -- ours -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OursLoad:
    """Simulated ``LeasingScheduler`` nodes on our frontier."""

    config: DedupConfig
    nodes: int
    lean: bool  # lean request JSON (codec.dumps(lean=True))
    check: bool | None  # FRONTIER_LINK_CHECK (None: unset, where it pays)
    batched: bool = False  # a lease batch's completions in one call (settled in one turn)
    seen_cache: int = 0  # FRONTIER_SEEN_CACHE: links this node sent before are dropped unsent

    def client(self, url: str, node: str) -> FrontierClient:
        redis_client = async_client(RedisConfig.from_url(url))
        return FrontierClient(redis_client, KEYS, node, self.config, link_check=self.check)

    def run(self, url: str, pages: int) -> None:
        asyncio.run(self._run(url, pages))

    def fill(self, url: str, count: int) -> None:
        asyncio.run(self._fill(url, count, UrlSpace(2)))

    async def _run(self, url: str, pages: int) -> None:
        space = UrlSpace(1)
        await self._fill(url, 2000, space)
        quota = [pages]
        nodes = (self._node(f"node-{n}", url, space, quota) for n in range(self.nodes))
        await asyncio.gather(*nodes)

    async def _fill(self, url: str, count: int, space: UrlSpace) -> None:
        client = self.client(url, "filler")
        for _ in range(0, count, 500):
            batch = [self._new(space.fresh(), "http://seed/") for _ in range(500)]
            await client.complete(None, "done", batch)
        await client.aclose()

    def _new(self, url: str, parent: str) -> NewRequest:
        return new_request(link_request(url, parent), self.lean)

    def _children(self, cache: SeenCache, links: list[str], parent: str) -> list[NewRequest]:
        """The page's links as the scheduler enqueues them: one whose fingerprint the node's
        ``SeenCache`` holds (it sent it before) is dropped without a call."""
        children = []
        for link in links:
            request = link_request(link, parent)
            if fingerprint(request).hex() in cache:
                continue
            child = new_request(request, self.lean)
            cache.add(child.fingerprint)
            children.append(child)
        return children

    async def _node(self, node: str, url: str, space: UrlSpace, quota: list[int]) -> None:
        client = self.client(url, node)
        loop = asyncio.get_running_loop()
        epoch = await client.open_epoch()
        cache = SeenCache(self.seen_cache)
        held: set[str] = set()
        next_beat = loop.time() + HEARTBEAT_SECONDS
        leases = await client.lease(LEASE_BATCH, 60_000) if self.batched else []
        try:
            while quota[0] > 0:
                if not self.batched:
                    leases = await client.lease(LEASE_BATCH, 60_000)
                held |= {lease.id for lease in leases}
                pages = [
                    (lease, self._children(cache, space.links(), codec.loads(lease.body)["url"]))
                    for lease in leases
                ]
                quota[0] -= len(leases)
                if self.batched:  # the turn's write finishes the batch and leases the next
                    finishes = [Finish(lease.id, "done") for lease, _ in pages]
                    ask = LeaseAsk(LEASE_BATCH if quota[0] > 0 else 0, 60_000, uuid.uuid4().hex)
                    write = await client.complete_many(
                        finishes, [c for _, kids in pages for c in kids], lease=ask
                    )
                    held.difference_update(lease.id for lease in leases)
                    leases = list(write.leases)
                else:
                    for lease, children in pages:
                        await client.complete(lease.id, "done", children)
                    held.difference_update(lease.id for lease in leases)
                if loop.time() >= next_beat:
                    await client.heartbeat(list(held), 60_000, 60_000, 100, epoch)
                    next_beat += HEARTBEAT_SECONDS
                if not leases:
                    await asyncio.sleep(0.01)
        finally:
            await client.aclose()


# -- scrapy-redis -----------------------------------------------------------------------------


def scrapy_redis_parts(client: redis.Redis) -> tuple[Any, Any]:
    from scrapy_redis.dupefilter import RFPDupeFilter  # noqa: PLC0415
    from scrapy_redis.queue import PriorityQueue  # noqa: PLC0415

    queue = PriorityQueue(client, SPIDER, "load:requests")
    return queue, RFPDupeFilter(client, "load:dupefilter")


@dataclass(frozen=True)
class ScrapyRedisLoad:
    """Simulated scrapy-redis nodes (threads: its client is synchronous)."""

    nodes: int

    def run(self, url: str, pages: int) -> None:
        space, lock, quota = UrlSpace(1), threading.Lock(), [pages]
        seeder = redis.Redis.from_url(url)
        queue, dupefilter = scrapy_redis_parts(seeder)
        for _ in range(2000):
            request = link_request(space.fresh(), "http://seed/")
            dupefilter.request_seen(request)
            queue.push(request)
        seeder.close()
        threads = [
            threading.Thread(target=self._node, args=(url, space, lock, quota))
            for _ in range(self.nodes)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def fill(self, url: str, count: int) -> None:
        client = redis.Redis.from_url(url)
        queue, _ = scrapy_redis_parts(client)
        space = UrlSpace(2)
        for _ in range(count):
            queue.push(link_request(space.fresh(), "http://seed/"))
        client.close()

    @staticmethod
    def _node(url: str, space: UrlSpace, lock: threading.Lock, quota: list[int]) -> None:
        client = redis.Redis.from_url(url)
        queue, dupefilter = scrapy_redis_parts(client)
        while True:
            with lock:
                if quota[0] <= 0:
                    break
            popped = [r for r in (queue.pop() for _ in range(LEASE_BATCH)) if r is not None]
            for parent in popped:
                with lock:
                    links = space.links()
                for link in links:
                    request = link_request(link, parent.url)
                    if not dupefilter.request_seen(request):
                        queue.push(request)
                with lock:
                    quota[0] -= 1
        client.close()


class Load(Protocol):
    def run(self, url: str, pages: int) -> None: ...

    def fill(self, url: str, count: int) -> None: ...


# -- measuring --------------------------------------------------------------------------------


def script_names(client: redis.Redis) -> dict[str, str]:
    """sha1 -> script name, for the frontier's scripts of every dedup mode."""
    names: dict[str, str] = {}
    for name in ("heartbeat", "release"):
        names[hashlib.sha1(frontier_script("queue", name).encode()).hexdigest()] = name
    for mode in DedupMode:
        step = DedupStep.for_config(DedupConfig(mode))
        names[hashlib.sha1(step.script("turn").encode()).hexdigest()] = "turn"
        names[hashlib.sha1(step.script("seen").encode()).hexdigest()] = "seen"
    return names


def profile(client: redis.Redis, run: Callable[[], None]) -> dict[str, tuple[float, float, float]]:
    """Each command's (script's) p50/p99 server time in us and share of the time."""
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1_000_000)
    client.slowlog_reset()
    run()
    entries = client.slowlog_get(1_000_000)
    client.config_set("slowlog-log-slower-than", 10_000)
    names = script_names(client)
    times: dict[str, list[int]] = defaultdict(list)
    for entry in entries:
        command = [
            part.decode(errors="replace") if isinstance(part, bytes) else str(part)
            for part in entry["command"].split()
        ]
        name = command[0].lower()
        if name == "evalsha" and len(command) > 1:
            name = names.get(command[1], "script")
        if name in ("slowlog", "config", "info"):
            continue
        times[name].append(int(entry["duration"]))
    total = sum(sum(values) for values in times.values()) or 1
    return {
        name: (
            statistics.median(values),
            sorted(values)[int(len(values) * 0.99) - 1] if len(values) > 1 else values[0],
            sum(values) / total,
        )
        for name, values in sorted(times.items(), key=lambda item: -sum(item[1]))
    }


def measure(
    variant: str, mode: str, load: Load, args: argparse.Namespace, workdir: Path
) -> Figures:
    with fresh_redis(workdir / f"{variant}-{mode}".replace(" ", "_")) as (client, url):
        before = Counters.read(client)
        load.run(url, args.pages)
        after = Counters.read(client)
        scripts = profile(client, lambda: load.run(url, args.profile_pages))
        client.flushall()
        empty = Counters.read(client).memory
        load.fill(url, args.queued)
        queued_bytes = (Counters.read(client).memory - empty) / args.queued
    return Figures(
        variant,
        mode,
        args.pages,
        cpu_us=(after.user + after.system - before.user - before.system) * 1e6 / args.pages,
        system_share=(after.system - before.system)
        / max(1e-9, after.user + after.system - before.user - before.system),
        bytes_in=(after.bytes_in - before.bytes_in) / args.pages,
        queued_bytes=queued_bytes,
        scripts=scripts,
    )


def print_tables(results: list[Figures], args: argparse.Namespace) -> None:
    baseline = results[0]
    print(
        f"\n{args.pages} pages, {args.nodes} simulated nodes, {LINKS} links per page "
        f"({LINKS - NEW_LINKS} seen); ratios against {baseline.variant} ({baseline.mode})\n"
    )
    print(
        "| variant | dedup | Redis CPU per page | pages/s per Redis core | bytes in per page "
        "| memory per queued request |"
    )
    print("|---|---|---|---|---|---|")
    for figures in results:
        print(figures.row(baseline))
    print(f"\nServer time per command (a profiled pass of {args.profile_pages} pages):\n")
    print("| variant | dedup | command | p50 us | p99 us | share of time |")
    print("|---|---|---|---|---|---|")
    for figures in results:
        for name, (p50, p99, share) in list(figures.scripts.items())[:4]:
            cells = f"{name} | {p50:.0f} | {p99:.0f} | {share:.0%}"
            print(f"| {figures.variant} | {figures.mode} | {cells} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--profile-pages", type=int, default=2_000)
    parser.add_argument("--nodes", type=int, default=12)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--modes", default="exact,compact,bloom")
    parser.add_argument("--no-scrapy-redis", action="store_true")
    parser.add_argument(
        "--seen-cache",
        type=int,
        default=100_000,
        help="each node's FRONTIER_SEEN_CACHE (its default; 0: every link goes to Redis)",
    )
    parser.add_argument(
        "--link-check", action="store_true", help="'ours now' checks the links of every completion"
    )
    args = parser.parse_args()
    results: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="frontier-load-") as tmp:
        workdir = Path(tmp)
        if not args.no_scrapy_redis:
            load = ScrapyRedisLoad(args.nodes)
            results.append(measure("scrapy-redis 0.9.1", "exact", load, args, workdir))
        for mode in args.modes.split(","):
            config = DedupConfig(DedupMode(mode), capacity=1_000_000)
            check = True if args.link_check else None  # None: the default, where it pays
            cache = args.seen_cache
            for variant, ours in (
                ("ours before", OursLoad(config, args.nodes, False, False, seen_cache=cache)),
                ("ours now", OursLoad(config, args.nodes, True, check, seen_cache=cache)),
                ("ours now, 8 per call", OursLoad(config, args.nodes, True, check, True, cache)),
            ):
                results.append(measure(variant, mode, ours, args, workdir))
    print_tables(results, args)


if __name__ == "__main__":
    main()
