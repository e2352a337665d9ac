"""The ``crawler`` command against a real broker: consume, spool, dead letters."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import orjson
import pytest
import redis
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
)

from crawler.cli.main import parse
from crawler.demo.nodes import REPO_ROOT
from crawler.extensions.ledger_layout import LedgerKeys
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.producer import ItemProducer, producer_config
from crawler.kafka.reader import iter_topic, read_topic
from crawler.kafka.sender import ItemSender, SenderConfig
from crawler.kafka.spool import JsonLinesLog, Spool, dead_letter_file, encode_record


def crawler_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args],
        cwd=REPO_ROOT,
        env=None if env is None else {**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def message(topic: str, n: int, headers: list[tuple[str, str | bytes | None]]) -> OutgoingMessage:
    """A message stamped now: the broker's time retention (7 days) deletes older ones at its
    next check, in the middle of a test."""
    value = orjson.dumps({"url": f"http://h/{n}", "title": f"标题 {n} 😀"})
    return OutgoingMessage(topic, f"k{n}".encode(), value, headers, 0)


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


def test_consume_prints_values_as_they_are(kafka_bootstrap: str) -> None:
    """Parsed and dumped again, ``2**70`` was shown as ``1.1805916207174113e+21``."""
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    values = [
        b'{"url": "http://h/", "big": 1180591620717411303424, "price": 1.10}',
        b'{"pretty": [\n  1\r\n]}',
        b"{'url': 'http://h/'}",
    ]
    produce(
        kafka_bootstrap,
        [OutgoingMessage(topic, None, value, [], 0, partition=0) for value in values],
    )
    args = ("consume", topic, "--bootstrap", kafka_bootstrap, "--from-beginning", "--count", "3")

    text = crawler_cli(*args)
    assert text.returncode == 0, text.stderr
    assert f"\n  {values[0].decode()}\n" in text.stdout
    assert f"\n  {values[2].decode()}\n" in text.stdout
    as_json = crawler_cli(*args, "--json")
    assert as_json.returncode == 0, as_json.stderr
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [row["value"] for row in rows] == [
        {"url": "http://h/", "big": 2**70, "price": 1.10},
        {"pretty": [1]},
        "{'url': 'http://h/'}",
    ]
    assert b'"big": 1180591620717411303424, "price": 1.10}' in as_json.stdout.encode()


def test_a_tail_reads_a_topic_deleted_and_made_again_from_its_start(kafka_bootstrap: str) -> None:
    """A reader past the old topic's end found the new one's offsets out of range and went to
    its end (librdkafka's default): the messages written before it noticed were never read."""
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    produce(kafka_bootstrap, [message(topic, n, []) for n in range(5)])
    tail = iter_topic(kafka_bootstrap, [topic], from_beginning=False)
    read: list[bytes] = []
    deadline = time.monotonic() + 30
    while next(tail) is None and time.monotonic() < deadline:  # assigned, at the end
        produce(kafka_bootstrap, [message(topic, 5, [])])
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=30)
    while topic in admin.list_topics(timeout=10).topics:
        time.sleep(0.1)
    again = [message(topic, n, []) for n in range(10, 12)]
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=30)
    produce(kafka_bootstrap, again)
    try:
        while len(read) < 2 and time.monotonic() < deadline + 30:
            if (received := next(tail)) is not None and received.value != message(
                topic, 5, []
            ).value:
                read.append(received.value)
    finally:
        tail.close()
    assert read == [m.value for m in again]


@pytest.mark.parametrize("command", ["list", "replay"])
def test_a_spool_folder_that_is_not_there_is_said(command: str, tmp_path: Path) -> None:
    """``spool list --dir /nonexistent`` said "is empty", ``replay`` "replayed=0", exit 0."""
    result = crawler_cli("spool", command, "pages", "--dir", str(tmp_path / "nope"))
    assert result.returncode == 1, result.stdout
    assert f"--dir {tmp_path / 'nope'}: not a folder" in result.stderr


