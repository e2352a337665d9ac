"""Every Kafka client reaches a secured cluster, and the Kafka commands say what went wrong.

``KAFKA_PRODUCER_CONFIG``'s ``security.*``, ``sasl.*`` and ``ssl.*`` keys are how a node reaches
a cluster with TLS or SASL (docs/kafka.md). Each client the project makes is built here with
librdkafka's classes replaced by recorders, so what each one was given can be read back
without a secured broker.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar
from unittest.mock import MagicMock

import orjson
import pytest
from scrapy.settings import Settings

from crawler.cli import config as cli_config
from crawler.cli import spool as spool_cli
from crawler.cli.main import main
from crawler.frontier import backlog, backlog_topic, seen_feed
from crawler.frontier.client import FrontierClient
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.purge import PurgeSettings
from crawler.frontier.settings import FrontierSettings
from crawler.kafka import dead_letters, producer, reader
from crawler.kafka.producer import message_timeout, producer_config
from crawler.pipelines.kafka_settings import KafkaPipelineSettings
from crawler.redis_connection import async_client
from settings.resolve import resolve_settings

SECURITY = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "ssl.ca.location": "/ca"}
PRODUCER_CONFIG = {**SECURITY, "linger.ms": 20, "compression.type": "zstd"}


def recorder(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> MagicMock:
    """``module.name`` (a librdkafka class) replaced by a mock that records its configs."""
    fake = MagicMock(name=f"{module.__name__}.{name}")
    monkeypatch.setattr(module, name, fake)
    return fake


def configs(fake: MagicMock) -> list[dict[str, Any]]:
    return [dict(call.args[0]) for call in fake.call_args_list]


def node_settings() -> FrontierSettings:
    given = {
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "KAFKA_BOOTSTRAP_SERVERS": "kafka.example:9093",
        "KAFKA_PRODUCER_CONFIG": orjson.dumps(PRODUCER_CONFIG).decode(),  # as -s gives it
        "FRONTIER_QUEUE_MAX": 1000,
        "FRONTIER_SEEN_FEED": True,
    }
    return FrontierSettings.from_settings(Settings({**resolve_settings({}), **given}))


def test_every_client_of_a_node_and_of_the_cli_takes_the_security_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    producers = recorder(monkeypatch, producer, "Producer")
    consumers = [
        recorder(monkeypatch, module, "Consumer") for module in (backlog, seen_feed, reader)
    ] + [recorder(monkeypatch, dead_letters, "Consumer")]
    admins = recorder(monkeypatch, backlog_topic, "AdminClient")
    settings = node_settings()
    assert settings.backlog.security == settings.seen_feed.security == SECURITY
    part = FrontierClient(async_client("redis://127.0.0.1:1/0"), FrontierKeys.for_spider("s"), "n")
    backlog.Backlog([part], settings.backlog, 60_000)
    seen_feed.SeenFeed(settings.seen_feed, "n", MagicMock(), found_too=True)
    with contextlib.suppress(Exception):  # the recorder's messages are not messages
        next(reader.iter_topic("kafka.example:9093", ["t"], security=SECURITY))
    reader.unanswered("kafka.example:9093", security=SECURITY)
    dead_letters.DeadLetterQueues("kafka.example:9093", "g", security=SECURITY)
    backlog_topic.purge_backlog("kafka.example:9093", "t", security=SECURITY)
    made = configs(producers) + [c for fake in consumers for c in configs(fake)] + configs(admins)
    assert len(made) == 2 + 5 + 1  # backlog, feed; backlog, feed, iter_topic, probe, DLQ; purge
    for config in made:
        assert config.items() >= SECURITY.items(), config
        assert config["bootstrap.servers"] == "kafka.example:9093"
        assert "logger" in config  # librdkafka's lines go through Python logging
    assert configs(producers)[0]["linger.ms"] == 5  # the backlog's own, over the items'


def test_the_cli_and_a_purge_read_the_security_keys_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = orjson.dumps(PRODUCER_CONFIG).decode()
    monkeypatch.setenv("CRAWLER_SETTING_KAFKA_PRODUCER_CONFIG", text)
    assert cli_config.kafka_security() == SECURITY
    purge = PurgeSettings.from_settings({**cli_config.project_settings()})
    assert purge.security == SECURITY
    monkeypatch.setenv("CRAWLER_SETTING_KAFKA_PRODUCER_CONFIG", "[1]")
    with pytest.raises(SystemExit, match="KAFKA_PRODUCER_CONFIG='\\[1\\]' must be a JSON object"):
        cli_config.kafka_security()


class FakeSender:
    """``ItemSender`` for ``crawler spool replay``: records its config, reports ``events``."""

    made: ClassVar[list[Any]] = []
    events: ClassVar[dict[str, int]] = {}

    def __init__(self, config: Any, count: Callable[[str, int], None], **_: Any) -> None:
        self.made.append(config)
        self.count = count
        self.producer = MagicMock(**{"pending.return_value": 0})
        self.health = MagicMock()

    def waiting(self) -> int:
        return 0

    def replay(self) -> None:
        for stat, n in self.events.items():
            self.count(stat, n)

    async def close(self, timeout: float) -> int:
        return 0


@pytest.mark.parametrize(
    ("events", "code"),
    [
        ({"kafka/replayed": 3}, 0),
        ({"kafka/replayed": 2, "kafka/spool_error": 1}, 1),
        # a replayed message the broker did not take goes back to the spool as kafka/respooled
        # (not kafka/spooled): it was reported as spooled_again=0, and the command exited 0
        ({"kafka/replayed": 2, "kafka/respooled": 1}, 1),
    ],
)
def test_spool_replay_uses_the_dlq_template_and_fails_when_a_message_stays_spooled(
    events: dict[str, int],
    code: int,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CRAWLER_SETTING_KAFKA_DLQ_TOPIC_TEMPLATE", "dead.{topic}")
    monkeypatch.setenv("CRAWLER_SETTING_KAFKA_PRODUCER_CONFIG", orjson.dumps(SECURITY).decode())
    monkeypatch.setattr(spool_cli, "ItemSender", FakeSender)
    FakeSender.made, FakeSender.events = [], events
    args = argparse.Namespace(
        spider="pages",
        dir=str(tmp_path),
        bootstrap="k:9092",
        timeout=1.0,
        json=True,
        redis=None,  # and no REDIS_URL: no ledger to count the replay in
        crawl=None,
    )
    assert spool_cli.run_replay(args) == code
    (config,) = FakeSender.made
    assert config.dlq_topic_template == "dead.{topic}"
    assert config.producer_config.items() >= SECURITY.items()
    outcome = orjson.loads(capsys.readouterr().out)
    assert outcome["spool_errors"] == events.get("kafka/spool_error", 0)
    assert outcome["spooled_again"] == events.get("kafka/respooled", 0)


def test_consume_says_when_kafka_does_not_answer() -> None:
    with pytest.raises(SystemExit, match=r"Kafka at 127\.0\.0\.1:1 does not answer"):
        main(["consume", "t", "--bootstrap", "127.0.0.1:1", "--timeout", "1"])


def test_spool_refuses_a_spider_the_project_does_not_have(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no spider 'nosuchspider' in this project"):
        main(["spool", "list", "nosuchspider", "--dir", str(tmp_path)])


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        ({"compression.type": "bogus"}, 'Invalid value "bogus"'),
        ({"foo.bar": "1"}, "foo.bar"),
        ({"acks": "1"}, "acks"),  # idempotence is on by default: librdkafka wants all
    ],
)
def test_a_producer_config_librdkafka_refuses_fails_at_start_naming_the_setting(
    overrides: dict[str, str], said: str
) -> None:
    settings = Settings(resolve_settings({}))
    settings.setdict(
        {
            "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
            "KAFKA_PRODUCER_CONFIG": orjson.dumps(overrides).decode(),
        },
        priority="cmdline",
    )
    crawler = MagicMock(settings=settings)
    with pytest.raises(ValueError, match=rf"KAFKA_PRODUCER_CONFIG=.*librdkafka.*{said}"):
        KafkaPipelineSettings.from_crawler(crawler)


def test_bootstrap_servers_in_the_producer_config_is_refused_naming_the_setting() -> None:
    """The node logs, the CLI and every other client use KAFKA_BOOTSTRAP_SERVERS: a second
    address for the producer alone would send items to a broker nothing else names."""
    settings = Settings(resolve_settings({}))
    settings.setdict(
        {
            "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
            "KAFKA_PRODUCER_CONFIG": '{"bootstrap.servers": "127.0.0.1:1"}',
        },
        priority="cmdline",
    )
    with pytest.raises(
        ValueError, match=r"KAFKA_PRODUCER_CONFIG.*bootstrap.servers.*KAFKA_BOOTSTRAP_SERVERS"
    ):
        KafkaPipelineSettings.from_crawler(MagicMock(settings=settings))


@pytest.mark.parametrize("acks", ["0", 0])
def test_a_producer_that_waits_for_no_acknowledgement_is_refused_naming_the_setting(
    acks: object,
) -> None:
    """With acks=0 (idempotence off) no delivery report gives an offset: the broker answers
    nothing, so nothing proves an item reached Kafka (each such report would be sent again
    for ever: kafka/unproven_ack)."""
    settings = Settings(resolve_settings({}))
    overrides = {"enable.idempotence": False, "acks": acks}
    settings.setdict(
        {
            "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
            "KAFKA_PRODUCER_CONFIG": orjson.dumps(overrides).decode(),
        },
        priority="cmdline",
    )
    with pytest.raises(ValueError, match=r"KAFKA_PRODUCER_CONFIG.*acks=0.*acks=all"):
        KafkaPipelineSettings.from_crawler(MagicMock(settings=settings))


def test_the_time_librdkafka_holds_a_message_is_read_as_it_applies_it() -> None:
    """Messages waiting for a topic's check go to the spool once Kafka has been away that long:
    message.timeout.ms or its alias delivery.timeout.ms, whichever comes later, as librdkafka
    applies them."""
    assert message_timeout(producer_config("h:1", {})) == 30.0
    assert message_timeout(producer_config("h:1", {"delivery.timeout.ms": 5000})) == 5.0
    assert message_timeout(producer_config("h:1", {"message.timeout.ms": "2000"})) == 2.0
    assert message_timeout({}) == 30.0
