"""Frontier load generator: Redis CPU and bytes per page, ours now vs the code issue 14
started from vs scrapy-redis.

    .venv/bin/python -m bench.frontier_load [--pages 20000] [--nodes 12] [--modes exact,bloom]
        [--seen-feed]

Simulated nodes drive the frontier's Lua scripts as ``LeasingScheduler`` does, without
Scrapy's engine in the loop: leases of 8; for each leased page 20 links, 16 of them already
seen by the cluster (links to pages enqueued before) and 4 new; a heartbeat every 5 s with
the leases held (``bench.load_workload``). Request bodies are real ``Request.to_dict()``
output through the frontier's codec (compressed: ``FRONTIER_COMPRESS``'s default; the
53a9ec3 variant stores its own, JSON). Each node keeps the scheduler's ``SeenCache``
(``--seen-cache``, ``FRONTIER_SEEN_CACHE``'s default): a link it sent before is dropped
without a call. The seen links are drawn uniformly from every URL of the crawl, so the cache
catches few of them (a real site's pages repeat their navigation links, which it catches
all but once per node). Variants, each on a fresh ``redis-server`` (no persistence) whose
main thread has the first core to itself (the simulated nodes and the broker run on the others:
on a small machine they would otherwise share its core and inflate the CPU time it counts), in
one run:

- ``ours at <commit>``: the frontier of the commit issue 14 measured when it was filed
  (``BASELINE_COMMIT``: before lean requests, the link check, batched writes and the queue's
  lists), taken with ``git archive`` and driven by ``bench/frontier_baseline.py`` as its
  scheduler did: one completion per page with every link's body, a lease call per 8
  (needs the repository's history; skipped with a note without it);
- ``ours now, a page a write``: the defaults, each write finishing one page (a reactor turn
  that settles one lease), the node's 8 leases refilled by the write that leaves 4;
- ``ours now, 8 pages a write``: the 8 pages of a lease batch settled in one turn, written
  in one call that leases the next 8 (the most a turn gathers);
- ``ours now, seen feed`` (``--seen-feed``): 8 pages a write, each simulated node with the
  seen feed (``FRONTIER_SEEN_FEED``: a producer and a consumer of its own, on the broker of
  ``KAFKA_BOOTSTRAP_SERVERS`` or one the bench starts), so its cache also learns what the
  others recorded, and the link check off (its default with the feed); the bench then prints
  how late the nodes learned it;
- ``scrapy-redis 0.9.1``: its own ``PriorityQueue`` (pickle) and ``RFPDupeFilter`` over
  the same workload: ``pop`` 8, then per link ``request_seen`` and ``push`` if new.

Each variant runs ``--repeat`` times (3), a round of every variant at a time, each round
starting one variant later: the load of this shared machine drifts by tens of percent over
minutes, so a variant's figure is the median of its runs and a ratio is the median of the
ratios of runs made side by side. Figures per page, from the server's own counters between
the start and the end of a run: Redis CPU (``used_cpu_user_main_thread`` +
``used_cpu_sys_main_thread``), bytes received (``total_net_input_bytes``); pages/s per Redis
core = 1 / CPU per page; memory per queued request (``used_memory`` delta over ``--queued`` requests
enqueued into an empty frontier). Then a short profiled pass (``SLOWLOG`` of every
command, which costs CPU itself, so it is kept apart) gives each script's p50/p99
server time and share of the time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import redis
from scrapy import Request
from scrapy.utils.request import fingerprint

from bench.load_workload import (
    HEARTBEAT_SECONDS,
    IDLE_POLL_MS,
    LEASE_BATCH,
    LINKS,
    NEW_LINKS,
    SPIDER,
    UrlSpace,
    link_request,
)
from crawler.demo.nodes import REPO_ROOT
from crawler.devservices import RedisServer, RedisServerConfig, free_port
from crawler.frontier import codec
from crawler.frontier.client import Finish, FrontierClient, Lease, LeaseAsk, NewRequest
from crawler.frontier.dedup import DedupConfig, DedupMode, DedupStep
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.seen_cache import SeenCache
from crawler.frontier.seen_feed import CLOCK_MARGIN, SeenFeed, SeenFeedSettings
from crawler.frontier.turn_writer import split_recorded
from crawler.lua import frontier_script
from crawler.redis_connection import async_client
from crawler.redis_url import RedisConfig
from crawler.scope import site_of
from tests.services import kafka_service

KEYS = FrontierKeys.for_spider("load")
FEED_TOPIC = "load-frontier-seen"  # every run has an epoch of its own: earlier runs' are stale
# The code issue 14 measured its starting figures on (127-158 us of Redis CPU and 9.9 KB per
# page, exact dedup): the commit before lean requests and the link check.
BASELINE_COMMIT = "53a9ec3"


@dataclass(frozen=True)
class Figures:
    """One variant over ``--repeat`` runs: Redis CPU per page of each run, the rest of the
    first (which also profiles and measures memory)."""

    variant: str
    mode: str
    pages: int
    cpu_us: list[float]  # Redis main-thread CPU per page, per run
    system_share: float  # of it, in the kernel (socket reads and writes)
    bytes_in: float  # bytes Redis received per page
    queued_bytes: float  # used_memory per queued request
    scripts: dict[str, tuple[float, float, float]]  # name -> p50 us, p99 us, share of time

    @property
    def median(self) -> float:
        return statistics.median(self.cpu_us)

    def ratio(self, other: Figures | None) -> str:
        """The median of the run-by-run ratios (run i of each was measured side by side)."""
        if other is None:
            return "-"
        pairs = zip(self.cpu_us, other.cpu_us, strict=False)
        return f"{statistics.median(mine / theirs for mine, theirs in pairs):.2f}x"

    def row(self, scrapy_redis: Figures | None, start: Figures | None) -> str:
        spread = f" ({min(self.cpu_us):.0f}-{max(self.cpu_us):.0f})" if len(self.cpu_us) > 1 else ""
        return (
            f"| {self.variant} | {self.mode} | {self.median:.0f} us{spread}, "
            f"{self.system_share:.0%} kernel | {self.ratio(start)} | {self.ratio(scrapy_redis)} "
            f"| {1e6 / self.median:,.0f} | {self.bytes_in / 1000:.1f} KB "
            f"| {self.queued_bytes:.0f} B |"
        )


def new_request(request: Request, lean: bool = True) -> NewRequest:
    body = codec.dumps(request.to_dict(spider=SPIDER), lean=lean)
    return NewRequest(
        fingerprint=fingerprint(request).hex(),
        score=-float(request.priority),
        body=body,
        site=site_of(request.url),
    )


def children_of(cache: SeenCache, links: list[str], parent: str) -> list[NewRequest]:
    """A page's links as the scheduler enqueues them: one whose fingerprint the node's
    ``SeenCache`` holds (it sent it before) is dropped without a call."""
    children = []
    for link in links:
        request = link_request(link, parent)
        if fingerprint(request).hex() in cache:
            continue
        child = new_request(request)
        cache.add(child.fingerprint)
        children.append(child)
    return children


CORES = sorted(os.sched_getaffinity(0))  # the machine's, as this process found them


def keep_off_redis_core() -> None:
    """This thread (and the threads and processes it starts from now on: the simulated
    nodes, a Kafka broker) off the core ``fresh_redis`` gives Redis: on a small machine the
    load generator would otherwise share Redis's core and inflate the CPU time it counts."""
    if len(CORES) > 1:
        os.sched_setaffinity(0, CORES[1:])


