"""Nodes of one spider started with different CRAWLER_CRAWL_ID share its frontier: said, not
refused (a new crawl id takes over from a crawl that still runs). An audit: two nodes of
crawls x1 and x2 crawled one frontier, start() ran twice, each ledger counted part of the work,
and nothing said so."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis

from crawler.frontier.crawl_ids import CrawlIdsLook, say_other_crawls
from crawler.frontier.keys import FrontierKeys
from crawler.redis_connection import async_client
from tests.aio import run


def test_live_nodes_of_other_crawls_are_named_and_gone_ones_forgotten(
    redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    keys = FrontierKeys.for_spider("pages")
    redis_client.hset(keys.node_crawls, mapping={"n1": "x1", "n2": "x1", "n3": "x2", "n4": "x2"})
    for node in ("n1", "n2", "n3"):  # n4 stopped: its run key is gone
        redis_client.set(keys.node_run(node), "run 0", px=60_000)

    async def looked(node: str, crawl: str) -> dict[str, list[str]]:
        client = async_client(redis_url)
        try:
            return await CrawlIdsLook(client, keys, "pages", node, crawl).others()
        finally:
            await client.aclose()

    assert run(looked("n5", "x2")) == {"x1": ["n1", "n2"]}
    assert redis_client.hget(keys.node_crawls, "n5") == b"x2"
    assert run(looked("n6", "x1")) == {"x2": ["n3"]}  # n5 does not run (no run key)
    assert not redis_client.hexists(keys.node_crawls, "n4")
    assert not redis_client.hexists(keys.node_crawls, "n5")
    assert run(looked("n1", "x1")) == {"x2": ["n3"]}
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.crawl_ids"):
        say_other_crawls("pages", "x2", {"x1": ["n1", "n2"]})
    assert (
        "Live nodes of 'pages' run other crawls on its frontier ('x1': n1, n2) than this "
        "node's 'x2'" in caplog.text
    )


def test_a_node_is_told_of_a_crawl_started_after_it(
    redis_url: str, redis_client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """A node of crawl x1 ran; a node of x2 started later and warned, and the x1 node, whose
    log its operator reads, said nothing. Each node looks again at its heartbeats (every
    LOOK_SECONDS) and says a crawl id it has not said before, once."""
    keys = FrontierKeys.for_spider("pages")
    for node in ("n1", "n2"):
        redis_client.set(keys.node_run(node), "run 0", px=60_000)

    async def looks() -> list[bool]:
        client = async_client(redis_url)
        try:
            first = CrawlIdsLook(client, keys, "pages", "n1", "x1")
            said = [await first.look(now=True)]  # alone
            await CrawlIdsLook(client, keys, "pages", "n2", "x2").others()  # x2 starts
            said.append(await first.look())  # within LOOK_SECONDS of the last: no look
            said.append(await first.look(now=True))
            said.append(await first.look(now=True))  # said already
            return said
        finally:
            await client.aclose()

    with caplog.at_level(logging.WARNING, logger="crawler.frontier.crawl_ids"):
        assert run(looks()) == [False, False, True, False]
    assert caplog.text.count("run other crawls on its frontier ('x2': n2)") == 1


def test_a_look_that_fails_at_a_heartbeat_leaves_the_beat_alone() -> None:
    """A review: the look runs in the heartbeat, before the beat's reclaim counts and its node
    run refresh; an error in it skipped those (a connection dropped between the two, or a
    script error crashing the heartbeat loop). It is left to the next look."""
    from types import SimpleNamespace

    from crawler.frontier.admission import FrontierAdmission

    class Failing:
        async def look(self, *, now: bool = False) -> bool:
            raise redis.ResponseError("ERR something")

    admission: Any = SimpleNamespace(crawl_ids=Failing(), stats=None)
    run(FrontierAdmission.look_again(admission))  # no error
