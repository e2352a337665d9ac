"""Seeds from ``pages:start_urls``: plain and JSON seeds, idle pickup, invalid seeds."""

from __future__ import annotations

from pathlib import Path

import orjson
import redis

from crawler.demo.site import Site
from tests.cluster import logs, running_nodes, wait_for_exit, wait_for_log

READY = "Reading seeds from Redis list pages:start_urls"


def _feed_urls(feed: Path) -> list[str]:
    return [orjson.loads(line)["url"] for line in feed.read_bytes().splitlines()]


def test_plain_json_and_invalid_seeds_pushed_while_idle(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    feed = tmp_path / "items.jsonl"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {"CRAWLER_STANDALONE_FEED": str(feed), "MAX_IDLE_TIME_BEFORE_CLOSE": "4"}
    with (
        Site(20) as whole,
        Site(20) as single,
        running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        assert wait_for_log(tmp_path / "node-0.log", READY, timeout=60), logs(tmp_path)
        # The node is idle now; everything below is pushed while it waits.
        redis_client.lpush(
            "pages:start_urls",
            b'{"priority": 1}',
            "ftp://example.invalid/file",
            b'{"url": ',
            orjson.dumps({"url": single.url(3), "meta": {"crawler_scope": "elsewhere:1"}}),
            whole.url(0),
            # Scrapy's UrlLengthMiddleware dropped it at INFO, recorded nowhere (an audit)
            f"{whole.url(1)}?q={'x' * 3000}",
            # the frontier could not store its request (JSON nests 255 levels at most): an
            # ERROR and frontier/unserializable, the seed in no record (an audit)
            f'{{"url": "{whole.url(2)}", "meta": {{"deep": {"[" * 300}{"]" * 300}}}}}',
        )
        assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)

    urls = _feed_urls(feed)
    assert sorted(u for u in urls if u.startswith(whole.base_url)) == sorted(whole.all_urls())
    # The JSON seed's meta reached its request: its scope matched no link, so one page only.
    assert [u for u in urls if u.startswith(single.base_url)] == [single.url(3)]

    invalid = [orjson.loads(raw) for raw in redis_client.lrange("pages:start_urls:invalid", 0, -1)]
    assert sorted(record["reason"] for record in invalid) == [
        "json",
        "scheme",
        "unstorable",
        "url",
        "url_too_long",
    ]
    assert all(record["node"] == "node-0" for record in invalid)
    log = (tmp_path / "node-0.log").read_text()
    assert "'seeds/invalid/json': 1" in log
    assert "'seeds/received': 7" in log
    assert "'seeds/invalid/unstorable': 1" in log
    assert "frontier/unserializable" not in log
    assert "'seeds/invalid/url_too_long': 1" in log
