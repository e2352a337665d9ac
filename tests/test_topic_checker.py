"""``TopicChecker`` while Kafka does not answer: messages wait for their topic's check until
the crawl is paused for Kafka (then they go on, to the spool) or the node closes; the check
goes on meanwhile and is the one a replayed message's unknown topic starts."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from crawler.kafka.config import TopicSpec
from crawler.kafka.health import BrokerHealth
from crawler.kafka.producer import ItemProducer, producer_config
from crawler.kafka.topics import TopicChecker, TopicRefused

GIVE_UP_AFTER = 0.5  # s: message.timeout.ms of these checkers


class AwayBroker:
    """``ensure_topics`` fails as a broker that does not answer, until ``answers`` is set."""

    def __init__(self) -> None:
        self.answers = False
        self.asked: list[list[str]] = []

    async def ensure_topics(
        self, names: list[str], partitions: int, replication: int, config: Mapping[str, str],
        timeout: float,
    ) -> list[str]:  # fmt: skip
        self.asked.append(names)
        if not self.answers:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return names


def checker(broker: AwayBroker, counts: Counter[str], give_up_after: float = 60) -> TopicChecker:
    spec = TopicSpec(dlq_template="{topic}.dlq", partitions=1, replication=1, config={})
    health = BrokerHealth("unused:1", lambda stat, n: counts.update({stat: n}))
    producer: Any = broker
    count = lambda stat, n: counts.update({stat: n})  # noqa: E731
    return TopicChecker(lambda: producer, spec, health, count, give_up_after=give_up_after)


async def finishes(awaitable: Any, within: float = 0.5) -> bool:
    try:
        await asyncio.wait_for(asyncio.shield(awaitable), within)
    except TimeoutError:
        return False
    return True


def test_a_message_waits_while_kafka_is_away_and_goes_on_once_the_crawl_is_paused() -> None:
    async def scenario() -> None:
        broker, counts = AwayBroker(), Counter[str]()
        topics = checker(broker, counts)
        waiting = asyncio.ensure_future(topics.ready("items"))
        assert not await finishes(waiting)  # Kafka away: the message waits
        topics.follow(paused=True)
        assert await finishes(waiting)  # paused: it goes on (to the spool)
        topics.follow(paused=False)
        later = asyncio.ensure_future(topics.ready("items"))
        assert not await finishes(later)  # resumed, the check not done: waits again
        broker.answers = True
        assert await finishes(later, within=3)  # the check went on and passed
        assert counts["kafka/topic_check_failed"] >= 1
        topics.release()

    asyncio.run(scenario())


def test_messages_go_on_once_kafka_has_been_away_as_long_as_librdkafka_holds_one() -> None:
    """Kafka away from the start: messages waited for their topic's check until the crawl
    paused (KAFKA_MAX_OUTAGE), and the node crawled nothing meanwhile (an audit)."""

    async def scenario() -> None:
        broker, counts = AwayBroker(), Counter[str]()
        topics = checker(broker, counts, give_up_after=GIVE_UP_AFTER)
        waiting = asyncio.ensure_future(topics.ready("items"))
        assert not await finishes(waiting, within=0.2)
        topics.follow(paused=False)  # away for less than GIVE_UP_AFTER so far: it waits
        assert not await finishes(waiting, within=0.1)
        await asyncio.sleep(GIVE_UP_AFTER)
        topics.follow(paused=False)  # away for longer: it goes on, to the spool
        assert await finishes(waiting)
        topics.release()

    asyncio.run(scenario())


def test_an_unknown_topic_starts_its_check_until_the_node_closes() -> None:
    async def scenario() -> None:
        broker = AwayBroker()
        broker.answers = True
        topics = checker(broker, Counter())
        check = topics.start("replayed")
        assert check is not None and await finishes(check)
        assert broker.asked == [["replayed", "replayed.dlq"]]
        assert topics.start("replayed") is check  # checked once
        topics.release()
        assert topics.start("other") is None  # closing: no new check
        topics.follow(paused=False)
        assert await finishes(topics.ready("other"))  # released: never waits

    asyncio.run(scenario())


def test_a_topic_that_collides_with_another_over_a_dot_says_to_rename(
    kafka_bootstrap: str,
) -> None:
    """Spiders ``shop.a`` and ``shop_a``: Kafka refuses the second one's topic as colliding
    with the first's ('.' and '_' are one in its metrics names); the node was told to change
    the template or item type for a name within the rule it quoted (an audit)."""
    stem = f"collide-{uuid.uuid4().hex[:8]}"
    producer = ItemProducer(producer_config(kafka_bootstrap, {}))
    spec = TopicSpec(dlq_template="{topic}.dlq", partitions=1, replication=1, config={})
    health = BrokerHealth(kafka_bootstrap, lambda stat, n: None)
    topics = TopicChecker(lambda: producer, spec, health, lambda stat, n: None, give_up_after=60)

    async def scenario() -> None:
        try:
            await topics.ready(f"{stem}-shop.a")
            with pytest.raises(TopicRefused) as refused:
                await topics.ready(f"{stem}-shop_a")
            assert "collides with existing topic" in str(refused.value)
            assert str(refused.value).endswith(
                "change the spider's name, KAFKA_TOPIC_TEMPLATE, KAFKA_DLQ_TOPIC_TEMPLATE or the "
                "item's item_type (whichever made the name), so that the topic differs from the "
                "existing one by more than '.' against '_' (Kafka takes them as one in topic "
                "names)"
            )
        finally:
            topics.release()

    asyncio.run(scenario())


def test_a_topic_kafka_no_longer_has_is_checked_again() -> None:
    """A topic deleted mid-crawl: its messages met "unknown topic" and were spooled again and
    again, since the check that had passed at the first message was never run again, so the
    topic was never made again and the crawl ended with its items in the spool (an audit)."""

    async def scenario() -> None:
        broker, counts = AwayBroker(), Counter[str]()
        broker.answers = True
        topics = checker(broker, counts)
        await topics.ready("items")
        topics.unknown("items")  # the broker answered a message: no such topic
        topics.unknown("items")  # and the next one, while the check runs: one check
        await topics.ready("items")
        assert broker.asked == [["items", "items.dlq"], ["items", "items.dlq"]]
        topics.release()

    asyncio.run(scenario())
