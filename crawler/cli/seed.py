"""``crawler seed <spider> <url|json>... [--recrawl]``: check seeds, then push the ones to crawl.

Each seed goes through the spider's own ``make_request_from_data`` and is looked up
in the frontier's dedup (``crawler.cli.seed_check``); the command says of each
whether it is new, crawled before, or invalid, and pushes the new ones and the
crawled ones that are fetched again (``dont_filter``, the default) to the
spider's seed key, in one step. ``--recrawl`` first forgets every URL the crawl
has seen (``crawler.frontier.reset.forget_seen``), so the seeds and every page
they lead to are crawled again; it is refused while the crawl has work left.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import orjson

from crawler.cli.config import add_redis_option, project_settings, redis_client, redis_url
from crawler.cli.seed_check import Outcome, SeedChecker, SeedReport
from crawler.cli.spiders import require_spider, spider_class
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.partitions import spider_parts
from crawler.frontier.pending import pending_requests_sync
from crawler.frontier.reset import forget_seen, reset_note, reset_wait
from crawler.frontier.seed_holds import SeedKeys, seed_readers
from crawler.frontier.seed_settings import SeedSettings, SeedSource
from crawler.lua import text
from crawler.redis_connection import SyncRedis, server_time_ms

STDIN = "-"
CHECK_BATCH = 1000  # fingerprints looked up per script call
LINES_SHOWN = 100  # text output: seeds listed per outcome, then a count (every invalid one)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "seed", help="check seeds (new, crawled before, invalid) and push them to the spider"
    )
    parser.add_argument("spider")
    parser.add_argument("seeds", nargs="*", help="URLs or JSON objects; - reads stdin")
    parser.add_argument("--file", default=None, help="one seed per line (- = stdin)")
    parser.add_argument(
        "--recrawl",
        action="store_true",
        help="forget every URL the crawl has seen first: the seeds and all they lead to are "
        "crawled again (refused while the crawl has work queued or leased)",
    )
    add_redis_option(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object for scripts")
    parser.set_defaults(run=run, more_positionals="seeds")


def _lines(source: str) -> list[str]:
    try:
        text = sys.stdin.read() if source == STDIN else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"crawler seed: cannot read {source}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SystemExit(f"crawler seed: cannot read {source}: not UTF-8 ({exc})") from exc
    return [line for line in text.splitlines() if line.strip()]


def read_seeds(args: argparse.Namespace) -> list[str]:
    """The seeds in submission order: arguments (``-`` = stdin lines), then ``--file``."""
    seeds: list[str] = []
    for seed in args.seeds:
        seeds += _lines(STDIN) if seed == STDIN else [seed]
    if args.file is not None:
        seeds += _lines(args.file)
    return seeds


def check(checker: SeedChecker, client: SyncRedis, seeds: list[str]) -> list[SeedReport]:
    reports: list[SeedReport] = []
    for start in range(0, len(seeds), CHECK_BATCH):
        reports += checker.check(client, seeds[start : start + CHECK_BATCH])
    return reports


def to_push(reports: list[SeedReport]) -> list[bytes]:
    """New seeds, and crawled ones that are fetched again, as they are pushed; a filtered
    crawled one would only be dropped by the dedup."""
    return [
        r.data
        for r in reports
        if r.outcome is Outcome.NEW or (r.outcome is Outcome.SEEN and r.refetched)
    ]


def push(client: SyncRedis, key: str, source: SeedSource, seeds: list[bytes]) -> None:
    """In submission order, to the key's type as the spider reads it."""
    if source is SeedSource.LIST:
        client.lpush(key, *seeds)  # nodes pop from the right: submission order
    elif source is SeedSource.SET:
        client.sadd(key, *seeds)
    else:
        client.zadd(key, dict.fromkeys(seeds, 0), nx=True)


def describe(report: SeedReport) -> str:
    shown = report.seed[:200]
    if report.outcome is Outcome.INVALID:
        return f"invalid ({report.reason}): {shown!r}: {report.error}"
    if report.outcome is Outcome.NEW:
        return f"new: {shown}"
    if report.outcome is Outcome.SKIPPED:
        return (
            f"skipped: {shown}: not pushed, the spider's make_request_from_data makes no request "
            "of it (a node would take it and do nothing)"
        )
    if report.refetched:
        return (
            f"crawled before: {shown}: its page is fetched again, the pages it leads to that "
            "were crawled are skipped (--recrawl crawls them all again)"
        )
    return (
        f"crawled before: {shown}: not pushed, the dedup would drop it (it is not dont_filter; "
        "--recrawl crawls it and all it leads to again)"
    )


