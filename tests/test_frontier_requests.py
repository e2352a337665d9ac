"""Requests the frontier cannot store are reported, and the node keeps going."""

from __future__ import annotations

from pathlib import Path

import redis

from crawler.cli.status import frontier_status
from crawler.cli.status_text import render
from crawler.demo.site import Site
from crawler.extensions.ledger_layout import LedgerKeys, ledger_fields
from tests.cluster import logs, running_nodes, wait_for_exit
from tests.test_operations import status_with_nothing_else


def test_unserializable_meta_is_reported_not_fatal(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    with (
        Site(1) as site,
        running_nodes(
            1,
            workdir=tmp_path,
            spider="bad_meta",
            env={"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""},
            settings={
                "SPIDER_MODULES": "crawler.spiders,tests.spiders",
                "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
                "CRAWLER_STANDALONE_FEED": "",
            },
        ) as nodes,
    ):
        redis_client.lpush("bad_meta:start_urls", site.url(0))
        assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)
    assert set(site.hits) == {"/", "/?good"}
    log = (tmp_path / "node-0.log").read_text()
    assert f"Request not enqueued: request '{site.url(0)}?bad' cannot be stored in Redis: " in log
    assert "meta key 'socket' is not JSON serializable" in log
    assert "'frontier/unserializable': 1" in log
    assert "Traceback" not in log


def test_status_says_how_many_requests_could_not_be_stored(redis_client: redis.Redis) -> None:
    """A start request Redis cannot hold (a lambda callback, a socket in meta) left an ERROR
    line on its node and nothing else: no failure record (it has no lease), and status said
    "finished, 0 failed" (an audit: 3 of 6 start requests gone)."""
    assert ledger_fields({"frontier/unserializable": 3})["unstored"] == 3
    keys = LedgerKeys.for_crawl("pages", "c1")
    redis_client.hset(keys.total, mapping={"done": 3, "unstored": 3})
    text = render(status_with_nothing_else(frontier_status(redis_client, "pages", "c1")))
    assert "not stored     3 requests (a value Redis cannot hold: 'Request not enqueued'" in text
