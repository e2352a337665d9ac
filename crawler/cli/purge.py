"""``crawler purge <spider> [--yes] [--keep-seeds] [--force] [--json]``: ``scrapy purge``
outside ``scrapy`` (both run ``crawler.frontier.purge.PurgePlan``), with a JSON outcome."""

from __future__ import annotations

import argparse
import sys

import orjson

from crawler.cli.config import add_redis_option, project_settings, redis_client
from crawler.cli.prompt import answer
from crawler.cli.spiders import require_spider, spider_facts
from crawler.frontier.purge import PurgePlan, PurgeSettings


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("purge", help="delete a spider's shared state in Redis")
    parser.add_argument("spider")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--keep-seeds", action="store_true", help="keep the seed key")
    parser.add_argument("--force", action="store_true", help="purge even with live nodes")
    add_redis_option(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object for scripts")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = project_settings()
    require_spider(args.spider, settings)
    facts = spider_facts(args.spider, settings)
    # the spider's custom_settings too (its own FRONTIER_BACKLOG_TOPIC)
    purge_settings = PurgeSettings.from_settings(facts.settings)
    client = redis_client(args)
    try:
        plan = PurgePlan.survey(
            client,
            args.spider,
            purge_settings,
            seed_keys=(facts.seeds_key, facts.invalid_key),
            keep_seeds=args.keep_seeds,
            force=args.force,
        )
        if (why := plan.refusal) is not None:
            print(f"Not purged: {why}", file=sys.stderr)
            return 1
        questions = sys.stderr if args.json else sys.stdout  # --json: stdout is for the JSON
        if not plan.confirmed(yes=args.yes, ask=lambda question: answer(question, to=questions)):
            print("Not purged.", file=questions)
            return 1
        result = plan.carry_out(client)
    finally:
        client.close()
    print(orjson.dumps(result.as_json()).decode() if args.json else result.summary())
    return 0
