"""Every item of a crawl goes to the topics of one KAFKA_TOPIC_TEMPLATE: the record and the check
of a node are one step, so nodes that start together cannot both take a crawl over (a review:
two nodes, each finding no live sender of the old template, were both admitted with their own)."""

from __future__ import annotations

import asyncio

import pytest
import redis

from crawler.extensions.ledger_layout import LedgerKeys
from crawler.frontier.item_topics import ItemTopics
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.refusal import ItemTopicsChanged
from crawler.redis_connection import async_client
from tests.aio import run

KEYS = FrontierKeys.for_spider("pages")


async def _claims(redis_url: str, given: dict[str, str]) -> dict[str, str]:
    """Each node of ``given`` (node -> template) claims at once: node -> admitted | refused."""

    async def claim(node: str, template: str) -> str:
        client = async_client(redis_url)
        try:
            await ItemTopics(client, KEYS, "pages", "default").claim(node, template)
        except ItemTopicsChanged:
            return "refused"
        finally:
            await client.aclose()
        return "admitted"

    outcomes = await asyncio.gather(*(claim(node, t) for node, t in given.items()))
    return dict(zip(given, outcomes, strict=True))


@pytest.mark.parametrize("stale", [1, 3, 10])
def test_nodes_taking_a_crawl_over_together_do_not_split_its_items(
    redis_url: str, redis_client: redis.Redis, stale: int
) -> None:
    keys = LedgerKeys.for_crawl("pages", "default")
    redis_client.set(keys.item_topics, "t1-pages")  # an earlier run's; none of its nodes runs
    redis_client.hset(keys.node_topics, mapping={f"old{n}": "t1-pages" for n in range(stale)})
    for node in ("n3", "n4"):
        redis_client.set(KEYS.node_run(node), "run 0", px=60_000)  # taken before the claim
    for templates in ({"n3": "t3-{spider}", "n4": "t4-{spider}"}, {"n3": "t3-x", "n4": "t1-pages"}):
        outcomes = run(_claims(redis_url, templates))
        assert sorted(outcomes.values()) == ["admitted", "refused"], outcomes
        (winner,) = [node for node, outcome in outcomes.items() if outcome == "admitted"]
        chosen = templates[winner].replace("{spider}", "pages")
        assert redis_client.get(keys.item_topics) == chosen.encode()
        redis_client.set(keys.item_topics, "t1-pages")
        redis_client.hdel(keys.node_topics, "n3", "n4")


def test_the_same_topics_written_two_ways_are_one_template(
    redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.set(KEYS.node_run("n1"), "run 0", px=60_000)
    outcomes = run(_claims(redis_url, {"n1": "spider-{spider}-items"}))
    assert outcomes == {"n1": "admitted"}
    assert run(_claims(redis_url, {"n2": "spider-pages-items"})) == {"n2": "admitted"}


@pytest.mark.parametrize(
    ("first", "then", "said"),
    [
        ("spider-{spider}-items", "", "and this node sends none to Kafka"),
        ("", "spider-{spider}-items", "sends its items to no Kafka topic, only each node's own"),
    ],
)
def test_a_crawl_s_items_go_to_kafka_or_to_feeds_never_some_to_each(
    redis_url: str, redis_client: redis.Redis, first: str, then: str, said: str
) -> None:
    """A node without Kafka records that it has none (its items go to its local feed): a node
    of the crawl with Kafka is refused while it runs, and the other way round."""
    redis_client.set(KEYS.node_run("n1"), "run 0", px=60_000)
    assert run(_claims(redis_url, {"n1": first})) == {"n1": "admitted"}

    async def refused() -> str:
        client = async_client(redis_url)
        try:
            with pytest.raises(ItemTopicsChanged) as raised:
                await ItemTopics(client, KEYS, "pages", "default").claim("n2", then)
        finally:
            await client.aclose()
        return str(raised.value)

    assert said in run(refused())
    redis_client.delete(KEYS.node_run("n1"))  # n1 stopped: n2's becomes the crawl's
    assert run(_claims(redis_url, {"n2": then})) == {"n2": "admitted"}
