"""scrapy-redis's example project, moved over as the migration guide says, on real Redis and Kafka.

Also, live: ids as seeds through ``make_request_from_data``, set seeds
(``REDIS_START_URLS_AS_SET``), a seed pushed again being crawled again (seeds are
``dont_filter``), and a seed key of the wrong type reported by name while the node goes on.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import orjson
import pytest
import redis

from tests.cluster import logs, running_nodes, wait_for_exit, wait_for_log
from tests.user_crawl import USER_SETTINGS, cluster, pipelines
from tests.user_site import UserSite

PAGES = 12
EXAMPLE = {
    "SPIDER_MODULES": "tests.userproject.example",
    # the example project's settings, less SCHEDULER, DUPEFILTER_CLASS and RedisPipeline
    "SCHEDULER_PERSIST": "True",
    "ITEM_PIPELINES": orjson.dumps({"tests.userproject.example.ExamplePipeline": 300}).decode(),
}


@pytest.mark.parametrize(
    ("spider", "key"),
    [("myspider_redis", "myspider:start_urls"), ("mycrawler_redis", "mycrawler:start_urls")],
)
def test_example_project_spiders_crawl_every_page(
    spider: str, key: str, tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    with UserSite(PAGES, delay=0.05) as site:
        run = cluster(
            spider,
            site,
            tmp_path,
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            settings=EXAMPLE,
            arguments={"domain": "127.0.0.1"},
            seed=lambda client: client.lpush(key, site.url(0)),
        )
        hits = site.page_hits()
    urls = sorted(orjson.loads(item)["url"] for item in run.items)
    # a CrawlSpider's seed page goes to parse_start_url, which yields nothing by default
    first = 1 if spider == "mycrawler_redis" else 0
    assert urls == sorted(site.url(i) for i in range(first, PAGES))
    assert all(orjson.loads(item)["spider"] == "example" for item in run.items)
    assert set(hits.values()) == {1}
    assert (run.queued, run.leased) == (0, 0)
    assert run.ledger_adds_up(), run.ledger


def test_ids_as_seeds(tmp_path: Path, redis_url: str, kafka_bootstrap: str) -> None:
    settings = {"SPIDER_MODULES": "tests.userproject.example", "ITEM_PIPELINES": pipelines()}
    with UserSite(PAGES) as site:
        run = cluster(
            "id_seeds",
            site,
            tmp_path,
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            settings={**settings, "SITE_URL": site.base_url},
            seed=lambda client: client.lpush("id_seeds:start_urls", "3", "5", "x"),
        )
    assert sorted(orjson.loads(item)["url"] for item in run.items) == [site.url(3), site.url(5)]
    client = redis.Redis.from_url(redis_url)
    invalid = [orjson.loads(r) for r in client.lrange("id_seeds:start_urls:invalid", 0, -1)]
    client.close()
    assert [(r["seed"], r["reason"]) for r in invalid] == [("x", "error/ValueError")]


def test_a_seed_pushed_again_is_crawled_again(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    settings = {"ITEM_PIPELINES": pipelines()}
    with UserSite(PAGES) as site:
        first = cluster(
            "u_redis",
            site,
            tmp_path / "first",
            nodes=1,
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            settings=settings,
        )
        assert len(first.items) == PAGES
        again = cluster(
            "u_redis",
            site,
            tmp_path / "again",
            nodes=1,
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            settings=settings,
        )
        hits = site.page_hits()
    # the seed's page again (seeds are dont_filter), not the pages it links to (seen), said
    # at start (an audit: the second run said nothing of the pages it would skip)
    assert [orjson.loads(item)["url"] for item in again.items] == [site.url(0)]
    said = r"The frontier of 'u_redis' has nothing queued and remembers (\d+) URLs seen"
    assert re.search(said, first.logs()) is None
    found = re.search(said, again.logs())
    assert found is not None
    assert int(found[1]) >= PAGES  # every page, and the redirecting links to them
    assert f"'frontier/seen_at_start': {found[1]}," in again.logs()
    assert hits["/p/0.html"] == 2
    assert {path: n for path, n in hits.items() if path != "/p/0.html"} == {
        f"/p/{i}.html": 1 for i in range(1, PAGES)
    }


def test_set_seeds(tmp_path: Path, redis_url: str, kafka_bootstrap: str) -> None:
    with UserSite(PAGES) as site:
        run = cluster(
            "u_redis",
            site,
            tmp_path,
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            settings={"REDIS_START_URLS_AS_SET": "True", "ITEM_PIPELINES": pipelines()},
            seed=lambda client: client.sadd("u_redis:start_urls", site.url(0), site.url(5)),
        )
    urls = Counter(orjson.loads(item)["url"] for item in run.items)
    # every page once: both seeds leave the set in one SPOP and are recorded as seen before
    # page 0's links to page 5 arrive
    assert urls == {site.url(i): 1 for i in range(PAGES)}
    assert (run.queued, run.leased) == (0, 0)


def test_a_seed_key_of_the_wrong_type_is_reported_and_the_node_goes_on(
    tmp_path: Path, redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    client.sadd("u_redis:start_urls", "http://127.0.0.1:1/")
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {**USER_SETTINGS, "MAX_IDLE_TIME_BEFORE_CLOSE": "2", "CRAWLER_STANDALONE_FEED": ""}
    with (
        UserSite(3) as site,
        running_nodes(1, workdir=tmp_path, env=env, settings=settings, spider="u_redis") as nodes,
    ):
        log = tmp_path / "node-0.log"
        expected = "seed key 'u_redis:start_urls' is a Redis set, but this spider reads a list"
        assert wait_for_log(log, expected, timeout=60), logs(tmp_path)
        client.delete("u_redis:start_urls")
        client.lpush("u_redis:start_urls", site.url(0))
        assert wait_for_exit(nodes, timeout=90) == [0], logs(tmp_path)
    assert set(site.page_hits()) == {"/p/0.html", "/p/1.html", "/p/2.html"}
    assert "'seeds/wrong_type'" in log.read_text()
    client.close()


@pytest.mark.parametrize("queue_type", ["zset", "list"])
def test_a_scrapy_redis_crawl_left_under_way_stops_the_start(
    tmp_path: Path, redis_url: str, queue_type: str
) -> None:
    """scrapy-redis stopped mid-crawl (``SCHEDULER_PERSIST``) leaves its queue and dupefilter
    in Redis: the migrated node said nothing of them, crawled nothing and idled out; the 29
    requests were never crawled (an audit). The start stops, naming the key and what to do."""
    client = redis.Redis.from_url(redis_url)
    if queue_type == "zset":
        client.zadd("u_redis:requests", {b"\x80pickled-1": 0, b"\x80pickled-2": 0})
    else:
        client.rpush("u_redis:requests", b"\x80pickled-1", b"\x80pickled-2")
    client.sadd("u_redis:dupefilter", "0" * 40)
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {**USER_SETTINGS, "CRAWLER_STANDALONE_FEED": ""}
    with running_nodes(1, workdir=tmp_path, env=env, settings=settings, spider="u_redis") as nodes:
        assert wait_for_exit(nodes, timeout=60) == [1], logs(tmp_path)
    log = logs(tmp_path, tail=0)
    assert "2 requests of a scrapy-redis crawl of 'u_redis' wait in u_redis:requests" in log
    assert "`redis-cli del u_redis:requests`, then `redis-cli del u_redis:dupefilter`" in log
    assert "'finish_reason': 'frontier_scrapy_redis_queue'" in log
    assert client.exists("u_redis:requests")  # kept
    client.close()
