"""``crawler seed <spider> <url|json>...``: validate seeds, then push the valid ones at once."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TypedDict

import orjson

from crawler.cli.config import add_redis_option, project_settings, redis_client
from crawler.cli.spiders import require_spider
from crawler.frontier.seeds import InvalidSeed, parse_seed

STDIN = "-"


class Rejected(TypedDict):
    seed: str
    reason: str
    error: str


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "seed", help="validate seeds and push the valid ones to <spider>:start_urls"
    )
    parser.add_argument("spider")
    parser.add_argument("seeds", nargs="*", help="URLs or JSON objects; - reads stdin")
    parser.add_argument("--file", default=None, help="one seed per line (- = stdin)")
    add_redis_option(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object for scripts")
    parser.set_defaults(run=run)


def _lines(source: str) -> list[str]:
    text = sys.stdin.read() if source == STDIN else Path(source).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


def read_seeds(args: argparse.Namespace) -> list[str]:
    """The seeds in submission order: arguments (``-`` = stdin lines), then ``--file``."""
    seeds: list[str] = []
    for seed in args.seeds:
        seeds += _lines(STDIN) if seed == STDIN else [seed]
    if args.file is not None:
        seeds += _lines(args.file)
    return seeds


def validate(seeds: list[str], max_bytes: int) -> tuple[list[str], list[Rejected]]:
    valid: list[str] = []
    rejected: list[Rejected] = []
    for raw in seeds:
        try:
            parse_seed(raw, max_bytes=max_bytes)
        except InvalidSeed as exc:
            rejected.append(Rejected(seed=raw, reason=exc.reason, error=str(exc)))
        else:
            valid.append(raw)
    return valid, rejected


def run(args: argparse.Namespace) -> int:
    seeds = read_seeds(args)
    if not seeds:
        raise SystemExit("no seeds given: pass them as arguments, with --file F or -")
    settings = project_settings()
    require_spider(args.spider, settings)
    valid, rejected = validate(seeds, int(settings["SEEDS_MAX_BYTES"]))
    key = str(settings["SEEDS_KEY"]) % {"name": args.spider}
    if valid:
        client = redis_client(args)
        try:
            client.lpush(key, *valid)  # nodes pop from the right: submission order
        finally:
            client.close()
    if args.json:
        print(orjson.dumps({"key": key, "pushed": len(valid), "rejected": rejected}).decode())
    else:
        for entry in rejected:
            print(f"rejected ({entry['reason']}): {entry['seed'][:200]!r}: {entry['error']}")
        print(f"Pushed {len(valid)} seeds to {key}, rejected {len(rejected)}")
    return 1 if rejected else 0
