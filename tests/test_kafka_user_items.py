"""What user spiders yield reaches Kafka as standalone Scrapy's JSON feed has it, or is
dead-lettered with a log line and a stat: never lost without a word."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import orjson
import pytest
from confluent_kafka.admin import AdminClient
from scrapy import Spider, signals
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from crawler.demo.site import Site
from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.reader import ReceivedMessage, read_topic
from crawler.kafka.spool import Spool
from crawler.pipelines.shared_keys import SharedKeys
from tests.cluster import logs, running_nodes, wait_for_exit


def crawl(
    case: str,
    bootstrap: str,
    topic_template: str,
    workdir: Path,
    settings: Mapping[str, str] | None = None,
    exit_code: int = 0,
) -> tuple[str, str]:
    """Run spider ``user_items`` with ``case`` on one node, which exits ``exit_code``: (its
    topic, its log)."""
    with (
        Site(1) as site,
        running_nodes(
            1,
            workdir=workdir,
            spider="user_items",
            env={"REDIS_URL": "", "KAFKA_BOOTSTRAP_SERVERS": bootstrap},
            settings={
                "SPIDER_MODULES": "crawler.spiders,tests.spiders",
                "KAFKA_TOPIC_TEMPLATE": topic_template,
                "KAFKA_SPOOL_DIR": str(workdir / "spool"),
                **(settings or {}),
            },
            arguments={"url": site.url(0), "case": case},
        ) as nodes,
    ):
        assert wait_for_exit(nodes, timeout=120) == [exit_code], logs(workdir)
    topic = topic_template.format(spider="user_items", item_type="items")
    return topic, (workdir / "node-0.log").read_text()


def by_fragment(messages: list[ReceivedMessage]) -> dict[str, dict[str, object]]:
    items = [orjson.loads(m.value) for m in messages]
    return {item["url"].split("#")[-1]: item for item in items}


def test_values_scrapys_json_feed_writes_are_sent(
    kafka_bootstrap: str, topic_template: str, tmp_path: Path
) -> None:
    topic, log = crawl("scrapy_values", kafka_bootstrap, topic_template, tmp_path)
    items = by_fragment(read_topic(kafka_bootstrap, topic, expected=7, timeout=30))
    assert items["scrapy"]["price"] == "1.10"
    assert items["scrapy"]["tags"] == [1]
    assert items["scrapy"]["big"] == 2**70
    assert items["keys"]["by_id"] == {"1": "a"}
    assert items["nan"]["score"] is None and items["inf"]["score"] is None
    assert items["wide_keys"]["by_id"] == {"1180591620717411303424": "a", "NaN": "b"}
    assert items["named"]["at"] == [1, 2]  # a namedtuple, as a tuple: a list
    assert items["located"]["at"] == [3, 4]
    assert "'kafka/coerced/nonfinite_float': 3" in log
    assert "Error processing" not in log
    assert log.count("has NaN or Infinity at $.score") == 1
    assert "kafka/rejected" not in log


def test_items_of_a_page_that_share_a_message_key_are_said(
    kafka_bootstrap: str, topic_template: str, tmp_path: Path
) -> None:
    """Three rows of a list page, each with the page's url, had one message key: a compacted
    topic kept one row of three, with no word (standalone Scrapy has no keys)."""
    topic, log = crawl("shared_keys", kafka_bootstrap, topic_template, tmp_path)
    messages = read_topic(kafka_bootstrap, topic, expected=4, timeout=30)
    rows = [message for message in messages if message.headers["item_type"] == b"dict"]
    assert len(rows) == 3 and len({message.key for message in rows}) == 1  # the warning's case
    assert log.count("share their Kafka key") == 1, log
    assert "'kafka/key_shared/dict': 2" in log
    assert "kafka/key_shared/page" not in log


def test_an_item_whose_schema_version_is_no_integer_is_dead_lettered(
    kafka_bootstrap: str, topic_template: str, tmp_path: Path
) -> None:
    topic, log = crawl("schema_version", kafka_bootstrap, topic_template, tmp_path)
    assert list(by_fragment(read_topic(kafka_bootstrap, topic, expected=1, timeout=30))) == ["good"]
    (dead,) = read_topic(kafka_bootstrap, f"{topic}.dlq", expected=1, timeout=30)
    assert dead.headers["dlq_reason"] == b"schema_version"
    assert b"'v2'" in dead.headers["dlq_error"]
    assert orjson.loads(dead.value) == {"url": orjson.loads(dead.value)["url"]}
    assert "'kafka/rejected/schema_version': 1" in log
    # where to read it (the line named no topic: an audit)
    said = f"Item of type versioned dead-lettered (schema_version) to {topic}.dlq: "
    assert said in log and f"(`crawler dead-letters list {topic}.dlq`)" in log
    assert "Error processing" not in log


def test_what_a_pipeline_returns_that_is_no_item_is_dead_lettered(
    kafka_bootstrap: str, topic_template: str, tmp_path: Path
) -> None:
    """A user's pipeline that returned a str or None: KafkaPipeline raised TypeError ('No
    adapter found'), counted as a user pipeline's error, with no dead letter (an audit)."""
    pipelines = {"ITEM_PIPELINES": '{"tests.spiders.user_items.ReturnsWhatItSays": 100}'}
    topic, log = crawl("not_items", kafka_bootstrap, topic_template, tmp_path, pipelines)
    assert list(by_fragment(read_topic(kafka_bootstrap, topic, expected=1, timeout=30))) == ["good"]
    dead = read_topic(kafka_bootstrap, f"{topic}.dlq", expected=2, timeout=30)
    assert sorted(m.value for m in dead) == [b"'a bare string'", b"None"]
    assert {m.headers["dlq_reason"] for m in dead} == {b"unencodable"}
    assert b"a NoneType is not an item" in b" ".join(m.headers["dlq_error"] for m in dead)
    assert "'kafka/rejected/unencodable': 2" in log
    assert "Error processing" not in log and "pipeline/item_error" not in log


def test_a_user_class_named_page_is_not_checked_against_the_builtin_page_schema(
    kafka_bootstrap: str, topic_template: str, tmp_path: Path
) -> None:
    topic, log = crawl("page", kafka_bootstrap, topic_template, tmp_path)
    (sent,) = read_topic(kafka_bootstrap, topic, expected=1, timeout=30)
    assert orjson.loads(sent.value)["title"] == "mine"
    assert sent.headers["item_type"] == b"page"
    assert "kafka/rejected" not in log


@pytest.mark.parametrize(
    "slow",
    [
        {"ITEM_PIPELINES": '{"tests.spiders.user_items.SlowOpen": 100}'},
        {"EXTENSIONS": '{"tests.spiders.user_items.SlowStart": 100}'},
    ],
    ids=["open_spider", "engine_started"],
)
def test_a_slow_open_or_start_does_not_skip_the_topic_check(
    kafka_bootstrap: str, topic_template: str, tmp_path: Path, slow: dict[str, str]
) -> None:
    """The topic check (partitions, config) holds when the user's pipelines or extensions
    take longer to open or start than the Kafka poller's first tick: the engine is not
    closing while it opens and starts."""
    topic, log = crawl(
        "scrapy_values",
        kafka_bootstrap,
        topic_template,
        tmp_path,
        {"KAFKA_TOPIC_PARTITIONS": "3", **slow},
    )
    assert len(read_topic(kafka_bootstrap, topic, expected=7, timeout=30)) == 7
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert len(topics[topic].partitions) == 3, log
    assert len(topics[f"{topic}.dlq"].partitions) == 3, log


def test_a_spool_left_by_an_earlier_run_goes_to_topics_created_as_the_settings_say(
    kafka_bootstrap: str, topic_template: str, tmp_path: Path
) -> None:
    """Messages spooled for a topic that does not exist yet (Kafka was away when the earlier
    run met it) wait for its check at the next start: the topic is created with
    KAFKA_TOPIC_PARTITIONS, not by the broker's auto-creation with its defaults."""
    earlier = f"{topic_template.format(spider='user_items')}-earlier"
    spool = Spool(tmp_path / "spool" / "user_items", "old-node")
    value = orjson.dumps({"url": "http://h/earlier"})
    spool.append(OutgoingMessage(earlier, None, value, [("spider", b"user_items")], 0), "test")
    spool.seal()
    crawl(
        "scrapy_values", kafka_bootstrap, topic_template, tmp_path, {"KAFKA_TOPIC_PARTITIONS": "2"}
    )
    (replayed,) = read_topic(kafka_bootstrap, earlier, expected=1, timeout=30)
    assert replayed.value == value
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert len(topics[earlier].partitions) == 2
    assert len(topics[f"{earlier}.dlq"].partitions) == 2


