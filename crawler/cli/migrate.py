"""``crawler migrate <spider>``: move a frontier stored by an older version to the queue's lists.

A node refuses a frontier that still holds the keys of the layout before
(``frontier/refused/layout``, ``crawler.frontier.layout``); this moves its requests, in every
part, with the spider's nodes stopped (refused while any is live: it would write the old keys
again or miss requests in flight).
"""

from __future__ import annotations

import argparse
import sys

import orjson

from crawler.cli.config import add_redis_option, project_settings, redis_client
from crawler.cli.spiders import require_spider
from crawler.frontier.layout import migrate_layout, old_layout_keys
from crawler.frontier.partitions import spider_parts
from crawler.frontier.reset import live_nodes


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "migrate", help="move a frontier stored by an older version to the current layout"
    )
    parser.add_argument("spider")
    add_redis_option(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object for scripts")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    spider = args.spider
    require_spider(spider, project_settings())
    client = redis_client(args)
    try:
        parts = spider_parts(client, spider)
        old = old_layout_keys(client, parts)
        if old and (live := live_nodes(client, parts)):
            print(
                f"Not migrated: {len(live)} nodes of {spider!r} are live "
                f"({', '.join(live)}): stop them first",
                file=sys.stderr,
            )
            return 1
        migrated = migrate_layout(client, parts) if old else None
    finally:
        client.close()
    if args.json:
        counts = (
            {"queued": 0, "leases": 0, "dropped": 0, "fingerprints": 0}
            if migrated is None
            else {
                "queued": migrated.queued,
                "leases": migrated.leases,
                "dropped": migrated.dropped,
                "fingerprints": migrated.fingerprints,
            }
        )
        print(orjson.dumps({"spider": spider, "keys": old, **counts}).decode())
    elif migrated is None:
        print(f"Nothing to migrate: the frontier of {spider!r} is in the current layout")
    else:
        print(
            f"Migrated {spider!r} ({', '.join(old)}): {migrated.queued} queued requests, "
            f"{migrated.leases} leases, {migrated.fingerprints} fingerprints, "
            f"{migrated.dropped} entries dropped (no request)"
        )
    return 0
