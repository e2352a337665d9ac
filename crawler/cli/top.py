"""``crawler top [spider]``: a live full-screen view of the crawl (``--once``: print it once)."""

from __future__ import annotations

import argparse
import sys
import time

import orjson

from crawler.cli import numbers
from crawler.cli.config import project_settings, redis_client
from crawler.cli.spiders import require_spider
from crawler.cli.status import (
    SpiderStatus,
    StatusReader,
    add_crawl_options,
    add_dead_letter_status_options,
)
from crawler.cli.status_text import eta_text, gone, progress_bar

CLEAR = "\x1b[H\x1b[2J"
ALT_SCREEN_ON, ALT_SCREEN_OFF = "\x1b[?1049h\x1b[?25l", "\x1b[?25h\x1b[?1049l"
GREEN, RED, YELLOW, BOLD, DIM = "32", "31", "33", "1", "2"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("top", help="live view of the crawl, redrawn every interval")
    parser.add_argument("spider", nargs="?", help="spider to show (default: all found)")
    add_crawl_options(parser)
    add_dead_letter_status_options(parser)
    parser.add_argument(
        "--interval", type=numbers.seconds, default=2.0, help="seconds between redraws"
    )
    parser.add_argument("--once", action="store_true", help="print the view once, plain text")
    parser.add_argument("--color", action="store_true", help="ANSI colours also with --once")
    parser.add_argument(
        "--json", action="store_true", help="a JSON line (as status --json) per interval"
    )
    parser.set_defaults(run=run)


def paint(text: str, code: str, color: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if color else text


def render_spider(status: SpiderStatus, color: bool) -> list[str]:
    snap, totals = status["snapshot"], status["ledger"]["totals"]
    bar = paint(progress_bar(status["progress"], 40), GREEN, color)
    failed = totals.get("failed", 0)
    lines = [
        f"{paint(snap['spider'], BOLD, color)}  {bar}  {eta_text(status)}",
        f"  {status['pages_per_minute']:.1f} pages/min  {status['delivered_per_minute']:.1f}"
        f" delivered/min  done {totals.get('done', 0)}"
        f"  failed {paint(str(failed), RED, color and failed > 0)}",
        f"  queued {snap['queued']}  leased {snap['leased']} ({snap['expired']} expired)"
        f"  seeds waiting {snap['seeds_waiting']}"
        + (
            f"  held {snap['seeds_held']} ({snap['seeds_held_expired']} expired)"
            if snap["seeds_held"]
            else ""
        ),
    ]
    shown = [node for node in snap["nodes"] if not gone(node)]
    width = max((len(node["node"]) for node in shown), default=4)
    lines.append(paint(f"  {'NODE':<{width}}  STATE  LEASES  HEARTBEAT", DIM, color))
    for node in shown:
        colour = {"live": GREEN, "late": YELLOW, "dead": RED, "gone": RED}[node["state"]]
        state = paint(f"{node['state']:<5}", colour, color)
        lines.append(
            f"  {node['node']:<{width}}  {state}  {node['leases']:>6}"
            f"  {node['heartbeat_ago']:>6.1f}s ago"
        )
    dead = status["dead_letters"]
    if dead["state"] == "known":
        letters = paint(f"{dead['unhandled']} unhandled", RED, color and bool(dead["unhandled"]))
    else:
        letters = paint("unknown", YELLOW, color) if dead["state"] == "unknown" else "-"
    sessions = status["sessions"]
    accounts = (
        ", ".join(f"{health} {n}" for health, n in sessions["by_health"].items()) or "none"
        if sessions is not None
        else "-"
    )
    lines.append(f"  dead letters {letters}  sessions {accounts}")
    cooling = [site for site in snap["politeness"] if site["cooldown_left"] > 0]
    lines += [
        paint(f"  cooling down: {site['site']} {site['cooldown_left']:.0f}s", YELLOW, color)
        for site in cooling
    ]
    return lines


def render_screen(statuses: list[SpiderStatus], color: bool) -> str:
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    lines = [paint(f"crawler top  {now} UTC  {len(statuses)} spider(s)", BOLD, color), ""]
    for status in statuses:
        lines += [*render_spider(status, color), ""]
    if not statuses:
        lines.append("No spider state in this Redis database.")
    return "\n".join(lines).rstrip() + "\n"


def stream_json(reader: StatusReader, spiders: list[str], args: argparse.Namespace) -> None:
    """The statuses as JSON lines, one per interval (``--once``: one), for scripts."""
    while True:
        sys.stdout.write(orjson.dumps(reader.collect_all(spiders)).decode() + "\n")
        sys.stdout.flush()
        if args.once:
            return
        time.sleep(args.interval)


def run(args: argparse.Namespace) -> int:
    spiders = [args.spider] if args.spider else []
    if args.spider:
        require_spider(args.spider, project_settings())
    client = redis_client(args)
    try:
        reader = StatusReader(client, args)
        try:
            if args.json:
                stream_json(reader, spiders, args)
                return 0
            if args.once:
                sys.stdout.write(render_screen(reader.collect_all(spiders), args.color))
                return 0
            sys.stdout.write(ALT_SCREEN_ON)
            try:
                while True:
                    sys.stdout.write(CLEAR + render_screen(reader.collect_all(spiders), True))
                    sys.stdout.flush()
                    time.sleep(args.interval)
            finally:
                sys.stdout.write(ALT_SCREEN_OFF)
                sys.stdout.flush()
        finally:
            reader.close()
    finally:
        client.close()
