"""``crawler status [spider ...]``: queue, leases, nodes, rates, failures, progress per spider."""

from __future__ import annotations

import argparse
import time
from typing import TypedDict

import orjson

from crawler.cli.config import add_redis_option, frontier_admin, project_settings, redis_client
from crawler.frontier.admin import LedgerView, Snapshot, discover_spiders
from crawler.redis_connection import SyncRedis

RATE_MINUTES = 5  # rates are averaged over this many of the last minutes


class SpiderStatus(TypedDict):
    snapshot: Snapshot
    ledger: LedgerView
    finished: int  # done + failed in this crawl (ledger)
    progress: float | None  # finished / (finished + queued + leased)
    pages_per_minute: float
    delivered_per_minute: float
    finished_per_minute: float
    eta_seconds: float | None


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("status", help="state of the spiders' shared frontier")
    parser.add_argument("spiders", nargs="*", help="spiders to show (default: all found)")
    add_crawl_options(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object for scripts")
    parser.set_defaults(run=run)


def add_crawl_options(parser: argparse.ArgumentParser) -> None:
    add_redis_option(parser)
    parser.add_argument(
        "--crawl", default=None, help="crawl id of the ledger (default: CRAWLER_CRAWL_ID)"
    )


def per_minute(count: int, seconds: float) -> float:
    return round(count * 60 / seconds, 1) if seconds > 0 else 0.0


def collect(client: SyncRedis, spider: str, crawl_id: str) -> SpiderStatus:
    admin = frontier_admin(client, spider)
    snapshot = admin.snapshot()
    ledger = admin.ledger(crawl_id, RATE_MINUTES)
    totals, recent, window = ledger["totals"], ledger["recent"], ledger["window_seconds"]
    finished = totals.get("done", 0) + totals.get("failed", 0)
    remaining = snapshot["queued"] + snapshot["leased"]
    finished_per_minute = per_minute(recent.get("done", 0) + recent.get("failed", 0), window)
    eta = None
    if remaining == 0:
        eta = 0.0
    elif finished_per_minute > 0:
        eta = round(remaining * 60 / finished_per_minute, 1)
    return SpiderStatus(
        snapshot=snapshot,
        ledger=ledger,
        finished=finished,
        progress=finished / (finished + remaining) if finished + remaining else None,
        pages_per_minute=per_minute(recent.get("pages", 0), window),
        delivered_per_minute=per_minute(recent.get("items/delivered", 0), window),
        finished_per_minute=finished_per_minute,
        eta_seconds=eta,
    )


def collect_all(client: SyncRedis, spiders: list[str], crawl: str | None) -> list[SpiderStatus]:
    """Status of ``spiders`` (default: every spider found) in crawl ``crawl`` (or the default)."""
    crawl_id = crawl or str(project_settings()["CRAWLER_CRAWL_ID"])
    return [collect(client, spider, crawl_id) for spider in spiders or discover_spiders(client)]


def progress_bar(fraction: float | None, width: int = 30) -> str:
    filled = round((fraction or 0.0) * width)
    percent = "   -  " if fraction is None else f"{fraction * 100:5.1f}%"
    return f"[{'#' * filled}{'.' * (width - filled)}] {percent}"


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    if seconds == 0:
        return "finished"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"ETA {hours}:{minutes:02d}:{secs:02d}"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in counts.items()) or "none"


def render(status: SpiderStatus) -> str:
    snap, totals = status["snapshot"], status["ledger"]["totals"]
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(snap["server_time"]))
    live = [node for node in snap["nodes"] if node["live"]]
    lines = [
        f"{snap['spider']}  (crawl {status['ledger']['crawl_id']}, {at} UTC)",
        f"  progress       {progress_bar(status['progress'])}  {format_eta(status['eta_seconds'])}",
        f"  done/failed    {totals.get('done', 0)} done, {totals.get('failed', 0)} failed,"
        f" {totals.get('enqueued', 0)} enqueued, {totals.get('pages', 0)} pages",
        f"  queue          {snap['queued']} queued, {snap['leased']} leased"
        f" ({snap['expired']} expired), {snap['dedup']} seen,"
        f" {snap['seeds_waiting']} seeds waiting",
        f"  rates          {status['pages_per_minute']} pages/min,"
        f" {status['delivered_per_minute']} items delivered/min,"
        f" {status['finished_per_minute']} finished/min"
        f" (last {status['ledger']['window_seconds']:.0f}s)",
        f"  nodes          {len(live)} live of {len(snap['nodes'])}",
    ]
    width = max((len(node["node"]) for node in snap["nodes"]), default=0)
    lines += [
        f"    {node['node']:<{width}}  {'live' if node['live'] else 'DEAD'}"
        f"  {node['leases']:>4} leases  heartbeat {node['heartbeat_ago']:.1f}s ago"
        for node in snap["nodes"]
    ]
    lines += [
        f"  failures       {snap['failed']}: {_counts(snap['failed_by_reason'])}",
        f"  invalid seeds  {snap['invalid_seeds']}: {_counts(snap['invalid_by_reason'])}",
        f"  politeness     {len(snap['politeness'])} site(s)",
    ]
    lines += [
        f"    {site['site']}  factor {site['factor']:.2f}"
        + (f"  cooling down {site['cooldown_left']:.1f}s" if site["cooldown_left"] else "")
        for site in snap["politeness"]
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    client = redis_client(args)
    try:
        statuses = collect_all(client, args.spiders, args.crawl)
    finally:
        client.close()
    if args.json:
        print(orjson.dumps(statuses, option=orjson.OPT_INDENT_2).decode())
    elif not statuses:
        print("No spider state in this Redis database.")
    else:
        print("\n\n".join(render(status) for status in statuses))
    return 0