def print_reports(reports: list[SeedReport]) -> None:
    shown: Counter[Outcome] = Counter()
    for report in reports:
        shown[report.outcome] += 1
        # a rejected seed is pushed nowhere: its line is the operator's one record of it
        if shown[report.outcome] <= LINES_SHOWN or report.outcome is Outcome.INVALID:
            print(describe(report))
    for outcome, count in shown.items():
        if count > LINES_SHOWN and outcome is not Outcome.INVALID:
            print(f"... and {count - LINES_SHOWN} more {outcome.value} seeds")


def refuse_recrawl(client: SyncRedis, parts: Sequence[FrontierKeys], spider: str) -> None:
    queued, leased = pending_requests_sync(client, parts)
    if queued or leased:
        raise SystemExit(
            f"crawler: not recrawled: the crawl of {spider!r} still has {queued} queued and "
            f"{leased} leased requests, which would be fetched twice; wait until it has "
            f"finished (crawler status {spider}) or purge it (crawler purge {spider})"
        )


def unread_warning(client: SyncRedis, spider: str, seeds: SeedSettings) -> str | None:
    """A warning when nodes of ``spider`` are live and none reads seeds from its seed key."""
    nodes = seeds.frontier[0].nodes  # every node beats in every part
    live = [text(n) for n in client.zrangebyscore(nodes, server_time_ms(client, nodes), "+inf")]
    keys = SeedKeys(seeds.seeds_key, seeds.invalid_key, seeds.frontier)
    if not live or seed_readers(client, keys, server_time_ms(client, keys.takers)):
        return None
    return (
        f"warning: no live node reads seeds from {seeds.seeds_key}: the live nodes of {spider} "
        f"({', '.join(live)}) read another key (started with another SEEDS_KEY or redis_key? "
        f"give crawler seed the same: CRAWLER_SETTING_SEEDS_KEY=...), or read no seeds; the "
        f"seeds wait in {seeds.seeds_key} for a node that reads it"
    )


def run(args: argparse.Namespace) -> int:
    seeds = read_seeds(args)
    if not seeds:
        raise SystemExit("no seeds given: pass them as arguments, with --file F or -")
    settings = project_settings()
    require_spider(args.spider, settings)
    checker = SeedChecker(spider_class(args.spider, settings), settings, redis_url(args))
    client = redis_client(args)
    note = ""
    try:
        if args.recrawl:
            parts = spider_parts(client, args.spider)
            refuse_recrawl(client, parts, args.spider)
            wait = reset_wait(float(settings["FRONTIER_HEARTBEAT_INTERVAL"]))
            note = "Forgot every URL the crawl had seen" + reset_note(
                forget_seen(client, parts, wait)
            )
        reports = check(checker, client, seeds)
        pushed = to_push(reports)
        key = checker.seed_settings.seeds_key
        if pushed:
            push(client, key, checker.seed_settings.source, pushed)
            warning = unread_warning(client, args.spider, checker.seed_settings)
            if warning:
                print(warning, file=sys.stderr)
    finally:
        client.close()
    counts = Counter(report.outcome.value for report in reports)
    if args.json:
        rejected = [r.as_json() for r in reports if r.outcome is Outcome.INVALID]
        print(
            orjson.dumps(
                {
                    "key": key,
                    "pushed": len(pushed),
                    "new": counts["new"],
                    "seen": counts["seen"],
                    "skipped": counts["skipped"],
                    "rejected": rejected,
                    "recrawl": args.recrawl,
                    "seeds": [report.as_json() for report in reports],
                }
            ).decode()
        )
    else:
        if note:
            print(note)
        print_reports(reports)
        skipped = f", skipped {counts['skipped']}" if counts["skipped"] else ""
        print(
            f"Pushed {len(pushed)} seeds to {key} ({counts['new']} new, {counts['seen']} crawled "
            f"before), rejected {counts['invalid']}{skipped}"
        )
    return 1 if counts["invalid"] else 0
