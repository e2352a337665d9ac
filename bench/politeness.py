"""Politeness benchmark: how exactly the cluster-wide limiter holds a site's rate, and its cost.

    .venv/bin/python -m bench.politeness [--rate 20] [--seconds 15]

1 and 3 nodes crawl one local site limited to ``--rate`` requests/s (burst 1)
for ``--seconds``. Reported: requests per second as the SERVER counted them
(mean, min and max over whole seconds, first second excluded), the error of
the mean against the limit, and the limiter's Redis round trips per request
(one reservation, plus one cooldown check for each request that had to wait),
from the nodes' own stats.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import redis

from bench.readings import stat
from crawler.demo.nodes import start_node, stop_node
from crawler.demo.run import services
from crawler.demo.site import Site


def run(nodes: int, rate: float, seconds: float, redis_url: str, workdir: Path) -> str:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "POLITENESS_RATE": str(rate),
        "POLITENESS_BURST": "1",
        "CRAWLER_STANDALONE_FEED": "",
    }
    logs = [workdir / f"politeness-{nodes}-{i}.log" for i in range(nodes)]
    with Site(5000) as site:
        processes = [
            start_node("pages", env=env, settings=settings, log_path=log, node_id=f"p{i}")
            for i, log in enumerate(logs)
        ]
        try:
            client.lpush("pages:start_urls", site.url(0))
            while not site.hit_times or time.monotonic() - site.hit_times[0] < seconds + 1:
                time.sleep(0.1)
        finally:
            for process in processes:
                stop_node(process)
            client.close()
        times = list(site.hit_times)
    start = times[0]
    buckets = Counter(int(t - start) for t in times)
    counts = [buckets[second] for second in range(1, int(seconds) + 1)]
    texts = [log.read_text(errors="replace") for log in logs]
    requests = sum(stat(t, "downloader/request_count") for t in texts)
    trips = sum(stat(t, "politeness/reserved") + stat(t, "politeness/delayed") for t in texts)
    mean = statistics.mean(counts)
    return (
        f"| {nodes} | {rate:g} | {mean:.2f} | {min(counts)} | {max(counts)} "
        f"| {100 * (mean - rate) / rate:+.1f}% | {trips / max(requests, 1):.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.politeness", description=__doc__)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-politeness-"))
    with services(workdir) as (redis_url, _bootstrap):
        print(f"# One site limited to {args.rate:g} req/s for {args.seconds:g} s (server counts)")
        print("| nodes | limit | mean req/s | min | max | error of mean | Redis trips/request |")
        print("|---|---|---|---|---|---|---|")
        for nodes in (1, 3):
            print(run(nodes, args.rate, args.seconds, redis_url, workdir), flush=True)


if __name__ == "__main__":
    main()
