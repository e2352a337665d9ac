"""A ``KAFKA_BOOTSTRAP_SERVERS`` librdkafka cannot use is refused at start: it only logged a
parse error, every item went to the spool and the crawl ended "finished", exit 0 (an audit)."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from crawler.addon import ClusterAddon
from crawler.kafka.bootstrap import check_bootstrap_servers
from settings.resolve import resolve_settings


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("http://127.0.0.1:9092", "has protocol http://, not one of plaintext, sasl_plaintext"),
        ("127.0.0.1:abc", "'127.0.0.1:abc' is not host:port"),
        ("127.0.0.1:9092;127.0.0.1:9093", "'127.0.0.1:9092;127.0.0.1:9093' is not host:port"),
        ("kafka:0", "has port 0, not 1-65535"),
        ("kafka:65536", "has port 65536, not 1-65535"),
        (" , ", "names no broker"),
    ],
)
def test_a_broker_list_librdkafka_cannot_use_is_refused_naming_the_setting(
    value: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=r"^KAFKA_BOOTSTRAP_SERVERS=") as caught:
        check_bootstrap_servers(value)
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    "value",
    [
        "127.0.0.1:9092",
        "kafka",
        "kafka-1.internal:9092,kafka-2.internal:9093",
        "a:1, b:2",
        "SSL://broker:9093",
        "sasl_ssl://broker:9094,PLAINTEXT://other:9092",
        "[::1]:9092",
    ],
)
def test_broker_lists_librdkafka_takes_are_accepted(value: str) -> None:
    check_bootstrap_servers(value)


def test_a_bad_broker_list_stops_the_node_at_start() -> None:
    with pytest.raises(ValueError, match="KAFKA_BOOTSTRAP_SERVERS='http://h:9092'"):
        ClusterAddon().update_settings(
            Settings({**resolve_settings({}), "KAFKA_BOOTSTRAP_SERVERS": "http://h:9092"})
        )
