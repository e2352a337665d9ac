"""One real node on Redis (no Kafka: items go to a JSON Lines feed), and what it left behind.

For the tests of what a node refuses (redirects out of scope, decompression bombs,
credentials): the items it delivered, the failure records in ``{<spider>}:failed``,
its stats and its log.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import orjson
import redis

from crawler.frontier.keys import FrontierKeys
from tests.cluster import logs, running_nodes, wait_for_exit
from tests.frontier_state import queued

NODE_SETTINGS = {
    "SPIDER_MODULES": "crawler.spiders,tests.spiders",
    "BROWSER_ENABLED": "False",
    "METRICS_ENABLED": "False",
    "MAX_IDLE_TIME_BEFORE_CLOSE": "1",
    "FRONTIER_HEARTBEAT_INTERVAL": "0.5",
    "FRONTIER_LEASE_TIMEOUT": "5",
}


@dataclass
class NodeRun:
    items: list[dict[str, Any]]
    failed: list[dict[str, Any]]  # the records of {<spider>}:failed
    log: str
    leftover: int  # requests still queued or leased
    peak_rss: int  # bytes: the node's resident set at its highest (VmHWM)

    def stat(self, name: str) -> int:
        found = re.findall(rf"'{re.escape(name)}': (\d+)", self.log)
        return int(found[-1]) if found else 0

    def urls(self) -> set[str]:
        return {str(item["url"]) for item in self.items}


def crawl(
    spider: str,
    seeds: list[str],
    *,
    workdir: Path,
    redis_url: str,
    settings: Mapping[str, str] | None = None,
    timeout: float = 45,
    exit_code: int = 0,
) -> NodeRun:
    """One node of ``spider`` crawls from ``seeds`` (pushed to ``<spider>:start_urls``; none:
    from what the frontier holds) until the cluster is idle; asserts it exits ``exit_code``."""
    feed = workdir / "items.jsonl"
    node_settings = {**NODE_SETTINGS, "CRAWLER_STANDALONE_FEED": str(feed), **(settings or {})}
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    client = redis.Redis.from_url(redis_url)
    try:
        with running_nodes(
            1, workdir=workdir, env=env, settings=node_settings, spider=spider
        ) as nodes:
            if seeds:  # none: the node crawls what the frontier holds
                client.lpush(f"{spider}:start_urls", *reversed(seeds))
            peak_rss = _watch_peak_rss(nodes[0], timeout)
            codes = wait_for_exit(nodes, timeout=0)
        assert codes == [exit_code], logs(workdir)
        keys = FrontierKeys.for_spider(spider)
        failed = [orjson.loads(value) for value in client.hvals(keys.failed)]
        leftover = queued(client, keys) + int(client.zcard(keys.leases))
    finally:
        client.close()
    lines = feed.read_text().splitlines() if feed.exists() else []
    items = [orjson.loads(line) for line in lines if line]
    log = (workdir / "node-0.log").read_text(errors="replace")
    return NodeRun(items, failed, log, leftover, peak_rss)


def _watch_peak_rss(node: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait for ``node`` to exit (at most ``timeout``); its highest resident set, in bytes, as
    last read from ``/proc/<pid>/status`` (a high-water mark, read every 50 ms)."""
    deadline = time.monotonic() + timeout
    peak = 0
    status = Path(f"/proc/{node.pid}/status")
    while node.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) * 1024)
        time.sleep(0.05)
    return peak


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes = b"", **headers: str) -> None:
    """Answer ``status`` with ``body`` (HTML unless ``Content_Type`` says otherwise)."""
    handler.send_response(status)
    headers = {"Content_Type": "text/html; charset=utf-8", **headers}
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def page(title: str, *links: str) -> bytes:
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    return f"<html><head><title>{title}</title></head><body>{anchors}</body></html>".encode()
