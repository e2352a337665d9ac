"""``crawler requeue <spider>``: return expired leases to the queue, and the seeds held by
killed nodes to the seed key, now (instead of at a live node's next look)."""

from __future__ import annotations

import argparse

import orjson

from crawler.cli.config import frontier_admin, project_settings, redis_client
from crawler.cli.spiders import require_spider, spider_facts
from crawler.cli.status import add_crawl_options
from crawler.frontier.seed_settings import seed_source


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "requeue", help="return expired leases to the queue and killed nodes' seeds now"
    )
    parser.add_argument("spider")
    add_crawl_options(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object for scripts")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = project_settings()
    require_spider(args.spider, settings)
    crawl_id = args.crawl or str(settings["CRAWLER_CRAWL_ID"])
    try:
        source = seed_source(spider_facts(args.spider, settings).seeds_type)
    except ValueError as exc:
        raise SystemExit(f"crawler requeue: {exc}") from None
    client = redis_client(args)
    try:
        admin = frontier_admin(client, args.spider)
        requeued = admin.requeue_expired(crawl_id)
        seeds = admin.requeue_seeds(source.value)
    finally:
        client.close()
    if args.json:
        print(orjson.dumps({"spider": args.spider, "requeued": requeued, "seeds": seeds}).decode())
    else:
        print(
            f"Returned {requeued} expired leases of {args.spider!r} to the queue, {seeds} held"
            f" seeds of stopped nodes to {admin.seeds_key}"
        )
    return 0