def test_without_a_shared_queue_an_item_kafka_refuses_for_good_is_said_lost(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Kafka-only (no REDIS_URL): there is no queue to crawl its request again, so the log
    must not promise one; the node stops and says what was lost."""
    template = "{spider}-{item_type}"  # a name Kafka refuses only for the item's type
    _topic, log = crawl("odd_type", kafka_bootstrap, template, tmp_path, exit_code=1)
    assert "goes back to the queue" not in log
    assert "no shared queue" in log
    assert "'kafka/lost/topic_refused/TOPIC_EXCEPTION': 1" in log


def test_items_an_errback_yields_are_no_page_s_items() -> None:
    """An errback's items come with the failure as their ``response``: two of them with one
    url raised AttributeError in the shared-key check (a review)."""
    crawler = get_crawler(Spider)
    watching = SharedKeys(crawler)  # its signal receivers are weak references
    failure = Failure(ValueError("refused"))  # type: ignore[no-untyped-call]
    for _ in range(2):
        results = crawler.signals.send_catch_log(
            signal=signals.item_scraped,
            item={"url": "http://a.test/"},
            response=failure,
            spider=Spider("s"),
        )
        assert not [result for _, result in results if isinstance(result, Failure)]
    assert crawler.stats is not None
    assert crawler.stats.get_value("kafka/key_shared/dict") is None
    page = HtmlResponse("http://a.test/list", body=b"")
    for _ in range(2):
        crawler.signals.send_catch_log(
            signal=signals.item_scraped,
            item={"url": "http://a.test/"},
            response=page,
            spider=Spider("s"),
        )
    assert crawler.stats.get_value("kafka/key_shared/dict") == 1
    del watching