def test_spool_list_counts_the_dead_letter_files(tmp_path: Path) -> None:
    """A node's dead-letter file is never replayed, but an operator sees it: no "is empty"."""
    letters = JsonLinesLog(dead_letter_file(tmp_path / "pages", "n1"))
    for n in range(2):
        dead = message("items.dlq", n, [("dlq_reason", b"schema")])
        letters.append(encode_record(dead, "schema; dlq: msg_size_too_large"))
    letters.close()

    listed = crawler_cli("spool", "list", "pages", "--dir", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    assert "is empty" not in listed.stdout
    assert "segment=dead-letters/n1.jsonl state=dead_letters messages=2" in listed.stdout
    as_json = crawler_cli("spool", "list", "pages", "--dir", str(tmp_path), "--json")
    (row,) = orjson.loads(as_json.stdout)
    assert (row["segment"], row["state"], row["messages"], row["reasons"]) == (
        "dead-letters/n1.jsonl",
        "dead_letters",
        2,
        {"schema; dlq: msg_size_too_large": 2},
    )


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


def test_a_spool_replay_creates_a_missing_topic_as_the_settings_say(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """A replayed message's topic is checked as a node checks it (created with
    KAFKA_TOPIC_PARTITIONS and KAFKA_TOPIC_CONFIG, its dead-letter topic too), not left to
    the broker's auto-creation and its defaults."""
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    spool = Spool(tmp_path / "pages", "old-node")
    spool.append(message(topic, 1, [("spider", b"pages")]), "_msg_timed_out")
    spool.seal()
    settings = {
        "CRAWLER_SETTING_KAFKA_TOPIC_PARTITIONS": "2",
        "CRAWLER_SETTING_KAFKA_TOPIC_CONFIG": '{"retention.ms": "999999999"}',
    }
    replayed = crawler_cli(
        "spool",
        "replay",
        "pages",
        "--dir",
        str(tmp_path),
        "--bootstrap",
        kafka_bootstrap,
        env=settings,
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert len(read_topic(kafka_bootstrap, topic, expected=1)) == 1
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert len(topics[topic].partitions) == 2
    assert len(topics[f"{topic}.dlq"].partitions) == 2
    (config,) = admin.describe_configs([ConfigResource("topic", topic)]).values()
    assert config.result(timeout=10)["retention.ms"].value == "999999999"


def test_a_spool_replay_credits_the_crawl_its_messages_are_of(
    kafka_bootstrap: str, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """`crawler spool replay pages --dir D`, as the nodes' warning and `status` say it, credited
    the replay to CRAWLER_CRAWL_ID's ledger ('default'), so the crawl the messages were of said
    "FINISHED, BUT 104 ITEMS ONLY IN A SPOOL" for good (an audit): each message credits the
    crawl its record names, a spool of several crawls too; ``--crawl`` credits them all to one."""
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    spool = Spool(tmp_path / "pages", "old-node")
    crawls = ["c7", "c7", "c8", ""]  # '': a record without the header, CRAWLER_CRAWL_ID's
    for n, crawl in enumerate(crawls):
        headers: list[tuple[str, str | bytes | None]] = [("spider", b"pages")]
        spool.append(message(topic, n, headers + ([("crawl_id", crawl)] if crawl else [])), "x")
    spool.seal()
    replay = ("spool", "replay", "pages", "--dir", str(tmp_path), "--bootstrap", kafka_bootstrap)
    replayed = crawler_cli(*replay, "--redis", redis_url)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr

    def credited(crawl: str) -> object:
        fields = ["items/replayed", "items/delivered"]
        replayed, delivered = redis_client.hmget(LedgerKeys.for_crawl("pages", crawl).total, fields)
        assert replayed == delivered  # every one delivered
        return replayed

    assert [credited(crawl) for crawl in ("c7", "c8", "default")] == [b"2", b"1", b"1"]
    spool.append(message(topic, 9, [("spider", b"pages"), ("crawl_id", b"c7")]), "x")
    spool.append(message(topic, 10, [("spider", b"pages")]), "x")
    spool.seal()
    forced = crawler_cli(*replay, "--redis", redis_url, "--crawl", "c9")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert [credited(crawl) for crawl in ("c7", "c9", "default")] == [b"2", b"2", b"1"]


def test_a_spool_replay_creates_topics_as_the_spiders_own_settings_say(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    spool = Spool(tmp_path / "partitioned_items", "old-node")
    spool.append(message(topic, 1, [("spider", b"partitioned_items")]), "_msg_timed_out")
    spool.seal()
    replayed = crawler_cli(
        "spool", "replay", "partitioned_items", "--dir", str(tmp_path),
        "--bootstrap", kafka_bootstrap,
        env={"CRAWLER_SETTING_SPIDER_MODULES": "crawler.spiders,tests.spiders"},
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert (
        len(topics[topic].partitions) == 2
    )  # custom_settings, as the spider's nodes read it (not 3)


def test_a_spool_replay_sends_the_values_bytes_as_they_were_spooled(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Integers beyond 64 bits (which orjson reads as floats) and a value's own spelling come
    back from the spool byte for byte: a replay sent ``2**70`` as ``1.1805916207174113e+21``."""
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    values = [
        b'{"url":"http://h/0","big":1180591620717411303424,"neg":-9999999999999999999}',
        b'{"url":"http://h/1","value":{"value_encoding":"json","x":1},"value_encoding":"json"}',
        b'{"url": "http://h/2", "float": 1.10, "exp": 1E+3}',
    ]
    spool = Spool(tmp_path / "pages", "old-node")
    for n, value in enumerate(values):
        spool.append(OutgoingMessage(topic, f"k{n}".encode(), value, [], 0), "_msg_timed_out")
    spool.seal()

    replayed = crawler_cli(
        "spool", "replay", "pages", "--dir", str(tmp_path), "--bootstrap", kafka_bootstrap
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert sorted(m.value for m in read_topic(kafka_bootstrap, topic, expected=3)) == sorted(values)


def dead_letter(topic: str, n: int) -> OutgoingMessage:
    return message(
        f"{topic}.dlq",
        n,
        [
            ("item_type", b"note"),  # no schema checks it now: replayed
            ("dlq_original_topic", topic.encode()),
            ("dlq_reason", b"schema"),
            ("dlq_error", b"$.status: bad"),
        ],
    )


def unreplayable(topic: str) -> list[OutgoingMessage]:
    """Dead letters that cannot be items: not JSON, still invalid, a bad schema_version."""

    def letter(value: bytes, reason: str, **headers: str) -> OutgoingMessage:
        sent = [(name, value.encode()) for name, value in headers.items()]
        dlq = [("dlq_original_topic", topic.encode()), ("dlq_reason", reason.encode())]
        return OutgoingMessage(f"{topic}.dlq", b"k", value, [*sent, *dlq], 0)

    return [
        letter(b"{'url': 'http://h/', 'price': Decimal('1.10')}", "unencodable", item_type="x"),
        letter(b'{"url": "http://h/"}', "schema", item_type="page"),
        letter(b'{"url": "http://h/"}', "schema_version", item_type="x", schema_version="v2"),
    ]


def create_topics(bootstrap: str, topics: dict[str, dict[str, str]]) -> None:
    """Create topics of 3 partitions with the topic configs given."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=3, config=config) for name, config in topics.items()]
    )
    for future in futures.values():
        future.result(timeout=30)


def dead_letters(topic: str, bootstrap: str, action: str, *args: str) -> list[str]:
    result = crawler_cli("dead-letters", action, topic, "--bootstrap", bootstrap, *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


def test_dead_letters_list_replay_drop(kafka_bootstrap: str) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, {f"{topic}.dlq": {}})
    produce(kafka_bootstrap, [dead_letter(topic, n) for n in range(3)])

    rows = [orjson.loads(line) for line in dead_letters(topic, kafka_bootstrap, "list", "--json")]
    assert sorted(row["key"] for row in rows) == ["k0", "k1", "k2"]
    assert {row["headers"]["dlq_reason"] for row in rows} == {"schema"}
    assert dead_letters(topic, kafka_bootstrap, "list")[-1] == (
        f"3 dead letters of {topic}.dlq listed, 3 unhandled (group crawler-dead-letters)"
    )
    # The dead-letter topic's own name works too (it read <topic>.dlq.dlq: 0 listed).
    assert dead_letters(f"{topic}.dlq", kafka_bootstrap, "list")[-1] == (
        f"3 dead letters of {topic}.dlq listed, 3 unhandled (group crawler-dead-letters)"
    )

    refused = crawler_cli("dead-letters", "drop", topic, "--bootstrap", kafka_bootstrap)
    assert refused.returncode == 1
    assert f"3 unhandled dead letters in {topic}.dlq" in refused.stdout
    refused = crawler_cli("dead-letters", "drop", topic, "--bootstrap", kafka_bootstrap, "--json")
    assert refused.returncode == 1
    assert orjson.loads(refused.stdout) == {
        "dlq": f"{topic}.dlq",
        "group": "crawler-dead-letters",
        "would_drop": 3,
        "dropped": 0,
    }

    (replayed,) = dead_letters(topic, kafka_bootstrap, "replay", "--json")
    assert orjson.loads(replayed) == {
        "dlq": f"{topic}.dlq",
        "group": "crawler-dead-letters",
        "replayed": 3,
        "failed": 0,
        "skipped": 0,
        "skipped_records": [],
    }
    back = read_topic(kafka_bootstrap, topic, expected=3)
    assert sorted(m.value for m in back) == sorted(dead_letter(topic, n).value for n in range(3))
    assert {tuple(m.headers.items()) for m in back} == {(("item_type", b"note"),)}
    assert dead_letters(topic, kafka_bootstrap, "list") == [
        f"0 dead letters of {topic}.dlq listed, 0 unhandled (group crawler-dead-letters)"
    ]
    assert dead_letters(topic, kafka_bootstrap, "list", "--all")[-1] == (
        f"3 dead letters of {topic}.dlq listed, 0 unhandled (group crawler-dead-letters)"
    )
    assert dead_letters(topic, kafka_bootstrap, "replay") == [
        f"replayed=0 failed=0 ({topic}.dlq, group crawler-dead-letters)"
    ]

    produce(kafka_bootstrap, [dead_letter(topic, n) for n in range(3, 5)])
    (dropped,) = dead_letters(topic, kafka_bootstrap, "drop", "--yes", "--json")
    assert orjson.loads(dropped)["dropped"] == 2
    assert dead_letters(topic, kafka_bootstrap, "list")[-1].endswith(
        "0 unhandled (group crawler-dead-letters)"
    )
    # Another group has handled nothing: handled is per group.
    other = dead_letters(topic, kafka_bootstrap, "list", "--group", "audit", "--json")
    assert len(other) == 5
    # Dropping sent nothing: the original topic still has the 3 replayed messages only.
    assert len(read_topic(kafka_bootstrap, topic, expected=3, settle=2)) == 3


def test_a_replayed_dead_letter_keeps_the_items_timestamp(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """An item topic's timestamp is the item's ``crawled_at``; its dead letter carries the
    send time (the item's may be what the broker refused), and a replay gives the item its
    own time back."""
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, {topic: {}, f"{topic}.dlq": {}})
    crawled_at = int(time.time() * 1000) - 3_600_000  # an hour ago: within retention
    item = OutgoingMessage(
        topic, b"k", b'{"url": "http://h/1"}', [("item_type", b"note")], crawled_at
    )
    outcomes: list[str] = []

    async def dead_letter_it() -> None:
        config = SenderConfig(
            producer_config(kafka_bootstrap, {}),
            dlq_topic_template="{topic}.dlq",
            spool_dir=tmp_path,
            dead_letter_file=tmp_path / "dead-letters.jsonl",
            node_id="n1",
            crawl_id="default",
        )
        sender = ItemSender(config, lambda _stat, _n: None)
        sender.dead_letter(item, "schema", "$.status: bad", outcomes.append)
        await sender.close(30)

    asyncio.run(dead_letter_it())
    assert outcomes == ["dead_lettered"]
    (dead,) = read_topic(kafka_bootstrap, f"{topic}.dlq", expected=1)
    assert dead.timestamp_ms != crawled_at
    dead_letters(topic, kafka_bootstrap, "replay")
    (back,) = read_topic(kafka_bootstrap, topic, expected=1)
    assert back.timestamp_ms == crawled_at
    assert back.headers == {"item_type": b"note"}


def test_a_dead_letter_whose_replay_fails_stays_unhandled(kafka_bootstrap: str) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    # The original topic takes no message over 64 bytes: the broker refuses the replay.
    create_topics(kafka_bootstrap, {topic: {"max.message.bytes": "64"}, f"{topic}.dlq": {}})
    produce(kafka_bootstrap, [dead_letter(topic, 1)])

    failed = crawler_cli("dead-letters", "replay", topic, "--bootstrap", kafka_bootstrap)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert failed.stdout.startswith("replayed=0 failed=1 ")
    assert dead_letters(topic, kafka_bootstrap, "list")[-1] == (
        f"1 dead letters of {topic}.dlq listed, 1 unhandled (group crawler-dead-letters)"
    )


def test_replay_sends_only_dead_letters_that_can_be_items(kafka_bootstrap: str) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, {f"{topic}.dlq": {}})
    produce(kafka_bootstrap, [dead_letter(topic, 0), *unreplayable(topic)])

    refused = crawler_cli("dead-letters", "replay", topic, "--bootstrap", kafka_bootstrap)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    lines = refused.stdout.splitlines()
    assert sum(line.startswith(f"skipped {topic}.dlq[") for line in lines) == 3
    assert any("(unencodable): its value is not JSON" in line for line in lines)
    assert any("(schema): it still fails its schema ($: must contain" in line for line in lines)
    assert any("(schema_version): its schema_version header is 'v2'" in line for line in lines)
    assert lines[-1].startswith(
        f"3 of 4 dead letters of {topic}.dlq cannot be items (listed above): nothing replayed"
    )
    assert dead_letters(topic, kafka_bootstrap, "list")[-1].endswith(
        " 4 unhandled (group crawler-dead-letters)"
    )

    (done,) = dead_letters(topic, kafka_bootstrap, "replay", "--skip-invalid", "--json")
    report = orjson.loads(done)
    assert (report["replayed"], report["failed"], report["skipped"]) == (1, 0, 3)
    assert sorted(row["reason"] for row in report["skipped_records"]) == [
        "schema",
        "schema_version",
        "unencodable",
    ]
    (back,) = read_topic(kafka_bootstrap, topic, expected=1, settle=2)
    assert back.value == dead_letter(topic, 0).value
    assert dead_letters(topic, kafka_bootstrap, "list")[-1].endswith(
        " 0 unhandled (group crawler-dead-letters)"
    )


def test_dead_letters_of_a_topic_without_any(kafka_bootstrap: str) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    assert dead_letters(topic, kafka_bootstrap, "list") == [
        f"0 dead letters of {topic}.dlq listed, 0 unhandled (group crawler-dead-letters)"
    ]
    assert dead_letters(topic, kafka_bootstrap, "drop") == [
        f"dropped=0 ({topic}.dlq, group crawler-dead-letters)"
    ]


def test_reading_a_topic_with_nothing_in_it_ends_without_waiting_for_the_timeout(
    kafka_bootstrap: str,
) -> None:
    """``read_topic`` of an empty topic, or of one never created, read until its timeout (30 s
    of each user-code test whose crawl wrote no item): nothing is there to wait for."""
    empty = f"test-{uuid.uuid4().hex[:10]}-empty"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for created in admin.create_topics([NewTopic(empty, 2, 1)]).values():
        created.result(timeout=30)
    for topic in (empty, f"test-{uuid.uuid4().hex[:10]}-never-created"):
        began = time.monotonic()
        assert read_topic(kafka_bootstrap, topic, timeout=60) == []
        assert time.monotonic() - began < 30, topic  # well before the timeout


@pytest.mark.parametrize(
    "argv",
    [
        ["consume", "t", "--count", "-1"],
        ["consume", "t", "--idle-exit", "-1"],
        ["consume", "t", "--timeout", "0"],
        ["status", "pages", "--kafka-timeout", "0"],
        ["dead-letters", "list", "t", "--timeout", "0"],
        ["queue", "pages", "--top", "0"],
        ["queue", "pages", "--scan", "-5"],
        ["top", "--interval", "0"],
        ["top", "--interval", "nan"],
    ],
    ids=" ".join,
)
def test_numbers_out_of_range_are_usage_errors(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``consume --count -1`` stopped after one message, ``--idle-exit -1`` at the first quiet
    poll, ``--timeout 0`` blamed a Kafka that was up (an audit): refused as usage errors."""
    with pytest.raises(SystemExit) as exited:
        parse(argv)
    assert exited.value.code == 2
    said = capsys.readouterr().err
    assert "must be" in said or "not a finite number" in said, said