@contextlib.contextmanager
def fresh_redis(workdir: Path) -> Iterator[tuple[redis.Redis, str]]:
    """A ``redis-server`` without persistence, its main thread alone on the first core."""
    keep_off_redis_core()
    server = RedisServer(RedisServerConfig(port=free_port(), data_dir=workdir, appendonly=False))
    server.start()
    client = redis.Redis.from_url(server.url)
    if len(CORES) > 1:
        os.sched_setaffinity(int(client.info("server")["process_id"]), CORES[:1])
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

    def cpu_since(self, before: Counters) -> float:
        """CPU seconds of Redis's main thread between ``before`` and these counters."""
        return self.user + self.system - before.user - before.system


# -- ours -------------------------------------------------------------------------------------


class SimulatedNodes:
    """A load whose ``nodes`` are coroutines of this process, sharing one ``UrlSpace``: a run
    fills the queue with 2,000 requests, then the nodes crawl ``pages`` in all."""

    nodes: int

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
        raise NotImplementedError

    async def _node(self, node: str, url: str, space: UrlSpace, quota: list[int]) -> None:
        raise NotImplementedError


@dataclass
class FeedReport:
    """What the nodes of a load sent to Redis, and how late the seen feed taught them."""

    pages: int = 0
    sent: int = 0  # links past the node's seen-cache (looked up, or sent with their bodies)
    delays: list[float] = field(default_factory=list)  # s from a message sent to it read

    def line(self, variant: str, mode: str) -> str:
        if not self.delays:
            return f"{variant} ({mode}): {self.sent / max(1, self.pages):.2f} links a page"
        p5, p50, p95 = (statistics.quantiles(self.delays, n=20)[i] for i in (0, 9, 18))
        return (
            f"{variant} ({mode}): {self.sent / max(1, self.pages):.2f} links a page; a node "
            f"read another's fingerprints {p50:.2f} s after they were sent (median; {p5:.2f} s "
            f"at the 5th percentile, {p95:.2f} s at the 95th)"
        )


