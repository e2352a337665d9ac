"""``crawler failed <spider> list|retry|drop [--reason R]``: the failed requests of a spider.

The records are ``{<spider>}:failed`` (``turn.lua``, outcome ``failed``). ``retry`` puts
each request back into the queue, removing its record in the same atomic step;
nodes lease it like any new request (the dupefilter is not asked: it was seen long ago).
Each retry is counted as ``retried`` in the crawl's ledger (``--crawl``, default
``CRAWLER_CRAWL_ID``), so ``enqueued + retried == done + failed`` once the crawl is over.
``drop`` deletes the records, after asking unless ``--yes``. ``--reason`` keeps the records
whose reason starts with it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime

import orjson
from scrapy.settings import Settings

from crawler.cli.config import add_redis_option, project_settings, redis_client
from crawler.cli.prompt import answer
from crawler.cli.spiders import require_spider
from crawler.extensions.ledger_layout import LedgerKeys
from crawler.frontier.inspect import FailedRecord, FrontierInspector
from crawler.settings_values import get_bool

Action = Callable[[argparse.Namespace, FrontierInspector], int]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("failed", help="list, retry or drop a spider's failed requests")
    parser.add_argument("spider")
    actions = parser.add_subparsers(dest="action", required=True)
    for name, action, help_text in (
        ("list", run_list, "print the failed requests"),
        ("retry", run_retry, "put them back into the queue (after a fix)"),
        ("drop", run_drop, "delete them (asks first)"),
    ):
        sub = actions.add_parser(name, help=help_text)
        sub.add_argument("--reason", default="", help="only reasons starting with this")
        add_redis_option(sub)
        sub.add_argument("--json", action="store_true", help="JSON for scripts")
        sub.set_defaults(run=_command(action))
    actions.choices["drop"].add_argument("--yes", action="store_true", help="do not ask")
    actions.choices["retry"].add_argument(
        "--crawl", default=None, help="crawl id of the ledger (default: CRAWLER_CRAWL_ID)"
    )


def _command(action: Action) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        require_spider(args.spider, project_settings())
        client = redis_client(args)
        try:
            return action(args, FrontierInspector(client, args.spider))
        finally:
            client.close()

    return run


def _which(args: argparse.Namespace) -> str:
    """What the command works on, for its messages."""
    reason = f" (reason {args.reason}*)" if args.reason else ""
    return f"failed requests of {args.spider!r}{reason}"


def _line(record: FailedRecord) -> str:
    fields = record.fields
    request = fields.get("request")
    url = request.get("url", "?") if isinstance(request, dict) else request
    at = fields.get("at")
    when = (
        datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        if isinstance(at, int | float)
        else "?"
    )
    error = f"  {fields['error']}" if "error" in fields else ""
    return f"{record.id}  {when}  {fields.get('node', '?')}  {record.reason}  {url}{error}"


def run_list(args: argparse.Namespace, inspector: FrontierInspector) -> int:
    shown = 0
    for record in inspector.failed(args.reason):
        if args.json:
            print(orjson.dumps({"id": record.id, **record.fields}).decode(), flush=True)
        else:
            print(_line(record), flush=True)
        shown += 1
    if not args.json:
        print(f"{shown} {_which(args)} listed")
    return 0


def run_retry(args: argparse.Namespace, inspector: FrontierInspector) -> int:
    retried = skipped = 0
    settings = project_settings()
    compress = get_bool(Settings(settings), "FRONTIER_COMPRESS")  # as nodes store them
    crawl_id = args.crawl or str(settings["CRAWLER_CRAWL_ID"])
    ledger = LedgerKeys.for_crawl(args.spider, crawl_id).total
    for record in inspector.failed(args.reason):
        try:
            queued = inspector.retry(record, compress, ledger)
        except ValueError as exc:
            print(f"not retried {record.id}: {exc}", file=sys.stderr)
            skipped += 1
            continue
        if queued:
            retried += 1
        else:
            print(f"not retried {record.id}: gone or changed meanwhile", file=sys.stderr)
            skipped += 1
    if args.json:
        counts = {"spider": args.spider, "retried": retried, "skipped": skipped}
        print(orjson.dumps(counts).decode())
    else:
        print(f"Retried {retried} {_which(args)}: back in {inspector.queue_key}; {skipped} skipped")
    return 1 if skipped else 0


def run_drop(args: argparse.Namespace, inspector: FrontierInspector) -> int:
    ids = [record.id for record in inspector.failed(args.reason)]
    if ids and not args.yes:
        questions = sys.stderr if args.json else sys.stdout  # --json: stdout is for the JSON
        reply = answer(f"Drop {len(ids)} {_which(args)}? [y/N] ", to=questions)
        if reply.strip().lower() not in ("y", "yes"):
            print("Not dropped.", file=questions)
            return 1
    dropped = inspector.drop(ids)
    if args.json:
        print(orjson.dumps({"spider": args.spider, "dropped": dropped}).decode())
    else:
        print(f"Dropped {dropped} {_which(args)}")
    return 0
