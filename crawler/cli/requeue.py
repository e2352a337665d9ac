"""``crawler requeue <spider>``: return expired leases to the queue now."""

from __future__ import annotations

import argparse

import orjson

from crawler.cli.config import frontier_admin, project_settings, redis_client
from crawler.cli.spiders import require_spider
from crawler.cli.status import add_crawl_options


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("requeue", help="return expired leases to the queue now")
    parser.add_argument("spider")
    add_crawl_options(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object for scripts")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = project_settings()
    require_spider(args.spider, settings)
    crawl_id = args.crawl or str(settings["CRAWLER_CRAWL_ID"])
    client = redis_client(args)
    try:
        requeued = frontier_admin(client, args.spider).requeue_expired(crawl_id)
    finally:
        client.close()
    if args.json:
        print(orjson.dumps({"spider": args.spider, "requeued": requeued}).decode())
    else:
        print(f"Returned {requeued} expired leases of {args.spider!r} to the queue")
    return 0