@dataclass(frozen=True)
class OursLoad(SimulatedNodes):
    """Simulated ``LeasingScheduler`` nodes on our frontier: each keeps up to 8 leases
    (``FRONTIER_PREFETCH``) and writes ``per_write`` settled pages at a time; a write that
    leaves half of them or fewer refills them in the same call (``Prefetch``)."""

    config: DedupConfig
    nodes: int
    per_write: int  # pages settled in one reactor turn: 1, or LEASE_BATCH
    check: bool | None = None  # FRONTIER_LINK_CHECK (None: unset, where it pays)
    seen_cache: int = 0  # FRONTIER_SEEN_CACHE: links this node sent before are dropped unsent
    # one cache every node reads and fills, instead of one each (bench.layout_prototype's ideal)
    shared_cache: SeenCache | None = None
    feed: str = ""  # Kafka's bootstrap servers: the nodes share what they record (the seen feed)
    seen: FeedReport = field(default_factory=FeedReport)

    def client(self, url: str, node: str) -> FrontierClient:
        redis_client = async_client(RedisConfig.from_url(url))
        return FrontierClient(redis_client, KEYS, node, self.config, link_check=self.check)

    async def _fill(self, url: str, count: int, space: UrlSpace) -> None:
        client = self.client(url, "filler")
        for start in range(0, count, 500):
            size = min(500, count - start)
            batch = [new_request(link_request(space.fresh(), "http://seed/")) for _ in range(size)]
            await client.complete(None, "done", batch)
        await client.aclose()

    async def _node(self, node: str, url: str, space: UrlSpace, quota: list[int]) -> None:
        client = self.client(url, node)
        epoch = await client.open_epoch()
        cache = self.shared_cache if self.shared_cache is not None else SeenCache(self.seen_cache)
        try:
            async with contextlib.AsyncExitStack() as stack:
                feed = None
                if self.feed:
                    feed = await stack.enter_async_context(
                        seen_feed(self.feed, node, epoch, cache, self.seen)
                    )
                await self._crawl(client, space, quota, cache=cache, epoch=epoch, feed=feed)
        finally:
            await client.aclose()

    async def _crawl(
        self,
        client: FrontierClient,
        space: UrlSpace,
        quota: list[int],
        *,
        cache: SeenCache,
        epoch: str,
        feed: SeenFeed | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        held: list[Lease] = []
        next_beat = loop.time() + HEARTBEAT_SECONDS
        while quota[0] > 0:
            if not held:  # the buffer ran dry: a lease call of its own
                held = await client.lease(LEASE_BATCH, 60_000, idle_ms=IDLE_POLL_MS)
                if not held:
                    await asyncio.sleep(0.01)
                    continue
            pages, held = held[: self.per_write], held[self.per_write :]
            quota[0] -= len(pages)
            children = [
                child
                for lease in pages
                for child in children_of(cache, space.links(), codec.loads(lease.body)["url"])
            ]
            # down to half: the write refills the buffer (Prefetch waits for one)
            want = LEASE_BATCH - len(held) if len(held) <= LEASE_BATCH // 2 else 0
            top_up = LeaseAsk(want if quota[0] > 0 else 0, 60_000, uuid.uuid4().hex)
            finishes = [Finish(lease.id, "done") for lease in pages]
            self.seen.pages, self.seen.sent = (
                self.seen.pages + len(pages),
                self.seen.sent + len(children),
            )
            write = await client.complete_many(finishes, children, lease=top_up)
            held += write.leases
            if feed is not None:
                feed.publish(epoch, *split_recorded(children, set(write.dropped)))
            if loop.time() >= next_beat:
                await client.heartbeat([lease.id for lease in held], 60_000, 60_000, 100, epoch)
                next_beat += HEARTBEAT_SECONDS


class Tally(Counter[str]):
    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self[key] += count


@contextlib.asynccontextmanager
async def seen_feed(
    bootstrap: str, node: str, epoch: str, cache: SeenCache, report: FeedReport
) -> AsyncIterator[SeenFeed]:
    """A simulated node's seen feed (``FRONTIER_SEEN_FEED``), reading into ``cache``."""
    settings = SeenFeedSettings(True, FEED_TOPIC, bootstrap, 1)
    feed = SeenFeed(settings, node, Tally(), found_too=True)  # no dedup TTL here

    def learn(fingerprint: str, age: float) -> bool:
        report.delays.append(age - CLOCK_MARGIN)
        return cache.add(fingerprint, age)

    reading = asyncio.ensure_future(feed.run(lambda: epoch, learn))
    try:
        await feed.reading.wait()
        yield feed
    finally:
        reading.cancel()
        await feed.close()


@dataclass(frozen=True)
class BaselineLoad:
    """The frontier of another commit, driven by ``bench/frontier_baseline.py`` in a process
    whose path starts with that commit's ``crawler`` (``tree``)."""

    tree: Path
    mode: str
    nodes: int
    seen_cache: int

    @classmethod
    def extract(cls, commit: str, into: Path) -> Path | None:
        """``crawler/`` of ``commit`` under ``into`` (None, with a note, without git history)."""
        into.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "archive", commit, "crawler"],
            capture_output=True,
            check=False,
        )
        if archive.returncode != 0:
            print(f"(no baseline: git archive {commit} failed: {archive.stderr.decode().strip()})")
            return None
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
        return into

    def _drive(self, action: str, url: str, count: int) -> None:
        script = Path(__file__).with_name("frontier_baseline.py")
        command = [sys.executable, str(script), str(self.tree), action, url, str(count)]
        options = ["--mode", self.mode, "--nodes", str(self.nodes)]
        subprocess.run([*command, *options, "--seen-cache", str(self.seen_cache)], check=True)

    def run(self, url: str, pages: int) -> None:
        self._drive("run", url, pages)

    def fill(self, url: str, count: int) -> None:
        self._drive("fill", url, count)


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


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def script_names(baseline: Path | None) -> dict[str, str]:
    """sha1 -> script name, for the frontier's scripts of every dedup mode; and those of the
    baseline's tree (each file alone, and each dedup snippet before each body)."""
    names: dict[str, str] = {}
    for name in ("heartbeat", "release"):
        names[sha1(frontier_script("queue", name))] = name
    for mode in DedupMode:
        step = DedupStep.for_config(DedupConfig(mode))
        names[sha1(step.script("turn"))] = "turn"
        names[sha1(step.script("seen"))] = "seen"
    if baseline is not None:
        scripts = {p.stem: p.read_text() for p in (baseline / "crawler/frontier/lua").glob("*.lua")}
        for name, text in scripts.items():
            names[sha1(text)] = name
            if name.startswith("dedup_"):
                for body in ("complete", "seen"):
                    names[sha1(text + "\n" + scripts.get(body, ""))] = body
    return names


