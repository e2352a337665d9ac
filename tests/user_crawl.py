"""Crawl ``tests.user_site.UserSite`` with user code, standalone and as a cluster, and compare.

``Reference`` runs plain ``scrapy crawl`` on Scrapy's own scheduler into a feed
(the reference); ``cluster`` runs nodes on one Redis into Kafka and returns what
the broker holds plus what the frontier and the ledger say afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import redis

from crawler.demo.nodes import REPO_ROOT
from crawler.extensions.ledger_layout import LedgerKeys
from crawler.frontier.keys import FrontierKeys
from crawler.kafka.reader import read_topic
from tests.cluster import LOCAL_SITE_SETTINGS, logs, running_nodes, wait_for_exit, warnings_of_ours
from tests.user_site import REFERENCE_AGENT, UserSite

USER_SETTINGS = {
    "SPIDER_MODULES": "tests.userproject.spiders,tests.userproject.cases",
    "BROWSER_ENABLED": "False",
    "METRICS_ENABLED": "False",
    "LOG_LEVEL": "INFO",
}
# Rows of the conformance table printed at the end of the run (tests/conftest.py).
CONFORMANCE_ROWS: list[str] = []
SEEDED = {"u_redis", "u_redis_crawl"}  # spiders fed from <spider>:start_urls
PIPELINES = "tests.userproject.pipelines."


def foreign_tracebacks(workdir: Path) -> list[str]:
    """Tracebacks in the nodes' logs that are not the user's code failing on purpose
    (Scrapy logs an error of a user's pipeline with its traceback, as it should)."""
    blocks = [
        block
        for path in sorted(workdir.glob("node-*.log"))
        for block in path.read_text(errors="replace").split("Traceback (most recent call last):")[
            1:
        ]
    ]
    return [block[:2000] for block in blocks if "tests/userproject/" not in block.split("\n20")[0]]


def pipelines(*names: str) -> str:
    """ITEM_PIPELINES as a user gives it with ``-s`` (JSON): only the user's own; the
    project's Kafka pipeline is added by ClusterAddon."""
    return orjson.dumps({PIPELINES + name: 300 + i for i, name in enumerate(names)}).decode()


def canonical(item: Mapping[str, Any]) -> str:
    return orjson.dumps(item, option=orjson.OPT_SORT_KEYS).decode()


class Reference:
    """Plain ``scrapy crawl`` of ``site`` (no Redis, no Kafka) on Scrapy's own scheduler
    into a feed, started at once (the site counts its fetches apart, ``REFERENCE_AGENT``): the
    reference a cluster crawl of the same site, meanwhile, is compared with."""

    def __init__(
        self,
        spider: str,
        site: UserSite,
        workdir: Path,
        settings: Mapping[str, str] | None = None,
        arguments: Mapping[str, str] | None = None,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.feed, self.log = workdir / "standalone.jsonl", workdir / "standalone.log"
        given = {"url": site.url(0)} if spider in SEEDED else {"site": site.base_url}
        command = [sys.executable, "-m", "scrapy", "crawl", spider, "-O", str(self.feed)]
        for name, value in {**given, **(arguments or {})}.items():
            command += ["-a", f"{name}={value}"]
        every = {**LOCAL_SITE_SETTINGS, **USER_SETTINGS, **(settings or {})}
        for name, value in {**every, "USER_AGENT": REFERENCE_AGENT}.items():
            command += ["-s", f"{name}={value}"]
        env = {"REDIS_URL": "", "KAFKA_BOOTSTRAP_SERVERS": "", "CRAWLER_NODE_ID": "standalone"}
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command, cwd=REPO_ROOT, env={**os.environ, **env}, stdout=out, stderr=out
            )

    def items(self) -> list[str]:
        """Its items, canonical JSON, once it exits (0)."""
        code = self.process.wait(timeout=120)
        assert code == 0, self.log.read_text()[-4000:]
        lines = self.feed.read_text().splitlines()
        return [canonical(orjson.loads(line)) for line in lines if line]

    def __enter__(self) -> Reference:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@dataclass
class ClusterRun:
    items: list[str]
    queued: int
    leased: int
    ledger: dict[str, int]
    seconds: float
    workdir: Path

    def stragglers(self) -> int:
        """Leases no signal finished, closed by the idle sweep (frontier/stragglers)."""
        found = re.findall(r"'frontier/stragglers': (\d+)", self.logs())
        return sum(int(count) for count in found)

    def logs(self) -> str:
        return "".join(path.read_text(errors="replace") for path in self.workdir.glob("node-*.log"))

    def ledger_adds_up(self) -> bool:
        ledger = self.ledger
        settled = sum(
            ledger.get(name, 0) for name in ("done", "failed", "requeued", "released", "lease_lost")
        )
        return ledger.get("leased", 0) == settled


def cluster(
    spider: str,
    site: UserSite,
    workdir: Path,
    *,
    redis_url: str,
    kafka_bootstrap: str,
    nodes: int = 2,
    settings: Mapping[str, str] | None = None,
    arguments: Mapping[str, str] | None = None,
    seed: Callable[[redis.Redis], object] | None = None,
    topic_template: str | None = None,
) -> ClusterRun:
    """``nodes`` nodes crawl ``site`` into Kafka; assert every node exits 0 on idle.

    Spiders fed from Redis get ``seed(client)`` (default: the site's first page pushed to
    ``<spider>:start_urls``) once the nodes are started; others get ``-a site=``.
    """
    seeded = seed is not None or spider in SEEDED
    template = topic_template or f"user-{uuid.uuid4().hex[:10]}-{{spider}}"
    node_settings = {
        **USER_SETTINGS,
        "KAFKA_TOPIC_TEMPLATE": template,
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2" if seeded else "0",
        **(settings or {}),
    }
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    if not seeded:
        arguments = {"site": site.base_url, **(arguments or {})}
    if seeded and seed is None:
        seed = lambda client: client.lpush(f"{spider}:start_urls", site.url(0))  # noqa: E731
    client = redis.Redis.from_url(redis_url)
    began = time.monotonic()
    try:
        with running_nodes(
            nodes,
            workdir=workdir,
            env=env,
            settings=node_settings,
            spider=spider,
            arguments=arguments,
        ) as processes:
            if seed is not None:
                seed(client)
            codes = wait_for_exit(processes, timeout=120)
        seconds = time.monotonic() - began
        assert codes == [0] * nodes, logs(workdir)
        assert foreign_tracebacks(workdir) == [], logs(workdir)
        assert not warnings_of_ours(workdir), "\n".join(warnings_of_ours(workdir))
        keys = FrontierKeys.for_spider(spider)
        queued, leased = int(client.get(keys.queue_count) or 0), int(client.zcard(keys.leases))
        raw = client.hgetall(LedgerKeys.for_crawl(spider, "default").total)
        ledger = {
            str(k.decode() if isinstance(k, bytes) else k): int(float(v))
            for k, v in raw.items()
            if str(v.decode() if isinstance(v, bytes) else v).replace(".", "").isdigit()
        }
    finally:
        client.close()
    topic = template.format(spider=spider)
    messages = read_topic(kafka_bootstrap, topic, timeout=30)
    items = [canonical(orjson.loads(message.value)) for message in messages]
    return ClusterRun(items, queued, leased, ledger, seconds, workdir)


@dataclass
class Comparison:
    run: ClusterRun
    reference: list[str]  # standalone Scrapy's items
    reference_hits: dict[str, int]  # page -> fetches, standalone
    hits: dict[str, int]  # page -> fetches, cluster


def compare_with_standalone(
    label: str,
    spider: str,
    workdir: Path,
    *,
    redis_url: str,
    kafka_bootstrap: str,
    pages: int,
    settings: Mapping[str, str],
    arguments: Mapping[str, str] | None = None,
    fail_once: bool = False,
    stragglers: bool = False,
    nodes: int = 2,
    login: bool = False,
    delay: float = 0.05,
) -> Comparison:
    """Standalone Scrapy and a cluster of ``nodes``, at once, on one site; checks what every cell
    must hold (a reference item, nothing left in Redis, a ledger that adds up) and adds a row
    to the conformance table."""
    with (
        UserSite(pages, delay=delay, fail_once=fail_once, login=login) as site,
        Reference(spider, site, workdir / "standalone", settings, arguments) as standalone,
    ):
        run = cluster(
            spider,
            site,
            workdir / "cluster",
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            nodes=nodes,
            settings=settings,
            arguments=arguments,
        )
        reference = standalone.items()
        reference_hits, hits = dict(site.page_hits(reference=True)), dict(site.page_hits())
    CONFORMANCE_ROWS.append(
        f"| {label} | {len(run.items)} / {len(reference)} | {run.queued + run.leased} "
        f"| {run.seconds:.1f} |"
    )
    assert reference, "the reference crawl produced no item"
    assert (run.queued, run.leased) == (0, 0)
    assert run.ledger_adds_up(), run.ledger
    # every lease completed by its own signals (only a request no middleware links to its
    # lease, a brand-new Request object, waits for the idle sweep)
    assert (run.stragglers() > 0) == stragglers
    return Comparison(run, reference, reference_hits, hits)
