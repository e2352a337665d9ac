"""``crawler consume <topic>``: tail a topic with readable output (or ``--json``)."""

from __future__ import annotations

import argparse
import time

import orjson

from crawler.cli import numbers
from crawler.cli.config import add_kafka_option, kafka_bootstrap, kafka_security
from crawler.kafka.reader import ReceivedMessage, iter_topic, unanswered


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("consume", help="print the messages of a topic")
    parser.add_argument("topic")
    add_kafka_option(parser)
    parser.add_argument("--from-beginning", action="store_true", help="not only new messages")
    parser.add_argument(
        "--count", type=numbers.count_or_all, default=0, help="stop after N messages (0 = never)"
    )
    parser.add_argument(
        "--idle-exit",
        type=numbers.seconds_or_never,
        default=0.0,
        help="stop after N quiet seconds (0 = never)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--timeout",
        type=numbers.seconds,
        default=10.0,
        help="seconds Kafka has to answer first (10)",
    )
    parser.set_defaults(run=run)


def render(message: ReceivedMessage, as_json: bool) -> str:
    """The message's value as it is (never parsed and dumped again: orjson reads integers
    beyond 64 bits as floats); with ``as_json``, embedded as JSON when it is JSON (on one
    line: its line breaks, only ever whitespace between tokens, become spaces), else as text."""
    text = message.value.decode("utf-8", "replace")
    headers = {name: v.decode("utf-8", "replace") for name, v in message.headers.items()}
    key = message.key.decode("utf-8", "replace") if message.key is not None else None
    if as_json:
        return orjson.dumps(
            {
                "topic": message.topic,
                "partition": message.partition,
                "offset": message.offset,
                "timestamp_ms": message.timestamp_ms,
                "key": key,
                "headers": headers,
                "value": _json_value(message.value, text),
            }
        ).decode()
    tags = " ".join(f"{name}={v}" for name, v in headers.items())
    return f"{message.topic}[{message.partition}]@{message.offset} key={key} {tags}\n  {text}"


def _json_value(value: bytes, text: str) -> orjson.Fragment | str:
    """``value`` embedded as it is when it is JSON, else its ``text``."""
    try:
        orjson.loads(value)
    except orjson.JSONDecodeError:
        return text
    return orjson.Fragment(value.replace(b"\r", b" ").replace(b"\n", b" "))


def run(args: argparse.Namespace) -> int:
    bootstrap, security = kafka_bootstrap(args), kafka_security()
    why = unanswered(bootstrap, timeout=args.timeout, security=security)
    if why is not None:
        raise SystemExit(f"crawler consume: Kafka at {bootstrap} does not answer: {why}")
    seen = 0
    quiet_since = time.monotonic()
    for message in iter_topic(
        bootstrap, [args.topic], from_beginning=args.from_beginning, security=security
    ):
        if message is None:
            if args.idle_exit and time.monotonic() - quiet_since >= args.idle_exit:
                break
            continue
        quiet_since = time.monotonic()
        print(render(message, args.json), flush=True)
        seen += 1
        if args.count and seen >= args.count:
            break
    return 0
