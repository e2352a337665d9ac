"""``crawler spool list|replay <spider>``: the local spool of messages Kafka could not take."""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

import orjson
from scrapy.settings import Settings

from crawler.cli import numbers
from crawler.cli.config import (
    add_kafka_option,
    add_spool_options,
    kafka_bootstrap,
    kafka_security,
    project_settings,
    redis_client,
    spool_dir,
)
from crawler.cli.spiders import require_spider, settings_as_nodes_read_them, spider_class
from crawler.cli.status import add_crawl_options
from crawler.extensions.ledger_layout import (
    REPLAY_FIELDS,
    REPLAY_RUN,
    LedgerKeys,
    fields_by_crawl,
    ledger_fields,
    push_args,
    replayed_of_other_crawls,
)
from crawler.kafka.config import TopicSpec
from crawler.kafka.producer import NO_AUTO_CREATION, message_timeout, producer_config
from crawler.kafka.sender import ItemSender, SenderConfig
from crawler.kafka.spool import DEAD_LETTER_DIR, claim, dead_letter_file, read_segment
from crawler.kafka.topics import TopicChecker
from crawler.lua import script_text
from crawler.node import resolve_crawl_id, resolve_node_id
from crawler.redis_connection import SyncRedis


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("spool", help="list or replay the local Kafka spool")
    actions = parser.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="segments and their messages")
    add_spool_options(listing)
    listing.add_argument("--json", action="store_true", help="a JSON list for scripts")
    listing.set_defaults(run=run_list)
    replay = actions.add_parser("replay", help="send the spooled messages to Kafka now")
    add_spool_options(replay)
    add_kafka_option(replay)
    add_crawl_options(replay)
    replay.add_argument("--timeout", type=numbers.seconds, default=60.0)
    replay.add_argument("--json", action="store_true", help="one JSON object for scripts")
    replay.set_defaults(run=run_replay)


def spider_spool(args: argparse.Namespace) -> Path:
    """The spool folder of the spider ``args`` names (a spider the project does not have
    ends the command)."""
    require_spider(args.spider, project_settings())
    return spool_dir(args)


def run_list(args: argparse.Namespace) -> int:
    directory = spider_spool(args)
    rows: list[dict[str, object]] = []
    for segment in sorted(directory.glob("*.jsonl")) if directory.is_dir() else []:
        handle = claim(segment)
        if handle is None:
            rows.append({"segment": segment.name, "state": "being written"})
            continue
        with handle:
            rows.append(_row(segment.name, "sealed", segment, handle))
    segments = len(rows)
    # never replayed; read unlocked (a running node holds its file): lines are whole
    for path in sorted((directory / DEAD_LETTER_DIR).glob("*.jsonl")):
        with path.open("rb") as handle:
            rows.append(_row(f"{DEAD_LETTER_DIR}/{path.name}", "dead_letters", path, handle))
    if args.json:
        print(orjson.dumps(rows).decode())
        return 0
    if not rows:
        print(f"spool {directory} is empty")
    elif not segments:
        print(f"spool {directory} has no segments to replay")
    for row in rows:
        print(" ".join(f"{name}={value}" for name, value in row.items()))
    return 0


def _row(name: str, state: str, path: Path, handle: IO[bytes]) -> dict[str, object]:
    records, broken = read_segment(handle)
    return {
        "segment": name,
        "state": state,
        "messages": len(records),
        "unreadable": broken,
        "bytes": path.stat().st_size,
        "topics": dict(Counter(r.message.topic for r in records)),
        "reasons": dict(Counter(r.reason for r in records)),
    }


def ledger_redis(args: argparse.Namespace) -> SyncRedis | None:
    """The Redis of the crawl's ledger, when ``--redis`` or ``REDIS_URL`` names one (asked
    before the replay: an unreachable one ends the command with nothing sent)."""
    if not (args.redis or project_settings()["REDIS_URL"]):
        return None
    return redis_client(args)


def add_replayed_to_ledger(
    client: SyncRedis, spider: str, crawl_id: str, node_id: str, deltas: Mapping[str, int]
) -> None:
    """Count the replayed messages in the crawl's ledger (``items/replayed``, and of them
    ``items/delivered``, which a node's own replays add to in its pushes): one final push of a
    run of its own."""
    keys = LedgerKeys.for_crawl(spider, crawl_id)
    run = f"{node_id}{REPLAY_RUN}{uuid.uuid4().hex[:8]}"
    args = push_args(run, 1, keys, state="final", every_ms=0, deltas=deltas)
    client.register_script(script_text("crawler.frontier", "ledger_push"))(
        keys=[keys.total, keys.runs], args=args
    )


