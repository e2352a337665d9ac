"""``python -m crawler.demo``: a real two-node crawl of a local site into Kafka.

Uses ``REDIS_URL`` / ``KAFKA_BOOTSTRAP_SERVERS`` when set, else starts its own
Redis and Kafka on free ports; starts a generated site and two ``scrapy crawl
pages`` nodes, seeds them through Redis, waits for them to go idle, reads the
items back from Kafka and prints a summary. Everything it started is stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import orjson

from crawler.demo.nodes import start_node, stop_node, wait_for_exit
from crawler.demo.site import Site
from crawler.devservices import (
    KafkaBroker,
    KafkaBrokerConfig,
    RedisServer,
    RedisServerConfig,
    free_port,
)
from crawler.kafka.reader import read_topic
from crawler.redis_connection import sync_client

TOPIC_TEMPLATE = "spider-{spider}-items"


def say(message: str) -> None:
    print(message, flush=True)


@contextlib.contextmanager
def kafka_service(workdir: Path) -> Iterator[tuple[str, KafkaBroker | None]]:
    """Yield (kafka bootstrap, the broker if started here): from the environment, else a
    local broker started in ``workdir / "kafka"``."""
    if bootstrap := os.environ.get("KAFKA_BOOTSTRAP_SERVERS", ""):
        yield bootstrap, None
        return
    say("Starting a local Kafka broker (KRaft)...")
    broker = KafkaBroker(
        KafkaBrokerConfig(port=free_port(), controller_port=free_port(), data_dir=workdir / "kafka")
    )
    broker.start()
    try:
        yield broker.bootstrap_servers, broker
    finally:
        broker.stop()


@contextlib.contextmanager
def services(workdir: Path) -> Iterator[tuple[str, str]]:
    """Yield (redis url, kafka bootstrap): from the environment, else started here."""
    redis_url = os.environ.get("REDIS_URL", "")
    with contextlib.ExitStack() as stack:
        if not redis_url:
            server = RedisServer(RedisServerConfig(port=free_port(), data_dir=workdir / "redis"))
            server.start()
            stack.callback(server.stop)
            redis_url = server.url
        bootstrap, _ = stack.enter_context(kafka_service(workdir))
        yield redis_url, bootstrap


def run(pages: int, nodes: int, workdir: Path) -> int:
    started = time.monotonic()
    with services(workdir) as (redis_url, bootstrap), Site(pages) as site:
        say(f"Redis {redis_url} | Kafka {bootstrap} | demo site {site.base_url} ({pages} pages)")
        env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
        settings = {
            "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
            "KAFKA_TOPIC_TEMPLATE": TOPIC_TEMPLATE,
            "POLITENESS_RATE": "1000",  # the local demo site takes any rate
            "POLITENESS_BURST": "50",
        }
        processes = [
            start_node(
                "pages",
                env=env,
                settings=settings,
                log_path=workdir / f"node-{i}.log",
                node_id=f"demo-node-{i}",
            )
            for i in range(nodes)
        ]
        try:
            crawl_started = time.monotonic()
            client = sync_client(redis_url)
            client.lpush("pages:start_urls", site.url(0))
            client.close()
            say(f"Started {nodes} nodes; seeded pages:start_urls with {site.url(0)}")
            finished = None not in wait_for_exit(processes, timeout=300)
            crawl_seconds = time.monotonic() - crawl_started
        finally:
            codes = [stop_node(p) for p in processes]
        topic = TOPIC_TEMPLATE.format(spider="pages")
        messages = [
            m
            for m in read_topic(bootstrap, topic, expected=pages, timeout=60)
            if orjson.loads(m.value).get("url", "").startswith(site.base_url)
        ]
    urls = Counter(orjson.loads(m.value)["url"] for m in messages)
    per_node = Counter(m.headers.get("node_id", b"?").decode() for m in messages)
    say("")
    say("Summary")
    say(f"  pages on the site:        {pages}")
    say(f"  pages crawled:            {len(urls)} (site hits: {sum(site.hits.values())})")
    say(f"  items delivered to Kafka: {len(messages)} in topic {topic}")
    say(f"  duplicates in Kafka:      {len(messages) - len(urls)}")
    say(f"  items per node:           {dict(sorted(per_node.items()))}")
    total = time.monotonic() - started
    say(f"  crawl time:               {crawl_seconds:.1f}s (whole demo {total:.1f}s)")
    say(f"  node logs:                {workdir}")
    say("")
    say("A few items read back from Kafka:")
    for message in messages[:3]:
        say("  " + message.value.decode())
    ok = finished and codes == [0] * nodes and set(urls) == site.all_urls()
    if not ok:
        say(f"DEMO FAILED: finished={finished} exit codes={codes} missing={pages - len(urls)}")
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m crawler.demo", description=__doc__)
    parser.add_argument("--pages", type=int, default=300, help="pages on the demo site")
    parser.add_argument("--nodes", type=int, default=2, help="crawler nodes to start")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="crawler-demo-"))
    return run(args.pages, args.nodes, workdir)


if __name__ == "__main__":
    sys.exit(main())
