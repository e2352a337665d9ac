"""``crawler dead-letters list|replay|drop <topic>``: the dead letters of a topic.

Which dead letters are handled is kept by a Kafka consumer group
(``crawler.kafka.dead_letters``): ``replay`` and ``drop`` commit it, ``list``
shows what they have not handled yet (``--all``: everything the topic keeps).

``replay`` sends only dead letters that can be items (``crawler.kafka.replayable``): when
some cannot, it lists them with the reason and sends nothing (exit 1), unless
``--skip-invalid``: then it sends the others and marks those handled without sending them.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import orjson
from confluent_kafka import KafkaError, Message

from crawler.cli import numbers
from crawler.cli.config import add_kafka_option, kafka_bootstrap, kafka_security, project_settings
from crawler.cli.consume import render
from crawler.kafka.dead_letter_writer import DLQ_HEADERS, ORIGINAL_TOPIC_HEADER, REASON_HEADER
from crawler.kafka.dead_letters import (
    DeadLetterError,
    DeadLetterQueues,
    DeadLetterSettings,
    Span,
    original_timestamp,
)
from crawler.kafka.errors import unproven
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer, producer_config
from crawler.kafka.replayable import replay_refusal
from crawler.kafka.schemas import SchemaRegistry
from crawler.settings_values import get_typed_list
from crawler.settings_values import text as text_value

Action = Callable[[argparse.Namespace, DeadLetterQueues, str], int]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "dead-letters", help="list, replay or drop a topic's unhandled dead letters"
    )
    actions = parser.add_subparsers(dest="action", required=True)
    for name, action, text in (
        ("list", run_list, "print the unhandled dead letters of <topic>"),
        ("replay", run_replay, "send them to their original topic again (after a fix)"),
        ("drop", run_drop, "mark them handled without sending them"),
    ):
        sub = actions.add_parser(name, help=text)
        sub.add_argument(
            "topic", help="the item topic whose dead letters (<topic>.dlq) to use, or that DLQ"
        )
        add_dead_letter_options(sub)
        sub.add_argument(
            "--timeout", type=numbers.seconds, default=30.0, help="seconds Kafka may take to answer"
        )
        sub.add_argument("--json", action="store_true", help="JSON for scripts")
        add_kafka_option(sub)
        sub.set_defaults(run=_command(action))
    actions.choices["list"].add_argument(
        "--all", action="store_true", help="also the handled ones the topic still keeps"
    )
    actions.choices["replay"].add_argument(
        "--skip-invalid",
        action="store_true",
        help="replay the others when some cannot be items, marking those handled unsent",
    )
    actions.choices["drop"].add_argument(
        "--yes", action="store_true", help="really drop them (else only say how many)"
    )


def add_dead_letter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dlq-template", default=None, help="dead-letter topic (default: KAFKA_DLQ_TOPIC_TEMPLATE)"
    )
    parser.add_argument(
        "--group", default=None, help="group that marks them handled (default: KAFKA_DLQ_GROUP)"
    )


def dead_letter_settings(args: argparse.Namespace) -> DeadLetterSettings:
    settings = project_settings()
    try:
        return DeadLetterSettings(
            group=args.group or str(settings["KAFKA_DLQ_GROUP"]),
            dlq_template=args.dlq_template or str(settings["KAFKA_DLQ_TOPIC_TEMPLATE"]),
        )
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc


def _command(action: Action) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        settings = dead_letter_settings(args)
        bootstrap = kafka_bootstrap(args)
        try:
            # The item topic or its dead-letter topic itself: both name the same DLQ.
            args.topic, dlq = settings.source_and_dlq(args.topic)
            with DeadLetterQueues(
                bootstrap, settings.group, args.timeout, security=kafka_security()
            ) as queues:
                return action(args, queues, dlq)
        except DeadLetterError as exc:
            raise SystemExit(f"crawler dead-letters {args.action}: {exc}") from exc

    return run


def run_list(args: argparse.Namespace, queues: DeadLetterQueues, dlq: str) -> int:
    spans = queues.spans(dlq, everything=args.all)
    shown = 0
    for message in queues.read(dlq, spans, args.timeout):
        print(render(message, args.json), flush=True)
        shown += 1
    if not args.json:
        unhandled = queues.unhandled(dlq) if args.all else shown
        print(f"{shown} dead letters of {dlq} listed, {unhandled} unhandled (group {queues.group})")
    return 0


def _commit_offsets(spans: list[Span], failed: dict[int, int]) -> dict[int, int]:
    """Per partition: past every dead letter, or up to the first one that failed."""
    return {span.partition: failed.get(span.partition, span.end) for span in spans}


def _schemas() -> SchemaRegistry:
    from scrapy.settings import BaseSettings  # noqa: PLC0415 - Scrapy only for replay

    settings = BaseSettings(project_settings())
    try:
        return SchemaRegistry(get_typed_list(settings, "ITEM_SCHEMA_DIRS", text_value, "folders"))
    except (ValueError, OSError) as exc:
        raise SystemExit(f"crawler dead-letters replay: {exc}") from exc


def _unreplayable(
    queues: DeadLetterQueues, dlq: str, spans: list[Span], timeout: float
) -> list[dict[str, Any]]:
    """The dead letters of ``spans`` that cannot be items, and why."""
    schemas = _schemas()
    skipped = []
    for message in queues.read(dlq, spans, timeout):
        why = replay_refusal(message, schemas)
        if why is not None:
            reason = message.headers.get(REASON_HEADER, b"").decode("utf-8", "replace")
            where = {"partition": message.partition, "offset": message.offset}
            skipped.append({**where, "reason": reason, "why": why})
    return skipped


def _print_skipped(args: argparse.Namespace, dlq: str, skipped: list[dict[str, Any]]) -> None:
    if not args.json:
        for row in skipped:
            print(
                f"skipped {dlq}[{row['partition']}]@{row['offset']} ({row['reason']}): {row['why']}"
            )


def run_replay(args: argparse.Namespace, queues: DeadLetterQueues, dlq: str) -> int:
    spans = queues.spans(dlq)
    if not any(span.count for span in spans):
        return _report(args, queues, dlq, {"replayed": 0, "failed": 0, "skipped": 0}, [])
    skipped = _unreplayable(queues, dlq, spans, args.timeout)
    _print_skipped(args, dlq, skipped)
    if skipped and not args.skip_invalid:
        total = sum(span.count for span in spans)
        if args.json:
            refusal = {"dlq": dlq, "group": queues.group, "replayed": 0, "failed": 0}
            print(
                orjson.dumps(
                    {**refusal, "would_skip": len(skipped), "skipped_records": skipped}
                ).decode()
            )
        else:
            print(
                f"{len(skipped)} of {total} dead letters of {dlq} cannot be items (listed above): "
                "nothing replayed. Fix what is said and replay again, or replay the others with "
                "--skip-invalid (marks these handled without sending them)"
            )
        return 1
    skip = {(row["partition"], row["offset"]) for row in skipped}
    producer = ItemProducer(producer_config(queues.bootstrap_servers, queues.security))
    outstanding: set[tuple[int, int]] = set()  # (partition, offset) sent, not yet reported
    failed: list[tuple[int, int]] = []
    sent = 0
    for message in queues.read(dlq, spans, args.timeout):
        if (message.partition, message.offset) in skip:
            continue
        original = message.headers.get(ORIGINAL_TOPIC_HEADER, args.topic.encode()).decode()
        outgoing = OutgoingMessage(
            topic=original,
            key=message.key,
            value=message.value,
            headers=[(n, v) for n, v in message.headers.items() if n not in DLQ_HEADERS],
            timestamp_ms=original_timestamp(message.headers, message.timestamp_ms),
        )
        where = (message.partition, message.offset)

        def report(error: KafkaError | None, sent: Message, where: tuple[int, int] = where) -> None:
            outstanding.discard(where)
            if error is not None or unproven(error, sent):  # not handled: read again next time
                failed.append(where)

        outstanding.add(where)
        while not producer.send(outgoing, report):
            producer.poll()
            time.sleep(0.05)
        sent += 1
    deadline = time.monotonic() + args.timeout
    while producer.pending() and time.monotonic() < deadline:
        producer.poll()
        time.sleep(0.05)
    failed += outstanding  # not acknowledged in time: not handled either
    first_failed: dict[int, int] = {}
    for partition, offset in failed:
        first_failed[partition] = min(offset, first_failed.get(partition, offset))
    queues.commit(dlq, _commit_offsets(spans, first_failed))
    counts = {"replayed": sent - len(failed), "failed": len(failed), "skipped": len(skipped)}
    return _report(args, queues, dlq, counts, skipped)


def run_drop(args: argparse.Namespace, queues: DeadLetterQueues, dlq: str) -> int:
    spans = queues.spans(dlq)
    count = sum(span.count for span in spans)
    if count and not args.yes:
        if args.json:
            refusal = {"dlq": dlq, "group": queues.group, "would_drop": count, "dropped": 0}
            print(orjson.dumps(refusal).decode())
        else:
            print(
                f"{count} unhandled dead letters in {dlq} (group {queues.group}): drop with --yes"
            )
        return 1
    queues.commit(dlq, _commit_offsets(spans, {}))
    return _report(args, queues, dlq, {"dropped": count})


def _report(
    args: argparse.Namespace,
    queues: DeadLetterQueues,
    dlq: str,
    counts: dict[str, int],
    skipped: list[dict[str, Any]] | None = None,
) -> int:
    """``skipped``: a replay's (listed in JSON; in text, only counted when there are some)."""
    if args.json:
        listed = {} if skipped is None else {"skipped_records": skipped}
        print(orjson.dumps({"dlq": dlq, "group": queues.group, **counts, **listed}).decode())
    else:
        shown = {name: value for name, value in counts.items() if value or name != "skipped"}
        numbers = " ".join(f"{name}={value}" for name, value in shown.items())
        print(f"{numbers} ({dlq}, group {queues.group})")
    return 1 if counts.get("failed") else 0