def profile(
    client: redis.Redis, run: Callable[[], None], names: dict[str, str]
) -> dict[str, tuple[float, float, float]]:
    """Each command's (script's) p50/p99 server time in us and share of the time."""
    client.config_set("slowlog-log-slower-than", 0)
    client.config_set("slowlog-max-len", 1_000_000)
    client.slowlog_reset()
    run()
    entries = client.slowlog_get(1_000_000)
    client.config_set("slowlog-log-slower-than", 10_000)
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
    variant: str,
    mode: str,
    load: Load,
    args: argparse.Namespace,
    *,
    workdir: Path,
    names: dict[str, str],
    first: Figures | None = None,
) -> Figures:
    """One run of a variant on a fresh Redis; after ``first`` (the variant's first run), only
    the CPU is added to it."""
    with fresh_redis(workdir / f"{variant}-{mode}".replace(" ", "_")) as (client, url):
        before = Counters.read(client)
        load.run(url, args.pages)
        after = Counters.read(client)
        cpu = after.cpu_since(before)
        if first is not None:
            return replace(first, cpu_us=[*first.cpu_us, cpu * 1e6 / args.pages])
        scripts = profile(client, lambda: load.run(url, args.profile_pages), names)
        client.flushall()
        empty = Counters.read(client).memory
        load.fill(url, args.queued)
        queued_bytes = (Counters.read(client).memory - empty) / args.queued
    return Figures(
        variant,
        mode,
        args.pages,
        cpu_us=[cpu * 1e6 / args.pages],
        system_share=(after.system - before.system) / max(1e-9, cpu),
        bytes_in=(after.bytes_in - before.bytes_in) / args.pages,
        queued_bytes=queued_bytes,
        scripts=scripts,
    )


