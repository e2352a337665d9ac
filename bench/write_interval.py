"""``FRONTIER_WRITE_INTERVAL``: pages per frontier write and Redis CPU per page of a real crawl.

    .venv/bin/python -m bench.write_interval [--pages 3000] [--intervals 0,0.025,0.1] [--repeat 2]

One node (the ``pages`` spider, ``CONCURRENT_REQUESTS`` 16, politeness off, items to a
local feed) crawls a generated local site once per interval, the intervals taking turns
``--repeat`` times; each crawl on a flushed database of the same ``redis-server``. Per crawl,
from the node's stats: pages settled per write (``frontier/done`` / ``frontier/writes``);
from Redis's own counters: main-thread CPU per page (everything the node asked of Redis:
seeds, leases, writes, heartbeats, the ledger); pages/s between the first and the last page
the site served. Ratios are against interval 0 (a write per reactor turn), the medians of
the ratios of the crawls made side by side. A last row crawls at the default interval with
the cluster-wide politeness on (``POLITENESS_RATE`` 1000, which the local site never reaches):
what its reservation per request adds.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import redis

from bench.frontier import FAST_LEASES, Variant, crawl
from bench.readings import redis_cpu, stat
from crawler.demo.run import services
from crawler.demo.site import Site

POLITE = {"POLITENESS_ENABLED": "True", "POLITENESS_RATE": "1000", "POLITENESS_BURST": "50"}
NODE = Variant("ours", "pages", {**FAST_LEASES, "CONCURRENT_REQUESTS": "16"}, uses_kafka=False)


@dataclass(frozen=True)
class Run:
    pages_per_write: float
    cpu_us: float  # Redis main-thread CPU per page
    pages_per_second: float


def one_crawl(
    site: Site, settings: dict[str, str], redis_url: str, bootstrap: str, workdir: Path
) -> Run:
    client = redis.Redis.from_url(redis_url)
    before = redis_cpu(client)
    logs = Path(tempfile.mkdtemp(dir=workdir))
    outcome = crawl(
        NODE,
        site,
        nodes=1,
        redis_url=redis_url,
        bootstrap=bootstrap,
        workdir=logs,
        extra=settings,
    )
    used = redis_cpu(client) - before
    client.close()
    log = "".join(path.read_text(errors="replace") for path in logs.glob("*.log"))
    done, writes = stat(log, "frontier/done"), stat(log, "frontier/writes")
    return Run(done / max(writes, 1), used / max(done, 1) * 1e6, outcome.pages / outcome.seconds)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.write_interval", description=__doc__)
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--intervals", default="0,0.025,0.1")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    variants = {
        f"{interval} s": {"FRONTIER_WRITE_INTERVAL": interval}
        for interval in args.intervals.split(",")
    }
    variants["0.025 s, politeness on"] = POLITE
    names = list(variants)
    runs: dict[str, list[Run]] = {name: [] for name in names}
    workdir = Path(tempfile.mkdtemp(prefix="bench-write-interval-"))
    with services(workdir) as (redis_url, bootstrap), Site(args.pages) as site:
        for round_ in range(args.repeat):
            shift = round_ % len(names)  # each round starts one variant later
            for name in names[shift:] + names[:shift]:
                runs[name].append(one_crawl(site, variants[name], redis_url, bootstrap, workdir))
    print(
        f"\n{args.pages} pages, 1 node, {args.repeat} crawls per interval (median, and the median"
        f" of the run-by-run ratios to {names[0]})\n"
    )
    print("| FRONTIER_WRITE_INTERVAL | pages per write | Redis CPU per page | ratio | pages/s |")
    print("|---|---|---|---|---|")
    base = runs[names[0]]
    for name in names:
        mine = runs[name]
        ratio = statistics.median(a.cpu_us / b.cpu_us for a, b in zip(mine, base, strict=True))
        print(
            f"| {name} | {statistics.median(r.pages_per_write for r in mine):.1f} "
            f"| {statistics.median(r.cpu_us for r in mine):.0f} us | {ratio:.2f}x "
            f"| {statistics.median(r.pages_per_second for r in mine):.0f} |"
        )


if __name__ == "__main__":
    main()
