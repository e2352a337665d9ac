"""``crawler queue <spider> [--top N] [--site S] [--scan N]``: the head of the shared queue
and queued requests per site."""

from __future__ import annotations

import argparse
from dataclasses import asdict

import orjson

from crawler.cli import numbers
from crawler.cli.config import add_redis_option, project_settings, redis_client
from crawler.cli.spiders import require_spider
from crawler.frontier.inspect import FrontierInspector, QueuedRequest, SiteCounts

SCAN_DEFAULT = 100_000  # queue entries counted per site unless --scan says otherwise


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "queue", help="the requests nodes will lease next, and queued requests per site"
    )
    parser.add_argument("spider")
    parser.add_argument(
        "--top", type=numbers.count, default=20, help="requests shown (default: 20)"
    )
    parser.add_argument("--site", default=None, help="only requests to this host[:port]")
    parser.add_argument(
        "--scan",
        type=numbers.count_or_all,
        default=SCAN_DEFAULT,
        help=f"queue entries counted per site, and walked for --site; 0: all "
        f"(default: {SCAN_DEFAULT:,})",
    )
    add_redis_option(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object for scripts")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.top < 1 or args.scan < 0:
        raise SystemExit("crawler queue: --top must be at least 1 and --scan at least 0")
    require_spider(args.spider, project_settings())
    client = redis_client(args)
    try:
        inspector = FrontierInspector(client, args.spider)
        head = inspector.queue_head(args.top, args.site, args.scan)
        counts = inspector.site_counts(args.scan)
    finally:
        client.close()
    if args.json:
        shown = {
            "spider": args.spider,
            "queued": counts.queued,
            "spilled": counts.spilled,
            "scanned": counts.scanned,
            "sites": counts.sites,
            "head": [asdict(request) for request in head],
        }
        print(orjson.dumps(shown).decode())
    else:
        print_queue(args.spider, args.site, head, counts)
    return 0


def print_queue(
    spider: str, site: str | None, head: list[QueuedRequest], counts: SiteCounts
) -> None:
    where = f" to {site}" if site else ""
    shown = f"the first {len(head)}{where} in lease order" if head else f"none{where} found"
    spilled = (
        f" (+{counts.spilled} in the Kafka backlog, read back as the queue drains: not shown)"
        if counts.spilled
        else ""
    )
    print(f"{spider}: {counts.queued} queued{spilled}; {shown}")
    if head:
        print("  priority  URL  depth  site")
    for request in head:
        depth = "-" if request.depth is None else request.depth
        print(f"  {request.priority:>8}  {request.url}  {depth}  {request.site}")
    if counts.scanned < counts.queued:
        scope = f"counted {counts.scanned} of {counts.queued} queued requests (--scan)"
    else:
        scope = f"all {counts.scanned} queued requests"
    print(f"sites ({scope}):")
    for name, count in counts.sites.items():
        print(f"  {count:>8}  {name}")
