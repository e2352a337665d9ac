"""Requests the frontier cannot store are reported, and the node keeps going."""

from __future__ import annotations

from pathlib import Path

import redis

from crawler.demo.site import Site
from tests.cluster import logs, running_nodes, wait_for_exit


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
