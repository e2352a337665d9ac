"""``crawler purge <spider> [--yes] [--keep-seeds] [--force]``: ``scrapy purge``, with ledgers."""

from __future__ import annotations

import argparse
import sys

import orjson

from crawler.cli.config import add_redis_option, project_settings, redis_client
from crawler.cli.spiders import require_spider
from crawler.frontier.backlog import backlog_topic, purge_backlog
from crawler.frontier.partitions import spider_parts
from crawler.frontier.reset import live_nodes, reset_wait


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("purge", help="delete a spider's shared state in Redis")
    parser.add_argument("spider")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--keep-seeds", action="store_true", help="keep <spider>:start_urls")
    parser.add_argument("--force", action="store_true", help="purge even with live nodes")
    add_redis_option(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object for scripts")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from crawler.commands.purge import (  # noqa: PLC0415 - the Scrapy command: loads Scrapy
        confirmation,
        outcome,
        present_keys,
        purge,
        refusal,
    )

    spider = args.spider
    settings = project_settings()
    require_spider(spider, settings)
    client = redis_client(args)
    acknowledged = None
    try:
        live = live_nodes(client, spider_parts(client, spider))
        if (why := refusal(live, spider, force=args.force)) is not None:
            print(f"Not purged: {why}", file=sys.stderr)
            return 1
        present = present_keys(client, spider, keep_seeds=args.keep_seeds)
        topic = backlog_topic(
            int(settings["FRONTIER_QUEUE_MAX"]),
            str(settings["KAFKA_BOOTSTRAP_SERVERS"] or ""),
            str(settings["FRONTIER_BACKLOG_TOPIC"]),
            spider,
        )
        question = confirmation(present, topic)
        if question is not None and not args.yes and input(question).strip() != spider:
            print("Not purged.")
            return 1
        deleted = 0
        if present:
            wait = reset_wait(float(settings["FRONTIER_HEARTBEAT_INTERVAL"]))
            deleted, acknowledged = purge(client, spider, present, live=live, wait=wait)
    finally:
        client.close()
    backlog = purge_backlog(str(settings["KAFKA_BOOTSTRAP_SERVERS"]), topic) if topic else ""
    if args.json:
        reset = (
            None
            if acknowledged is None
            else {"nodes": acknowledged.nodes, "late": acknowledged.late}
        )
        print(
            orjson.dumps(
                {
                    "spider": spider,
                    "deleted": deleted,
                    "keys": present,
                    "reset": reset,
                    "backlog": backlog.removeprefix("; "),
                }
            ).decode()
        )
    else:
        print(outcome(spider, present, deleted, acknowledged) + backlog)
    return 0