def measure_all(
    variants: list[tuple[str, str, Load]],
    args: argparse.Namespace,
    *,
    workdir: Path,
    names: dict[str, str],
) -> list[Figures]:
    """Every variant ``--repeat`` times, one round of all at a time, each round starting one
    variant later (so none is always first or last on a machine whose load drifts)."""
    found: dict[int, Figures] = {}
    for round_ in range(args.repeat):
        for step in range(len(variants)):
            index = (round_ + step) % len(variants)
            variant, mode, load = variants[index]
            found[index] = measure(
                variant, mode, load, args, workdir=workdir, names=names, first=found.get(index)
            )
    return [found[index] for index in range(len(variants))]


def print_tables(results: list[Figures], args: argparse.Namespace) -> None:
    print(
        f"\n{args.pages} pages, {args.nodes} simulated nodes, {LINKS} links per page "
        f"({LINKS - NEW_LINKS} seen), {args.repeat} runs of each variant side by side: the "
        "median Redis CPU per page (lowest-highest), and the median of the run-by-run ratios\n"
    )
    print(
        f"| variant | dedup | Redis CPU per page | vs ours at {BASELINE_COMMIT} | vs scrapy-redis "
        "| pages/s per Redis core | bytes in per page | memory per queued request |"
    )
    print("|---|---|---|---|---|---|---|---|")
    scrapy_redis = next((f for f in results if f.variant.startswith("scrapy-redis")), None)
    for figures in results:
        start = next(
            (f for f in results if f.variant.startswith("ours at") and f.mode == figures.mode),
            None,
        )
        print(figures.row(scrapy_redis, start))
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
    parser.add_argument("--repeat", type=int, default=3, help="runs of each variant")
    parser.add_argument("--no-scrapy-redis", action="store_true")
    parser.add_argument(
        "--no-baseline", action="store_true", help=f"skip ours at {BASELINE_COMMIT}"
    )
    parser.add_argument(
        "--seen-cache",
        type=int,
        default=100_000,
        help="each node's FRONTIER_SEEN_CACHE (its default; 0: every link goes to Redis)",
    )
    parser.add_argument(
        "--link-check", action="store_true", help="'ours now' checks the links of every completion"
    )
    parser.add_argument(
        "--seen-feed",
        action="store_true",
        help="adds 'ours now, seen feed': 8 pages a write, the nodes sharing what they record "
        "through Kafka (KAFKA_BOOTSTRAP_SERVERS, or a broker the bench starts)",
    )
    args = parser.parse_args()
    keep_off_redis_core()  # before the broker starts
    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="frontier-load-")))
        bootstrap = ""
        if args.seen_feed:
            bootstrap, _ = stack.enter_context(kafka_service(workdir))
        tree = None
        if not args.no_baseline:
            tree = BaselineLoad.extract(BASELINE_COMMIT, workdir / "baseline")
        names = script_names(tree)
        variants: list[tuple[str, str, Load]] = []
        if not args.no_scrapy_redis:
            variants.append(("scrapy-redis 0.9.1", "exact", ScrapyRedisLoad(args.nodes)))
        for mode in args.modes.split(","):
            config = DedupConfig(DedupMode(mode), capacity=1_000_000)
            check = True if args.link_check else None  # None: the default, where it pays
            cache = args.seen_cache
            if tree is not None:
                baseline = BaselineLoad(tree, mode, args.nodes, cache)
                variants.append((f"ours at {BASELINE_COMMIT}", mode, baseline))
            variants += [
                ("ours now, a page a write", mode, OursLoad(config, args.nodes, 1, check, cache)),
                ("ours now, 8 pages a write", mode, OursLoad(config, args.nodes, 8, check, cache)),
            ]
            if bootstrap:  # FRONTIER_LINK_CHECK unset is off with the feed
                feed = OursLoad(config, args.nodes, 8, check or False, cache, feed=bootstrap)
                variants.append(("ours now, seen feed", mode, feed))
        results = measure_all(variants, args, workdir=workdir, names=names)
    print_tables(results, args)
    print("\nLinks past the nodes' seen-caches, over every run of a variant (4 a page are new):\n")
    for variant, mode, load in variants:
        if isinstance(load, OursLoad):
            print(load.seen.line(variant, mode))


if __name__ == "__main__":
    main()
