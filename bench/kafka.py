"""Kafka benchmark: our delivery path against a raw confluent-kafka loop, in the same run.

    .venv/bin/python -m bench.kafka [--items 50000] [--pages 1000]

1. Items/s into the real local broker for ~1 KB items, until every one is
   acknowledged. Raw: a bare confluent-kafka loop doing the least any item
   producer does, ``orjson.dumps(item)`` + ``produce`` (same key, headers,
   timestamp and producer options) + ``poll(0)``. Ours: from the same item
   dicts, ``encode_item`` (JSON, fingerprint key, headers) + JSON Schema
   validation + ``ItemSender.send`` with delivery accounting. Three rounds,
   alternating; medians. Target: >= 0.8x.
2. A 1-node crawl of a local site (Scrapy's own scheduler) with the Kafka
   pipeline on and off (off = no pipeline, no feed). Target: >= 0.95x.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Producer

from bench.frontier import Variant, crawl
from crawler.demo.run import services
from crawler.demo.site import Site
from crawler.kafka.messages import OutgoingMessage, encode_item
from crawler.kafka.producer import ItemProducer, producer_config
from crawler.kafka.schemas import BUILTIN, SchemaRegistry
from crawler.kafka.sender import ItemSender, SenderConfig


def items(count: int) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    return [
        {
            "url": f"http://bench.local/p/{n}.html",
            "status": 200,
            "title": f"第{n}页 " + "内容 content " * 70,
            "depth": 3,
            "crawled_at": now,
        }
        for n in range(count)
    ]


def encoded(fields: list[dict[str, Any]], topic: str) -> list[OutgoingMessage]:
    return [
        encode_item(d, topic=topic, item_type="page", schema_version=1, spider="b", node_id="n")
        for d in fields
    ]


def raw_loop(
    bootstrap: str, fields: list[dict[str, Any]], messages: list[OutgoingMessage]
) -> float:
    producer = Producer(producer_config(bootstrap, {}))
    delivered = [0]

    def report(error: object, _: object) -> None:
        delivered[0] += error is None

    started = time.perf_counter()
    for document, m in zip(fields, messages, strict=True):
        value = orjson.dumps(document)
        while True:
            try:
                producer.produce(
                    m.topic,
                    value=value,
                    key=m.key,
                    headers=m.headers,
                    timestamp=m.timestamp_ms,
                    on_delivery=report,
                )
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if delivered[0] != len(messages):
        raise RuntimeError(f"raw loop: {delivered[0]} of {len(messages)} delivered")
    return len(messages) / elapsed


async def our_path(bootstrap: str, topic: str, fields: list[dict[str, Any]], spool: Path) -> float:
    counts: Counter[str] = Counter()
    sender = ItemSender(
        SenderConfig(
            producer_config=producer_config(bootstrap, {}),
            dlq_topic_template="{topic}.dlq",
            spool_dir=spool,
            dead_letter_file=spool / "dead-letters.jsonl",
            node_id="bench",
            crawl_id="bench",
        ),
        count=lambda stat, n: counts.update({stat: n}),
    )
    schemas = SchemaRegistry([BUILTIN])
    started = time.perf_counter()
    for document in fields:
        message = encode_item(
            document, topic=topic, item_type="page", schema_version=1, spider="b", node_id="n"
        )
        if (error := schemas.error("page", orjson.loads(message.value))) is not None:
            raise RuntimeError(f"bench item is invalid: {error}")
        await sender.send(message)
    left = await sender.producer.drain(120, interval=0.005)
    elapsed = time.perf_counter() - started
    if left or counts["kafka/delivered"] != len(fields):
        raise RuntimeError(f"our path: {counts['kafka/delivered']} of {len(fields)} delivered")
    return len(fields) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.kafka", description=__doc__)
    parser.add_argument("--items", type=int, default=30_000)
    parser.add_argument("--pages", type=int, default=1000)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    with services(workdir) as (redis_url, bootstrap):
        fields = items(args.items)
        messages = encoded(fields, f"bench-raw-{uuid.uuid4().hex[:6]}")
        size = sum(len(m.value) for m in messages) / len(messages)
        ItemProducer(producer_config(bootstrap, {}))  # warm up librdkafka
        raws, ourss = [], []
        for _ in range(3):
            raws.append(raw_loop(bootstrap, fields, messages))
            topic = f"bench-ours-{uuid.uuid4().hex[:6]}"
            ourss.append(asyncio.run(our_path(bootstrap, topic, fields, workdir / "spool")))
        raw, ours = statistics.median(raws), statistics.median(ourss)
        print(f"# Items into the local broker: {args.items} items of {size:.0f} bytes, all acked")
        print("| path | items/s | ratio |")
        print("|---|---|---|")
        print(f"| raw confluent-kafka produce loop | {raw:,.0f} | 1.00x |")
        print(f"| ours: encode + schema + ItemSender | {ours:,.0f} | {ours / raw:.2f}x |")
        print()
        print(f"# Crawl: 1 node, {args.pages}-page local site, Scrapy's own scheduler")
        print("| Kafka pipeline | pages/s | ratio |")
        print("|---|---|---|")
        one_node = partial(
            crawl, nodes=1, redis_url=redis_url, bootstrap=bootstrap, workdir=workdir
        )
        with Site(args.pages) as site:
            rates = {}
            for name, kafka in (("off", False), ("on", True)):
                variant = Variant(f"kafka {name}", "pages", {}, uses_redis=False, uses_kafka=kafka)
                rates[name] = one_node(variant, site).rate
                print(f"| {name} | {rates[name]:.1f} | {rates[name] / rates['off']:.2f}x |")


if __name__ == "__main__":
    main()
