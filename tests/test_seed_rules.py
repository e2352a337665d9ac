"""Seeds can't reach a spider's internals (poison seeds, issue: anyone can push a seed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
import scrapy
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from crawler.frontier.seeds import InvalidSeed
from crawler.middlewares.cluster_start import ClusterStartMiddleware
from crawler.spiders.base import RedisSpider
from crawler.spiders.seed_rules import check_seed_meta
from settings.resolve import resolve_settings
from tests.cluster import logs, running_nodes, wait_for_exit
from tests.offline_extensions import OFFLINE_EXTENSIONS
from tests.user_crawl import USER_SETTINGS
from tests.user_site import UserSite


class Seeded(RedisSpider):
    name = "seeded"
    seed_callbacks = ("_allowed_private",)

    def parse_detail(self, response: Response) -> None:
        return None

    def _allowed_private(self, response: Response) -> None:
        return None

    def _hidden(self, response: Response) -> None:
        return None


class Plain(scrapy.Spider):
    name = "plain"


def spider(settings: dict[str, Any] | None = None) -> RedisSpider:
    off = OFFLINE_EXTENSIONS  # they would need a reactor
    values = {**resolve_settings({}), "REDIS_URL": "redis://127.0.0.1:1/0", "EXTENSIONS": off}
    return Seeded.from_crawler(get_crawler(Seeded, {**values, **(settings or {})}))


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        ({"callback": "close"}, "is a method of Spider"),
        ({"callback": "__init__"}, "is private"),
        ({"callback": "_hidden"}, "is private"),
        ({"callback": "make_request_from_data"}, "is a method of RedisSpider"),
        ({"callback": "start"}, "is a method of RedisSpider"),
        ({"callback": "parse"}, "is a method of Spider"),  # the spider has no parse of its own
        ({"callback": "nothing_here"}, "has no callback"),
        ({"meta": {"_frontier_lease": "000000000001"}}, "is internal"),
        ({"meta": {"proxy": "http://evil:8080"}}, "changes how requests are made"),
        ({"meta": {"download_timeout": 1000}}, "changes how requests are made"),
        ({"meta": {"dont_throttle": True}}, "changes how requests are made"),
        ({"meta": {"browser": True}}, "changes how requests are made"),
        ({"meta": {"session_account": "someone"}}, "changes how requests are made"),
    ],
)
def test_poison_seeds_are_refused(seed: dict[str, Any], message: str) -> None:
    raw = orjson.dumps({"url": "http://e.com/", **seed})
    with pytest.raises(InvalidSeed, match=message) as caught:
        spider().make_request_from_data(raw)
    assert caught.value.reason in {"callback", "meta"}


def test_callbacks_and_meta_a_spider_allows() -> None:
    made = spider({"SEEDS_ALLOWED_META": "proxy,download_timeout"})
    for seed in (
        {"callback": "parse_detail", "meta": {"category": "books"}},
        {"callback": "_allowed_private"},
        {"meta": {"proxy": "http://proxy.local:3128", "download_timeout": 5}},
    ):
        assert made.make_request_from_data(orjson.dumps({"url": "http://e.com/", **seed}))


def test_an_internal_meta_key_is_refused_even_when_the_setting_names_it() -> None:
    with pytest.raises(ValueError, match="SEEDS_ALLOWED_META names _frontier_lease: keys"):
        spider({"SEEDS_ALLOWED_META": "proxy,_frontier_lease"})
    with pytest.raises(InvalidSeed, match="is internal"):
        check_seed_meta({"_frontier_lease": "000000000001"}, ["_frontier_lease"])


def test_a_node_refuses_poison_seeds_and_goes_on(tmp_path: Path, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {**USER_SETTINGS, "MAX_IDLE_TIME_BEFORE_CLOSE": "2", "CRAWLER_STANDALONE_FEED": ""}
    with UserSite(2) as site:
        poison = [
            orjson.dumps({"url": site.url(0), "callback": "close"}),
            orjson.dumps({"url": site.url(0), "callback": "__init__"}),
            orjson.dumps({"url": site.url(0), "meta": {"_frontier_lease": "000000000001"}}),
        ]
        client.lpush("u_redis:start_urls", *poison, site.url(0))
        with running_nodes(
            1, workdir=tmp_path, env=env, settings=settings, spider="u_redis"
        ) as nodes:
            assert wait_for_exit(nodes, timeout=90) == [0], logs(tmp_path)
        assert set(site.page_hits()) == {"/p/0.html", "/p/1.html"}
    invalid = [orjson.loads(r) for r in client.lrange("u_redis:start_urls:invalid", 0, -1)]
    client.close()
    assert sorted(r["reason"] for r in invalid) == ["callback", "callback", "meta"]
    log = (tmp_path / "node-0.log").read_text()
    assert "Closing spider (finished)" in log and "'seeds/invalid/callback': 2" in log


def test_a_negative_idle_time_is_refused_for_a_plain_spider_too() -> None:
    off = OFFLINE_EXTENSIONS  # they would need a reactor
    values = {**resolve_settings({}), "REDIS_URL": "redis://127.0.0.1:1/0", "EXTENSIONS": off}
    crawler = get_crawler(Plain, {**values, "MAX_IDLE_TIME_BEFORE_CLOSE": "-1"})
    with pytest.raises(ValueError, match=r"MAX_IDLE_TIME_BEFORE_CLOSE=-1 must be >= 0"):
        ClusterStartMiddleware(crawler)
