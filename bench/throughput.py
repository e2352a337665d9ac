"""Frontier throughput, Redis round trips and reactor hold: plain Scrapy, scrapy-redis, ours.

    .venv/bin/python -m bench.throughput [--follow-pages 3000] [--latency-pages 1000]

Three local workloads, each crawled by every variant in the same run (items
are not sent anywhere: the frontier alone is measured):

* the Python documentation (Debian's ``python3.11-doc``, 530 HTML pages, big
  pages: parsing dominates);
* a link-dense generated site (24 links per page, like ``scrapy bench``'s
  follow pages: the frontier's share of the work is largest);
* a latency-bound site (every response takes 200 ms, as a remote site does):
  where adding nodes pays, so 2 nodes are compared with 1.

Per variant: pages/s between the first and the last request the site served,
the ratio to plain Scrapy, Redis round trips per crawled page (client-side:
every command or pipeline a node's redis-py connections send, seeds and
heartbeats included) and the longest a scheduler call held the reactor, plus
the worst event-loop lateness (see ``bench.probe``).
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import orjson

from bench.docs_site import DocsSite
from bench.frontier import FAST_LEASES, SCRAPY_COMMANDS, SCRAPY_REDIS, Target, Variant, crawl
from crawler.demo.run import services
from crawler.demo.site import Site

VARIANTS = [
    (Variant("plain Scrapy (memory)", "pages", {}, uses_redis=False, uses_kafka=False), 1),
    (
        Variant(
            "scrapy-redis 0.9.1",
            "scrapy_redis_pages",
            SCRAPY_REDIS,
            uses_kafka=False,
            env=SCRAPY_COMMANDS,
        ),
        1,
    ),
    (Variant("ours (leases)", "pages", FAST_LEASES, uses_kafka=False), 1),
    (Variant("ours (leases)", "pages", FAST_LEASES, uses_kafka=False), 2),
]


@dataclass(frozen=True)
class Row:
    name: str
    nodes: int
    pages: int
    rate: float
    round_trips: float | None
    scheduler_p99_ms: float
    scheduler_max_ms: float
    loop_lag_max_ms: float


def probe_settings(directory: Path) -> dict[str, str]:
    # ClusterAddon adds the project's own extensions to this dict
    return {
        "BENCH_PROBE_DIR": str(directory),
        "EXTENSIONS": orjson.dumps({"bench.probe.BenchProbe": 0}).decode(),
    }


def measure(
    variant: Variant, nodes: int, site: Target, *, redis_url: str, bootstrap: str, workdir: Path
) -> Row:
    probes = workdir / f"probe-{uuid.uuid4().hex[:8]}"
    probes.mkdir()
    outcome = crawl(
        variant,
        site,
        nodes=nodes,
        redis_url=redis_url,
        bootstrap=bootstrap,
        workdir=workdir,
        extra=probe_settings(probes),
    )
    figures = [orjson.loads(path.read_bytes()) for path in probes.glob("*.json")]
    if len(figures) != nodes:
        raise RuntimeError(f"{variant.name}: {len(figures)} probe reports for {nodes} nodes")
    responses = sum(f["responses"] for f in figures)
    round_trips = sum(f["round_trips"] for f in figures)
    return Row(
        name=variant.name,
        nodes=nodes,
        pages=outcome.received,
        rate=outcome.received / outcome.seconds if outcome.seconds else 0.0,
        round_trips=round_trips / responses if variant.uses_redis and responses else None,
        scheduler_p99_ms=max(f["scheduler_p99_ms"] for f in figures),
        scheduler_max_ms=max(f["scheduler_max_ms"] for f in figures),
        loop_lag_max_ms=max(f["loop_lag_max_ms"] for f in figures),
    )


def print_table(title: str, rows: Iterator[Row]) -> None:
    print(f"# {title}")
    print(
        "| frontier | nodes | pages | pages/s | ratio to plain | Redis round trips/page"
        " | scheduler call p99 / max (ms) | worst loop lag (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    baseline = 0.0
    for row in rows:
        baseline = baseline or row.rate
        trips = "-" if row.round_trips is None else f"{row.round_trips:.2f}"
        print(
            f"| {row.name} | {row.nodes} | {row.pages} | {row.rate:.1f}"
            f" | {row.rate / baseline:.2f}x | {trips}"
            f" | {row.scheduler_p99_ms:.2f} / {row.scheduler_max_ms:.1f}"
            f" | {row.loop_lag_max_ms:.0f} |",
            flush=True,
        )
    print()


@contextmanager
def workloads(args: argparse.Namespace) -> Iterator[list[tuple[str, Target]]]:
    with (
        DocsSite() as docs,
        Site(args.follow_pages, extra_links=20) as dense,
        Site(args.latency_pages, delay=0.2) as slow,
    ):
        yield [
            (f"Python docs ({docs.pages} HTML pages, served locally)", docs),
            (f"link-dense site ({args.follow_pages} pages, 24 links each)", dense),
            (f"latency-bound site ({args.latency_pages} pages, 200 ms each)", slow),
        ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.throughput", description=__doc__)
    parser.add_argument("--follow-pages", type=int, default=3000)
    parser.add_argument("--latency-pages", type=int, default=1000)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    with services(workdir) as (redis_url, bootstrap), workloads(args) as targets:
        run = partial(measure, redis_url=redis_url, bootstrap=bootstrap, workdir=workdir)
        for title, site in targets:
            print_table(title, (run(variant, nodes, site) for variant, nodes in VARIANTS))
    print(f"logs: {workdir}")


if __name__ == "__main__":
    main()