def replayed_by_crawl(
    counts: Counter[str], crawl_id: str, override: bool
) -> dict[str, dict[str, int]]:
    """Crawl id -> the messages of it the replay took out of the spool (``items/replayed``:
    delivered or dead-lettered; ``items/delivered``): each message's crawl (its ``crawl_id``
    header; ``crawl_id`` for none), or all of them ``crawl_id``'s when ``--crawl`` named it
    (``override``)."""
    fields = ledger_fields(counts)
    credited = [((crawl_id, name), fields[name]) for name in REPLAY_FIELDS]
    credited += [
        ((crawl_id if override else crawl, field), n)
        for (crawl, field), n in replayed_of_other_crawls(counts).items()
    ]
    by_crawl = fields_by_crawl(credited)
    return {crawl: got for crawl, got in by_crawl.items() if got.get("items/replayed")}


async def replay_spool(
    args: argparse.Namespace, directory: Path, node_id: str, crawl_id: str, counts: Counter[str]
) -> int:
    """Send the spool's messages, each topic checked first as a node checks it (with
    ``KAFKA_CREATE_TOPICS``: created with ``KAFKA_TOPIC_*``, never by the broker's
    auto-creation); wait up to ``--timeout``. Returns the messages left (spooled again)."""
    project = project_settings()
    settings = settings_as_nodes_read_them(
        Settings(project), spider_class(args.spider, project)
    )  # the spider's custom_settings too
    try:
        spec = TopicSpec.from_settings(settings)
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc
    checker: TopicChecker | None = None
    count = sender_count(counts)

    async def check(topic: str) -> None:
        if checker is not None:
            await checker.ready(topic)

    overrides = {**(NO_AUTO_CREATION if spec is not None else {}), **kafka_security()}
    config = producer_config(kafka_bootstrap(args), overrides)
    sender = ItemSender(
        SenderConfig(
            producer_config=config,
            dlq_topic_template=str(settings["KAFKA_DLQ_TOPIC_TEMPLATE"]),
            spool_dir=directory,
            dead_letter_file=dead_letter_file(directory, node_id),
            node_id=node_id,
            crawl_id=crawl_id,
        ),
        count=count,
        topic_check=check if spec is not None else None,
    )
    if spec is not None:
        give_up_after = message_timeout(config)
        checker = TopicChecker(lambda: sender.producer, spec, sender.health, count, give_up_after)
    sender.replay()
    deadline = time.monotonic() + args.timeout
    while (sender.producer.pending() or sender.waiting()) and time.monotonic() < deadline:
        sender.producer.poll()
        await asyncio.sleep(0.05)
    if checker is not None:
        checker.release()  # what waits for a check now is spooled again
    return await sender.close(0)


def sender_count(counts: Counter[str]) -> Callable[[str, int], None]:
    return lambda stat, n: counts.update({stat: n})


def run_replay(args: argparse.Namespace) -> int:
    directory = spider_spool(args)
    ledger = ledger_redis(args)
    crawl_id = args.crawl or resolve_crawl_id(project_settings().get("CRAWLER_CRAWL_ID"))
    counts: Counter[str] = Counter()
    node_id = resolve_node_id("")
    left = asyncio.run(replay_spool(args, directory, node_id, crawl_id, counts))
    if ledger is not None:
        try:
            for crawl, credited in replayed_by_crawl(counts, crawl_id, bool(args.crawl)).items():
                add_replayed_to_ledger(ledger, args.spider, crawl, node_id, credited)
        finally:
            ledger.close()
    # a replayed message Kafka did not take is spooled again as kafka/respooled; those purged
    # at close (no acknowledgement within the timeout) are the ones left
    spooled_again = max(0, counts["kafka/respooled"] + counts["kafka/spooled"] - left)
    outcome = {
        "replayed": counts["kafka/replayed"],
        "spooled_again": spooled_again,
        "dead_lettered": counts["kafka/dead_lettered"] + counts["kafka/dead_lettered_file"],
        "left": left,
        "spool_errors": counts["kafka/spool_error"],
    }
    if args.json:
        print(orjson.dumps(outcome).decode())
    else:
        print(" ".join(f"{name}={value}" for name, value in outcome.items()))
    return 0 if not (left or spooled_again or counts["kafka/spool_error"]) else 1
