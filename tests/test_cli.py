"""The ``crawler`` command against a real broker: consume, spool, dead letters."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import orjson

from crawler.demo.nodes import REPO_ROOT
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer, producer_config
from crawler.kafka.reader import read_topic
from crawler.kafka.spool import Spool


def crawler_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def message(topic: str, n: int, headers: list[tuple[str, str | bytes | None]]) -> OutgoingMessage:
    value = orjson.dumps({"url": f"http://h/{n}", "title": f"标题 {n} 😀"})
    return OutgoingMessage(topic, f"k{n}".encode(), value, headers, 1_700_000_000_000 + n)


def produce(bootstrap: str, messages: list[OutgoingMessage]) -> None:
    producer = ItemProducer(producer_config(bootstrap, {}))
    for outgoing in messages:
        assert producer.send(outgoing, lambda error, _msg: None)
    assert asyncio.run(producer.drain(30)) == 0


def test_consume_prints_json_lines(kafka_bootstrap: str) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    produce(kafka_bootstrap, [message(topic, n, [("item_type", b"page")]) for n in range(3)])
    result = crawler_cli(
        "consume",
        topic,
        "--bootstrap",
        kafka_bootstrap,
        "--from-beginning",
        "--count",
        "3",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    rows = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert [row["value"]["title"] for row in rows] == ["标题 0 😀", "标题 1 😀", "标题 2 😀"]
    assert rows[0]["headers"] == {"item_type": "page"}
    assert rows[0]["key"] == "k0"


def test_spool_list_and_replay(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    spool = Spool(tmp_path / "pages", "old-node")
    for n in range(5):
        spool.append(message(topic, n, [("spider", b"pages")]), "_msg_timed_out")
    spool.seal()

    listed = crawler_cli("spool", "list", "pages", "--dir", str(tmp_path), "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = orjson.loads(listed.stdout)
    assert (row["messages"], row["reasons"], row["topics"]) == (
        5,
        {"_msg_timed_out": 5},
        {topic: 5},
    )

    replayed = crawler_cli(
        "spool", "replay", "pages", "--dir", str(tmp_path), "--bootstrap", kafka_bootstrap
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "replayed=5" in replayed.stdout
    assert list((tmp_path / "pages").glob("*.jsonl")) == []
    values = sorted(m.value for m in read_topic(kafka_bootstrap, topic, expected=5))
    assert values == sorted(message(topic, n, []).value for n in range(5))


def test_dead_letters_list_and_replay(kafka_bootstrap: str) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    dead = message(
        f"{topic}.dlq",
        7,
        [
            ("item_type", b"page"),
            ("dlq_original_topic", topic.encode()),
            ("dlq_reason", b"schema"),
            ("dlq_error", b"$.status: bad"),
        ],
    )
    produce(kafka_bootstrap, [dead])
    listed = crawler_cli("dead-letters", "list", topic, "--bootstrap", kafka_bootstrap, "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = [orjson.loads(line) for line in listed.stdout.splitlines()]
    assert row["headers"]["dlq_reason"] == "schema"

    replayed = crawler_cli("dead-letters", "replay", topic, "--bootstrap", kafka_bootstrap)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    (back,) = read_topic(kafka_bootstrap, topic, expected=1)
    assert back.value == dead.value
    assert back.headers == {"item_type": b"page"}
