"""``crawler dead-letters list|replay <topic>``: the dead-letter topic of a topic."""

from __future__ import annotations

import argparse
import time

from crawler.cli.config import add_kafka_option, kafka_bootstrap
from crawler.cli.consume import render
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer, producer_config
from crawler.kafka.reader import ReceivedMessage, iter_topic

DLQ_HEADERS = ("dlq_original_topic", "dlq_reason", "dlq_error")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("dead-letters", help="list or replay a topic's dead letters")
    actions = parser.add_subparsers(dest="action", required=True)
    for name, run, text in (
        ("list", run_list, "print the dead letters of <topic>"),
        ("replay", run_replay, "send them to their original topic again (after a fix)"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("topic", help="the topic whose dead letters (<topic>.dlq) to use")
        action.add_argument("--dlq-template", default="{topic}.dlq")
        action.add_argument("--idle-exit", type=float, default=3.0)
        add_kafka_option(action)
        action.set_defaults(run=run)
    actions.choices["list"].add_argument("--json", action="store_true")


def read_all(args: argparse.Namespace) -> list[ReceivedMessage]:
    dlq = args.dlq_template.format(topic=args.topic)
    found: list[ReceivedMessage] = []
    quiet_since = time.monotonic()
    for message in iter_topic(kafka_bootstrap(args), [dlq]):
        if message is not None:
            found.append(message)
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= args.idle_exit:
            break
    return found


def run_list(args: argparse.Namespace) -> int:
    for message in read_all(args):
        print(render(message, args.json))
    return 0


def run_replay(args: argparse.Namespace) -> int:
    producer = ItemProducer(producer_config(kafka_bootstrap(args), {}))
    failures: list[str] = []
    sent = 0
    for message in read_all(args):
        original = message.headers.get("dlq_original_topic", args.topic.encode()).decode()
        outgoing = OutgoingMessage(
            topic=original,
            key=message.key,
            value=message.value,
            headers=[(n, v) for n, v in message.headers.items() if n not in DLQ_HEADERS],
            timestamp_ms=message.timestamp_ms,
        )

        def report(error: object, _: object) -> None:
            if error is not None:
                failures.append(str(error))

        while not producer.send(outgoing, report):
            producer.poll()
            time.sleep(0.05)
        sent += 1
    deadline = time.monotonic() + 60
    while producer.pending() and time.monotonic() < deadline:
        producer.poll()
        time.sleep(0.05)
    print(f"replayed={sent - len(failures)} failed={len(failures) + producer.pending()}")
    return 0 if not failures and not producer.pending() else 1
