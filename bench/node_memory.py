"""Memory of one crawler node, and its first browser render: Playwright eager vs on demand.

    .venv/bin/python -m bench.node_memory [--pages 1000] [--settle 5] [--runs 3]

One ``pages`` node in cluster mode (Redis and Kafka: ``REDIS_URL`` and
``KAFKA_BOOTSTRAP_SERVERS``, else local ones started here), in two variants measured in
the same run, each ``--runs`` times in turn:

* **eager (before)**: scrapy-playwright's own handler for http and https, as the
  add-on installed it until 2026-12-01 (``-s DOWNLOAD_HANDLERS=...``, kept beneath the
  node's download handler): a Playwright driver per scheme starts with the engine;
* **on demand (after)**: the default, ``NodeDownloadHandler``: Playwright starts with
  the first request that needs a browser.

For each: processes and resident memory of the node's process tree (``VmRSS`` of the
node and every descendant, from ``/proc``) once idle, after crawling ``--pages`` pages
of a local site (none rendered), and after one rendered page; the latency of the
first and of the next render (``LPUSH`` of a ``browser: true`` seed to the page's own
script calling home, so the page has been loaded and run in Chromium).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
import redis

from crawler.demo.nodes import process_tree, start_node, stop_node, tree_rss_bytes
from crawler.demo.run import services
from crawler.demo.server import BackgroundHTTPServer, QuietHandler
from crawler.demo.site import Site

PLAYWRIGHT_HANDLER = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
EAGER = orjson.dumps(dict.fromkeys(("http", "https"), PLAYWRIGHT_HANDLER)).decode()
VARIANTS: dict[str, dict[str, str]] = {
    "eager (before)": {"DOWNLOAD_HANDLERS": EAGER},
    "on demand (after)": {},
}
SCRIPT_PAGE = (
    b"<!doctype html><html><head><title>js</title></head><body><script>"
    b"fetch('/rendered' + location.search);</script></body></html>"
)


class ScriptSite(BackgroundHTTPServer):
    """A page whose script asks ``/rendered``: when it does, Chromium has run the page."""

    def __init__(self) -> None:
        self.rendered: dict[str, float] = {}  # query -> time.monotonic() of the call home
        self.called = threading.Event()
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path == "/rendered":
                    site.rendered[query] = time.monotonic()
                    site.called.set()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(SCRIPT_PAGE)

        super().__init__(Handler)


@dataclass(frozen=True)
class Sample:
    processes: int
    rss_mb: float


@dataclass(frozen=True)
class Row:
    variant: str
    idle: Sample
    crawled: Sample
    rendered: Sample
    first_render_s: float
    next_render_s: float


def sample(pid: int) -> Sample:
    return Sample(len(process_tree(pid)), tree_rss_bytes(pid) / 1e6)


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(0.05)


def render_latency(client: redis.Redis, script_site: ScriptSite, query: str) -> float:
    seed = {"url": f"{script_site.base_url}/?{query}", "meta": {"browser": True}}
    pushed = time.monotonic()
    client.lpush("pages:start_urls", orjson.dumps(seed))
    wait_until(lambda: query in script_site.rendered, 120, f"render of {query}")
    return script_site.rendered[query] - pushed


def measure(
    variant: str, *, pages: int, settle: float, redis_url: str, bootstrap: str, workdir: Path
) -> Row:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    settings = {
        **VARIANTS[variant],
        "KAFKA_TOPIC_TEMPLATE": f"bench-memory-{uuid.uuid4().hex[:8]}-{{spider}}",
        "SEEDS_ALLOWED_META": "browser",
        "POLITENESS_RATE": "1000",
        "POLITENESS_BURST": "50",
        "METRICS_PORTS": "0",
    }
    log = workdir / f"{variant}.log"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    node = start_node("pages", env=env, settings=settings, log_path=log, node_id="bench")
    try:
        with Site(pages) as site, ScriptSite() as script_site:
            wait_until(lambda: "Spider opened" in log.read_text(), 60, "the node's start")
            time.sleep(settle)
            idle = sample(node.pid)
            client.lpush("pages:start_urls", site.url(0))
            wait_until(lambda: len(site.hits) >= pages, 300, f"a crawl of {pages} pages")
            time.sleep(1.0)
            crawled = sample(node.pid)
            first = render_latency(client, script_site, "first")
            time.sleep(1.0)
            rendered = sample(node.pid)
            following = render_latency(client, script_site, "next")
    finally:
        stop_node(node)
        client.close()
    return Row(variant, idle, crawled, rendered, first, following)


def table(rows: list[Row], pages: int) -> str:
    def cell(value: Sample) -> str:
        return f"{value.rss_mb:.0f} MB ({value.processes} proc.)"

    lines = [
        f"| node | idle | after {pages:,} pages | after 1 rendered page "
        "| first render | next render |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {row.variant} | {cell(row.idle)} | {cell(row.crawled)} | {cell(row.rendered)} "
        f"| {row.first_render_s:.2f} s | {row.next_render_s:.2f} s |"
        for row in rows
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1000)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds idle before sampling")
    parser.add_argument("--runs", type=int, default=3, help="measurements of each variant")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp,
        services(Path(tmp)) as (redis_url, bootstrap),
    ):
        rows = [
            measure(
                variant,
                pages=args.pages,
                settle=args.settle,
                redis_url=redis_url,
                bootstrap=bootstrap,
                workdir=Path(tmp),
            )
            for _ in range(args.runs)
            for variant in VARIANTS
        ]
    print(table(sorted(rows, key=lambda row: list(VARIANTS).index(row.variant)), args.pages))


if __name__ == "__main__":
    main()
