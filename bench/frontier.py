"""Frontier benchmark: throughput and pages lost to SIGKILL, against baselines in the same run.

    .venv/bin/python -m bench.frontier [--pages 1000] [--kill-pages 1000]

Rows: plain Scrapy (in-memory scheduler, standalone), scrapy-redis 0.9.1 as
its README configures it (its scheduler, dupefilter and pickle), and ours
(``LeasingScheduler``). Every crawl sends items to the same local Kafka broker
through ``KafkaPipeline``; pages are counted from the topic.

Throughput: one node, a generated local site, pages/s between the first and
the last page the site served. Loss: two nodes crawl a site whose responses
take 50 ms; after 30% of the pages the node that has crawled more so far is
SIGKILLed (a working node, not an idle one); the survivor finishes. Seed
pickup: an idle node; time from ``LPUSH`` to the site's first request, for
seeds pushed one at a time.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

import orjson
import redis

from crawler.demo.nodes import start_node, stop_node, wait_for_exit
from crawler.demo.run import services
from crawler.demo.site import Site
from crawler.kafka.reader import read_topic

SCRAPY_REDIS = {
    "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    "SCHEDULER_PERSIST": "True",
    "SPIDER_MODULES": "crawler.spiders,bench.spiders",
}
# Scrapy's own commands: the project's `crawl` refuses a crawl without its add-on (the baseline
# hung waiting for its first page: an audit)
SCRAPY_COMMANDS = {"CRAWLER_SETTING_COMMANDS_MODULE": ""}
FAST_LEASES = {"FRONTIER_LEASE_TIMEOUT": "4", "FRONTIER_HEARTBEAT_INTERVAL": "1"}


@dataclass(frozen=True)
class Variant:
    name: str
    spider: str
    settings: Mapping[str, str]
    uses_redis: bool = True
    uses_kafka: bool = True
    env: Mapping[str, str] = field(default_factory=dict)


VARIANTS = [
    Variant("plain Scrapy (memory)", "pages", {}, uses_redis=False),
    Variant("scrapy-redis 0.9.1", "scrapy_redis_pages", SCRAPY_REDIS, env=SCRAPY_COMMANDS),
    Variant("ours (leases)", "pages", FAST_LEASES),
]


class Target(Protocol):
    """A local site to crawl: ``crawler.demo.site.Site`` or ``bench.docs_site.DocsSite``."""

    pages: int
    hits: Counter[str]

    def url(self, index: int) -> str: ...


@dataclass
class Outcome:
    pages: int
    received: int
    messages: int
    seconds: float

    @property
    def lost(self) -> int:
        return self.pages - self.received

    @property
    def rate(self) -> float:
        """Pages a second, from the first page to the last."""
        return self.pages / self.seconds if self.seconds else 0.0

    @property
    def duplicates(self) -> int:
        return self.messages - self.received


def crawl(
    variant: Variant,
    site: Target,
    *,
    nodes: int,
    redis_url: str,
    bootstrap: str,
    workdir: Path,
    kill_at: int | None = None,
    extra: Mapping[str, str] | None = None,
) -> Outcome:
    topic_template = f"bench-{uuid.uuid4().hex[:8]}-{{spider}}-items"
    env = {
        "REDIS_URL": redis_url if variant.uses_redis else "",
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        **variant.env,
    }
    settings = {**variant.settings, "KAFKA_TOPIC_TEMPLATE": topic_template}
    settings |= {"MAX_IDLE_TIME_BEFORE_CLOSE": "3", "LOG_LEVEL": "DEBUG" if kill_at else "INFO"}
    settings |= {"POLITENESS_ENABLED": "False"}  # measure the frontier alone
    settings |= dict(extra or {})
    if not variant.uses_kafka:
        settings |= {"CRAWLER_STANDALONE_FEED": "", "ITEM_PIPELINES": "{}"}
    arguments = None if variant.uses_redis else {"url": site.url(0)}
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    site.hits.clear()
    logs = [workdir / f"{variant.spider}-{uuid.uuid4().hex[:6]}-{i}.log" for i in range(nodes)]
    processes = [
        start_node(
            variant.spider,
            env=env,
            settings=settings,
            log_path=log,
            node_id=f"bench-{i}",
            arguments=arguments,
        )
        for i, log in enumerate(logs)
    ]
    try:
        if variant.uses_redis:
            client.lpush(f"{variant.spider}:start_urls", site.url(0))
        started = time.monotonic()
        while not site.hits:
            if all(p.poll() is not None for p in processes) or time.monotonic() - started > 120:
                tail = logs[0].read_text(errors="replace")[-3000:]
                raise RuntimeError(
                    f"{variant.name}: no page fetched; its first node's log:\n{tail}"
                )
            time.sleep(0.01)
        first = time.monotonic()
        if kill_at is not None:
            while sum(site.hits.values()) < kill_at:
                time.sleep(0.01)
            crawled = [log.read_text(errors="replace").count("Crawled (") for log in logs]
            victim = processes[crawled.index(max(crawled))]
            victim.send_signal(signal.SIGKILL)
        last_count, last_change = 0, time.monotonic()
        while any(p.poll() is None for p in processes):
            count = sum(site.hits.values())
            if count != last_count:
                last_count, last_change = count, time.monotonic()
            if time.monotonic() - started > 600:
                break
            time.sleep(0.01)
        wait_for_exit(processes, timeout=30)
    finally:
        for process in processes:
            stop_node(process)
        client.close()
    if not variant.uses_kafka:
        served = len(site.hits)
        return Outcome(site.pages, served, served, last_change - first)
    topic = topic_template.format(spider=variant.spider)
    messages = read_topic(bootstrap, topic, expected=site.pages, timeout=30, settle=2)
    urls = Counter(orjson.loads(m.value)["url"] for m in messages)
    return Outcome(site.pages, len(urls), len(messages), last_change - first)


def pickup_latency(
    variant: Variant, *, redis_url: str, bootstrap: str, workdir: Path, samples: int = 5
) -> list[float]:
    """Seconds from LPUSH to the first request at the site, for an idle node."""
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    log = workdir / f"pickup-{variant.spider}.log"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, **variant.env}
    settings = {**variant.settings, "POLITENESS_ENABLED": "False"}
    node = start_node(variant.spider, env=env, settings=settings, log_path=log, node_id="p")
    latencies = []
    try:
        while "Spider opened" not in log.read_text(errors="replace"):
            if node.poll() is not None:  # it stopped at start: say why, do not wait for ever
                raise RuntimeError(f"{variant.name} node exited:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)
        time.sleep(6)  # idle: past scrapy-redis's first idle tick, seeds already read
        for _ in range(samples):
            with Site(1) as site:
                pushed = time.monotonic()
                client.lpush(f"{variant.spider}:start_urls", site.url(0))
                while not site.hits and time.monotonic() - pushed < 30:
                    time.sleep(0.002)
                latencies.append(time.monotonic() - pushed)
                time.sleep(1)
    finally:
        stop_node(node)
        client.close()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.frontier", description=__doc__)
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--kill-pages", type=int, default=1000)
    # one run swung a ratio from 0.36x to 2.37x (a straggling last page): the median of rounds,
    # each variant once per round in turn
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-frontier-"))
    with services(workdir) as (redis_url, bootstrap):
        print(f"# Throughput: 1 node, {args.pages}-page local site, items into Kafka")
        print(f"# median of {args.repeat} rounds (min-max), the variants in turn in each round")
        print("| frontier | pages/s | min-max | ratio to plain | pages received (worst) |")
        print("|---|---|---|---|---|")
        rates: dict[str, list[float]] = {variant.name: [] for variant in VARIANTS}
        received: dict[str, int] = {variant.name: args.pages for variant in VARIANTS}
        one_node = partial(
            crawl, nodes=1, redis_url=redis_url, bootstrap=bootstrap, workdir=workdir
        )
        with Site(args.pages) as site:
            for _ in range(args.repeat):
                for variant in VARIANTS:
                    outcome = one_node(variant, site)
                    rates[variant.name].append(outcome.rate)
                    received[variant.name] = min(received[variant.name], outcome.received)
        baseline = statistics.median(rates[VARIANTS[0].name])
        for variant in VARIANTS:
            found = rates[variant.name]
            median = statistics.median(found)
            print(
                f"| {variant.name} | {median:.1f} | {min(found):.1f}-{max(found):.1f}"
                f" | {median / baseline:.2f}x | {received[variant.name]}/{args.pages} |",
                flush=True,
            )
        print()
        print(f"# Loss: 2 nodes, {args.kill_pages} pages at 50 ms each, one SIGKILLed at 30%")
        print("| frontier | pages lost | duplicates in Kafka |")
        print("|---|---|---|")
        with Site(args.kill_pages, delay=0.05) as site:
            for variant in VARIANTS[1:]:
                outcome = crawl(
                    variant,
                    site,
                    nodes=2,
                    redis_url=redis_url,
                    bootstrap=bootstrap,
                    workdir=workdir,
                    kill_at=int(args.kill_pages * 0.3),
                )
                print(f"| {variant.name} | {outcome.lost} | {outcome.duplicates} |", flush=True)
        print()
        print("# Seed pickup: an idle node, LPUSH to the first request at the site (5 seeds)")
        print("| frontier | median s | max s |")
        print("|---|---|---|")
        for variant in VARIANTS[1:]:
            latencies = sorted(
                pickup_latency(variant, redis_url=redis_url, bootstrap=bootstrap, workdir=workdir)
            )
            median = latencies[len(latencies) // 2]
            print(f"| {variant.name} | {median:.3f} | {latencies[-1]:.3f} |", flush=True)
    print(f"\nlogs: {workdir}")


if __name__ == "__main__":
    main()
