"""What scrapy-redis users rely on, in our words: its spider attributes, seeds and settings.

The behaviours come from scrapy-redis's own tests (``tests/test_spiders.py``,
``test_scrapy_redis.py``, ``test_connection.py``) and its README: key naming with
``%(name)s``, spider arguments, batch sizes, set and sorted-set seeds,
``make_request_from_data``, encodings, JSON seeds with form data, the REDIS_HOST /
REDIS_PORT / REDIS_PARAMS connection settings. Where our semantics must differ
the setting is refused with a message naming what to use instead.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

import pytest
import redis
import redis.asyncio
import scrapy
from scrapy import FormRequest, Request, signals
from scrapy.settings import Settings
from scrapy.utils.conf import build_component_list
from scrapy.utils.test import get_crawler

from crawler import scrapy_redis_compat
from crawler.addon import ClusterAddon
from crawler.cli.config import redis_url as cli_redis_url
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.scheduler import START_URL_META
from crawler.frontier.seed_holds import SeedKeys
from crawler.frontier.seed_queue import LetGo, SeedQueue, WrongSeedKeyType
from crawler.frontier.seed_settings import SeedSource
from crawler.settings_values import component_path
from crawler.spiders.base import RedisCrawlSpider, RedisSpider
from settings.resolve import resolve_settings
from tests.offline_extensions import OFFLINE_EXTENSIONS


class MySpider(RedisSpider):
    name = "myspider"


def spider(
    cls: type[RedisSpider] = MySpider, *, settings: dict[str, Any] | None = None, **kwargs: Any
) -> RedisSpider:
    # from_crawler does not connect; the node's extensions would (they need a reactor)
    cluster = {"REDIS_URL": "redis://127.0.0.1:1/0", "EXTENSIONS": OFFLINE_EXTENSIONS}
    crawler = get_crawler(cls, {**resolve_settings({}), **cluster, **(settings or {})})
    made = cls.from_crawler(crawler, **kwargs)
    assert isinstance(made, RedisSpider)
    return made


def project(values: dict[str, Any]) -> Settings:
    """Settings as a project or ``-s`` gives them, after the add-on's mapping."""
    settings = Settings(resolve_settings({}))
    settings.setdict(values, priority="project")
    ClusterAddon().update_settings(settings)
    return settings


# -- spider attributes and arguments (scrapy-redis test_spiders.py) ----------------------------


@pytest.mark.parametrize("cls", [RedisSpider, RedisCrawlSpider])
def test_spider_arguments_like_scrapy_redis(cls: type[RedisSpider]) -> None:
    named = type("Named", (cls,), {"name": "named"})
    made = spider(
        named, name="foo", redis_key="key:%(name)s", redis_batch_size="2000", max_idle_time="100"
    )
    assert made.name == "foo"
    assert made.seed_settings.seeds_key == "key:foo"
    assert made.seed_settings.batch_size == 2000
    assert made.seed_settings.max_idle_time == 100


def test_default_key_and_settings() -> None:
    made = spider()
    assert made.seed_settings.seeds_key == "myspider:start_urls"
    assert made.seed_settings.source is SeedSource.LIST
    assert made.seed_settings.dont_filter is True
    moved = spider(settings={"SEEDS_KEY": "start:%(name)s", "SEEDS_BATCH_SIZE": 5})
    assert (moved.seed_settings.seeds_key, moved.seed_settings.batch_size) == ("start:myspider", 5)


def test_class_attributes_win_over_settings() -> None:
    class Attributes(RedisSpider):
        name = "attrs"
        redis_key = "myspider:start_urls"  # scrapy-redis's example: not the spider's own name
        redis_batch_size = 3
        redis_encoding = "latin-1"
        max_idle_time = 7

    config = spider(Attributes, settings={"SEEDS_BATCH_SIZE": 50}).seed_settings
    assert (config.seeds_key, config.batch_size, config.encoding, config.max_idle_time) == (
        "myspider:start_urls",
        3,
        "latin-1",
        7,
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"redis_key": "  "}, "redis_key"),
        ({"redis_batch_size": "x"}, "redis_batch_size"),
        ({"max_idle_time": "x"}, "max_idle_time"),
        ({"redis_batch_size": "0"}, "redis_batch_size"),
        ({"redis_encoding": "no-such-codec"}, "redis_encoding"),
        ({"redis_key": "%(spider)s:start_urls"}, "redis_key"),
    ],
)
def test_bad_attributes_stop_the_start(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        spider(**kwargs)  # type: ignore[arg-type]


# -- make_request_from_data ------------------------------------------------------------------


def test_plain_url_seed_is_a_dont_filter_get() -> None:
    request = spider().make_request_from_data(b"http://example.com/a")
    assert isinstance(request, Request)
    assert (request.url, request.method, request.dont_filter) == (
        "http://example.com/a",
        "GET",
        True,
    )
    assert request.callback is None  # Scrapy's default: parse (a CrawlSpider's rules)


def test_json_seed_extra_keys_are_form_data() -> None:
    made = spider()
    get = made.make_request_from_data(
        b'{"url": "http://e.com/x", "a": "1", "b": ["2", "3"], "n": 5}'
    )
    assert isinstance(get, FormRequest)
    assert (get.method, get.url) == ("GET", "http://e.com/x?a=1&b=2&b=3&n=5")
    post = made.make_request_from_data(
        b'{"url": "http://e.com/x", "method": "post", "meta": {"k": 1}, "q": "x y"}'
    )
    assert isinstance(post, FormRequest)
    assert (post.method, post.body, post.meta["k"]) == ("POST", b"q=x+y", 1)
    assert post.headers[b"Content-Type"] == b"application/x-www-form-urlencoded"


def test_seed_can_turn_dont_filter_off() -> None:
    request = spider().make_request_from_data(b'{"url": "http://e.com/", "dont_filter": false}')
    assert isinstance(request, Request) and not request.dont_filter
    request = spider(settings={"SEEDS_DONT_FILTER": False}).make_request_from_data(b"http://e.com/")
    assert isinstance(request, Request) and not request.dont_filter


def test_standalone_seeds_are_filtered_like_any_request() -> None:
    """Scrapy's own scheduler would not record a dont_filter seed: links back to it would
    fetch it twice. There is no pushing again in standalone mode."""
    request = spider(settings={"REDIS_URL": ""}).make_request_from_data(b"http://e.com/")
    assert isinstance(request, Request) and not request.dont_filter


def test_seeds_in_another_encoding() -> None:
    made = spider(redis_encoding="gbk")
    request = made.make_request_from_data(
        '{"url": "http://e.com/", "meta": {"t": "中文"}}'.encode("gbk")
    )
    assert isinstance(request, Request) and request.meta["t"] == "中文"


def test_make_request_from_data_can_be_overridden() -> None:
    class Ids(RedisSpider):
        name = "ids"

        def make_request_from_data(self, data: bytes) -> list[Request]:
            return [
                Request(f"http://e.com/item/{int(data)}"),
                Request(f"http://e.com/meta/{int(data)}"),
            ]

    made = spider(Ids)
    assert [r.url for r in made.requests_from_raw_seed(b"42")] == [
        "http://e.com/item/42",
        "http://e.com/meta/42",
    ]


# -- seed key types: list, set, zset (scrapy-redis test_consume_urls_from_redis) ------------


@pytest.mark.parametrize("source", list(SeedSource))
def test_seed_sources_take_batches_atomically(redis_url: str, source: SeedSource) -> None:
    key = "start:urls"
    sync = redis.Redis.from_url(redis_url)
    urls = [f"http://e.com/{i}" for i in range(10)]
    if source is SeedSource.LIST:
        sync.lpush(key, *urls)
    elif source is SeedSource.SET:
        sync.sadd(key, *urls)
    else:
        sync.zadd(key, {url: i for i, url in enumerate(urls)})

    keys = SeedKeys(key, "invalid", (FrontierKeys.for_spider("s"),))

    async def take_all() -> list[list[bytes]]:
        client = redis.asyncio.Redis.from_url(redis_url)
        queue = SeedQueue(client, keys, source, node_id="n1", hold_ms=60_000)
        batches = []
        try:
            for _ in range(3):
                batch = await queue.take(5, 0.1)
                assert await queue.take(5, 0.1) == batch  # held until done
                assert sync.llen(keys.taken("n1")) == len(batch)
                await queue.done(LetGo(len(batch)))
                batches.append(batch)
            return batches
        finally:
            await client.aclose()

    first, second, third = asyncio.run(take_all())
    assert (len(first), len(second), third) == (5, 5, [])
    got = [b.decode() for b in first + second]
    assert sorted(got) == sorted(urls)
    if source is SeedSource.LIST:
        assert got == urls  # LPUSH order
    if source is SeedSource.ZSET:
        assert got == urls[::-1]  # highest score first
    assert not sync.exists(key)
    sync.close()


def test_a_seed_key_of_the_wrong_type_is_named(redis_url: str) -> None:
    sync = redis.Redis.from_url(redis_url)
    sync.sadd("myspider:start_urls", "http://e.com/")

    async def pop() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        keys = SeedKeys("myspider:start_urls", "invalid", (FrontierKeys.for_spider("myspider"),))
        try:
            await SeedQueue(client, keys, node_id="n1", hold_ms=1000).take(1, 0.1)
        finally:
            await client.aclose()

    with pytest.raises(
        WrongSeedKeyType,
        match=r"'myspider:start_urls' is a Redis set, but this spider reads a list"
        r".*REDIS_START_URLS_AS_SET=True",
    ):
        asyncio.run(pop())
    sync.close()


# -- settings: mapped with scrapy-redis's meaning, or refused ---------------------------------


def test_scrapy_redis_seed_settings_map_to_ours() -> None:
    settings = project(
        {
            "REDIS_START_URLS_KEY": "start:urls",
            "REDIS_START_URLS_BATCH_SIZE": 5,
            "REDIS_START_URLS_AS_ZSET": True,
        }
    )
    assert (settings.get("SEEDS_KEY"), settings.getint("SEEDS_BATCH_SIZE")) == ("start:urls", 5)
    assert settings.get("SEEDS_TYPE") == "zset"
    assert project({"REDIS_START_URLS_AS_SET": True}).get("SEEDS_TYPE") == "set"
    agreeing = {"REDIS_START_URLS_AS_SET": True, "SEEDS_TYPE": "set"}
    assert project(agreeing).get("SEEDS_TYPE") == "set"
    assert project({"SCHEDULER_IDLE_BEFORE_CLOSE": 10}).getfloat("FRONTIER_IDLE_POLL") == 10
    project(
        {"SCHEDULER_PERSIST": True, "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.PriorityQueue"}
    )


@pytest.mark.parametrize(
    ("values", "url"),
    [
        ({"REDIS_HOST": "redis.local", "REDIS_PORT": 6380}, "redis://redis.local:6380/0"),
        ({"REDIS_PORT": "6390"}, "redis://localhost:6390/0"),
        (
            {"REDIS_HOST": "h", "REDIS_PARAMS": {"db": 3, "password": "p@ss"}},
            "redis://:p%40ss@h:6379/3",
        ),
        (
            {
                "REDIS_URL": "redis://h:1/0",
                "REDIS_PARAMS": {"socket_timeout": 30, "retry_on_timeout": True},
            },
            "redis://h:1/0?socket_timeout=30",
        ),
        ({"REDIS_PARAMS": {"url": "redis://h:2/1"}}, "redis://h:2/1"),
        ({"REDIS_URL": "redis://h:1", "REDIS_PARAMS": {"db": 5}}, "redis://h:1/5"),
        ({"REDIS_URL": "redis://h:1/5", "REDIS_PARAMS": {"db": 5}}, "redis://h:1/5"),
        # None is redis-py's own default (no timeout): what a URL without the option means
        (
            {"REDIS_HOST": "h", "REDIS_PARAMS": {"socket_timeout": None, "db": 2}},
            "redis://h:6379/2",
        ),
        ({"REDIS_URL": "redis://h:1/0", "REDIS_PARAMS": {"socket_connect_timeout": None}}, None),
    ],
)
def test_connection_settings_become_redis_url(values: dict[str, Any], url: str | None) -> None:
    assert project(values).get("REDIS_URL") == (url or values["REDIS_URL"])


def test_the_cli_reaches_the_redis_the_nodes_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes map REDIS_HOST / REDIS_PORT / REDIS_PARAMS to REDIS_URL; the `crawler` commands
    said "no Redis: give --redis or set REDIS_URL" for such a project."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("CRAWLER_SETTING_REDIS_HOST", "redis.local")
    monkeypatch.setenv("CRAWLER_SETTING_REDIS_PARAMS", '{"db": 3}')
    assert cli_redis_url(argparse.Namespace(redis=None)) == "redis://redis.local:6379/3"
    monkeypatch.setenv("CRAWLER_SETTING_REDIS_URL", "redis://other:1/0")
    with pytest.raises(SystemExit, match="REDIS_URL and REDIS_HOST are both given"):
        cli_redis_url(argparse.Namespace(redis=None))


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"SCHEDULER_FLUSH_ON_START": True}, "nodes never wipe shared state: run `crawler purge"),
        # refused by name whatever reads it (only the ledger did: off, Kafka headers took "")
        ({"CRAWLER_CRAWL_ID": "", "LEDGER_ENABLED": False}, "CRAWLER_CRAWL_ID='' must be"),
        ({"CRAWLER_CRAWL_ID": "a:b", "LEDGER_ENABLED": False}, "CRAWLER_CRAWL_ID='a:b' must be"),
        ({"SCHEDULER_PERSIST": False}, "the frontier always persists"),
        ({"SCHEDULER_SERIALIZER": "json"}, "never pickled"),
        ({"SCHEDULER_QUEUE_KEY": "%(spider)s:requests"}, "keys are fixed"),
        ({"SCHEDULER_DUPEFILTER_KEY": "%(spider)s:dupefilter"}, "keys are fixed"),
        ({"SCHEDULER_DUPEFILTER_CLASS": "x.Y"}, "FRONTIER_DUPEFILTER"),
        ({"SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.FifoQueue"}, "priority queue"),
        ({"SCHEDULER": "scrapy_redis.scheduler.Scheduler"}, "LeasingScheduler"),
        ({"DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter"}, "FRONTIER_DUPEFILTER"),
        ({"REDIS_ITEMS_KEY": "%(spider)s:items"}, "RedisPipeline, which is not in ITEM_PIPELINES"),
        ({"REDIS_CLS": "redis.Redis"}, "builds its own Redis clients"),
        (
            {"REDIS_PARAMS": {"health_check_interval": 5}},
            "health_check_interval cannot be expressed",
        ),
        (
            {"REDIS_URL": "redis://h:1/0", "REDIS_HOST": "other"},
            "REDIS_URL and REDIS_HOST are both given",
        ),
        ({"REDIS_START_URLS_AS_SET": True, "REDIS_START_URLS_AS_ZSET": True}, "choose one"),
        ({"REDIS_START_URLS_KEY": "a", "SEEDS_KEY": "b"}, "disagree"),
        (
            {"REDIS_URL": "redis://h:1/0", "SCHEDULER": "scrapy.core.scheduler.Scheduler"},
            "cluster mode needs",
        ),
        ({"REDIS_URL": "redis://h:1/0", "DUPEFILTER_CLASS": "my.Filter"}, "would ignore it"),
        (  # no dedup at all: what to do instead
            {"REDIS_URL": "redis://h:1/0", "DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter"},
            "dont_filter=True on the requests",
        ),
        ({"SCHEDULER_IDLE_BEFORE_CLOSE": 5, "FRONTIER_IDLE_POLL": 0.2}, "disagree"),
        (
            {"REDIS_URL": "redis://a:1/0", "REDIS_PARAMS": {"url": "redis://b:2/5"}},
            "REDIS_PARAMS\\['url'\\] are both given and differ",
        ),
        (
            {"REDIS_URL": "redis://:x@h:1/0", "REDIS_PARAMS": {"password": "y"}},
            "password and the credentials in REDIS_URL are both given",
        ),
        (
            {"REDIS_URL": "redis+sentinel://s:26379/mymaster/0", "REDIS_PARAMS": {"db": 4}},
            "db cannot be put in a redis\\+sentinel:// REDIS_URL",
        ),
        ({"STATS_KEY": "%(spider)s:stats"}, "only applies to STATS_CLASS"),
        (  # the ledger read its text values as nothing: 0 pages, NOT STARTED (an audit)
            {"REDIS_URL": "redis://h:1/0", "STATS_CLASS": "scrapy_redis.stats.RedisStatsCollector"},
            "one stats hash for all the nodes, as text",
        ),
        (  # it won silently: the nodes used db 5, `crawler seed` pushed to db 0
            {"REDIS_URL": "redis://h:1/0", "REDIS_PARAMS": {"db": 5}},
            "REDIS_PARAMS' db 5 and the database 0 in REDIS_URL are both given",
        ),
        (  # it won silently: a producer's ZADD met a set
            {"REDIS_START_URLS_AS_SET": True, "SEEDS_TYPE": "zset"},
            "REDIS_START_URLS_AS_SET=True and SEEDS_TYPE='zset' disagree",
        ),
        (
            {"REDIS_START_URLS_AS_ZSET": True, "SEEDS_TYPE": "set"},
            "REDIS_START_URLS_AS_ZSET=True and SEEDS_TYPE='set' disagree",
        ),
        (
            {
                "REDIS_URL": "redis://h:1/0",
                "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.LifoMemoryQueue",
            },
            "SCHEDULER_MEMORY_QUEUE=.* first in first out within a priority",
        ),
        (
            {"REDIS_URL": "redis://h:1/0", "SCHEDULER_PRIORITY_QUEUE": "my.SiteQueue"},
            "SCHEDULER_PRIORITY_QUEUE=.* remove the setting",
        ),
        (
            {"REDIS_URL": "redis://h:1/0", "SCHEDULER_START_DISK_QUEUE": "my.StartQueue"},
            "start requests too",
        ),
    ],
)
def test_settings_that_cannot_hold_are_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        project(values)


def test_settings_that_ask_for_what_the_frontier_does_are_accepted() -> None:
    settings = project(
        {
            "REDIS_URL": "redis://h:1/0",
            "SCHEDULER_FLUSH_ON_START": False,
            "SCHEDULER_IDLE_BEFORE_CLOSE": 3,
            "FRONTIER_IDLE_POLL": 3,
            "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue",
            "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
            "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
        }
    )
    assert settings.getfloat("FRONTIER_IDLE_POLL") == 3


def test_queue_settings_given_as_classes_as_scrapy_docs_show_for_bfs_are_accepted() -> None:
    from scrapy.squeues import FifoMemoryQueue, LifoMemoryQueue, PickleFifoDiskQueue

    bfs = {"DEPTH_PRIORITY": 1, "SCHEDULER_MEMORY_QUEUE": FifoMemoryQueue}
    project({"REDIS_URL": "redis://h:1/0", **bfs, "SCHEDULER_DISK_QUEUE": PickleFifoDiskQueue})
    named = r"SCHEDULER_MEMORY_QUEUE='scrapy\.squeues\.LifoMemoryQueue'"
    with pytest.raises(ValueError, match=named):
        project({"REDIS_URL": "redis://h:1/0", "SCHEDULER_MEMORY_QUEUE": LifoMemoryQueue})


def test_scrapy_redis_settings_given_as_classes_are_judged_as_their_paths() -> None:
    """Scrapy and scrapy-redis take a class for a class setting: PriorityQueue as a class was
    refused as not a priority queue, RedisPipeline as a class was "not in ITEM_PIPELINES", and
    scrapy-redis's scheduler or dupefilter as a class ran standalone and failed on
    localhost:6379 with a traceback, exit 0 (an audit)."""
    from scrapy_redis.dupefilter import RFPDupeFilter
    from scrapy_redis.pipelines import RedisPipeline
    from scrapy_redis.queue import FifoQueue, PriorityQueue
    from scrapy_redis.scheduler import Scheduler

    project({"REDIS_URL": "redis://h:1/0", "SCHEDULER_QUEUE_CLASS": PriorityQueue})
    # and ours, or Scrapy's default dupefilter, as classes (refused as not themselves: a review)
    from scrapy.dupefilters import RFPDupeFilter as ScrapyDupeFilter

    from crawler.frontier.scheduler import LeasingScheduler

    project({"REDIS_URL": "redis://h:1/0", "SCHEDULER": LeasingScheduler})
    project({"REDIS_URL": "redis://h:1/0", "DUPEFILTER_CLASS": ScrapyDupeFilter})
    items = {"ITEM_PIPELINES": {RedisPipeline: 400}, "REDIS_ITEMS_KEY": "%(spider)s:items"}
    project({"REDIS_URL": "redis://h:1/0", **items})
    for refused, message in (
        ({"SCHEDULER_QUEUE_CLASS": FifoQueue}, "priority queue"),
        ({"SCHEDULER": Scheduler}, "LeasingScheduler"),
        ({"DUPEFILTER_CLASS": RFPDupeFilter}, "FRONTIER_DUPEFILTER"),
    ):
        for mode in ({}, {"REDIS_URL": "redis://h:1/0"}):  # standalone too
            with pytest.raises(ValueError, match=message):
                project({**mode, **refused})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"db": "abc"}, r"REDIS_PARAMS\['db'\]='abc' is not a database number"),
        ({"db": -1}, r"REDIS_PARAMS\['db'\]=-1 is not a database number"),
        ({"socket_timeout": "abc"}, r"REDIS_PARAMS\['socket_timeout'\]='abc' is not seconds"),
        (
            {"socket_connect_timeout": 0},
            r"'socket_connect_timeout'\]=0 is not seconds above 0, or None",
        ),
    ],
)
def test_redis_params_that_are_no_numbers_are_refused_by_name(
    params: dict[str, Any], message: str
) -> None:
    """ "invalid literal for int() with base 10: 'abc'", naming nothing, or the REDIS_URL made of
    them (an audit)."""
    for connection in ({"REDIS_HOST": "h"}, {"REDIS_URL": "redis://h:1"}):
        with pytest.raises(ValueError, match=message):
            project({**connection, "REDIS_PARAMS": params})


def test_a_download_delay_becomes_the_cluster_wide_rate_unless_one_is_given() -> None:
    cluster = {"REDIS_URL": "redis://h:1/0", "DOWNLOAD_DELAY": 0.5}
    assert project(cluster).getfloat("POLITENESS_RATE") == 2.0  # not 2 a second per node
    assert project({**cluster, "POLITENESS_RATE": 8}).getfloat("POLITENESS_RATE") == 8
    assert project({"REDIS_URL": "redis://h:1/0"}).getfloat("POLITENESS_RATE") == 4.0


def test_a_download_delay_randomized_as_scrapy_does_spreads_the_cluster_s_requests() -> None:
    """Scrapy waits 0.5 to 1.5 times DOWNLOAD_DELAY (RANDOMIZE_DOWNLOAD_DELAY, on by default);
    the cluster-wide rate it became paced an even 1/delay, and the setting went unsaid (audit
    AS). Such a rate spreads its requests as much (POLITENESS_JITTER), the same on average."""
    cluster = {"REDIS_URL": "redis://h:1/0", "DOWNLOAD_DELAY": 0.5}
    assert project(cluster).getfloat("POLITENESS_JITTER") == 0.5
    plain = {**cluster, "RANDOMIZE_DOWNLOAD_DELAY": False}
    assert project(plain).getfloat("POLITENESS_JITTER") == 0.0
    assert project({**cluster, "POLITENESS_JITTER": 0.2}).getfloat("POLITENESS_JITTER") == 0.2
    # a rate given as such is paced evenly unless told otherwise
    assert project({"REDIS_URL": "redis://h:1/0"}).getfloat("POLITENESS_JITTER") == 0.0


class PacedSpider(scrapy.Spider):
    name = "paced"
    download_delay = 2  # Scrapy's spider attribute (deprecated for DOWNLOAD_DELAY, still read)


def test_a_spiders_download_delay_attribute_becomes_the_cluster_wide_rate() -> None:
    with pytest.warns(scrapy.exceptions.ScrapyDeprecationWarning, match="download_delay"):
        addon = ClusterAddon(get_crawler(PacedSpider))  # Scrapy reads it after the add-ons

    def rate(values: dict[str, Any]) -> float:
        settings = Settings(resolve_settings({}))
        settings.setdict({"REDIS_URL": "redis://h:1/0", **values}, priority="project")
        addon.update_settings(settings)
        return settings.getfloat("POLITENESS_RATE")

    assert rate({}) == 0.5  # not 0.5 a second per node
    # the spider's delay over the project's rate, as Scrapy ranks a spider's settings
    assert rate({"POLITENESS_RATE": 3}) == 0.5
    assert rate({"DOWNLOAD_DELAY": 1}) == 0.5  # the spider's wins over the project's, as in Scrapy
    spider_given = Settings(resolve_settings({}))
    spider_given.set("REDIS_URL", "redis://h:1/0", priority="project")
    spider_given.set("DOWNLOAD_DELAY", 4, priority="spider")  # custom_settings: Scrapy keeps it
    addon.update_settings(spider_given)
    assert spider_given.getfloat("POLITENESS_RATE") == 0.25
    # a rate the spider gives, even the default's value, is the rate: DOWNLOAD_DELAY is not
    both = Settings(resolve_settings({}))
    both.set("REDIS_URL", "redis://h:1/0", priority="project")
    both.setdict({"DOWNLOAD_DELAY": 2, "POLITENESS_RATE": 4.0}, priority="spider")
    addon.update_settings(both)
    assert both.getfloat("POLITENESS_RATE") == 4.0


def test_a_spider_s_delay_outranks_the_project_s_rate_and_yields_to_the_command_line() -> None:
    """A spider's custom_settings DOWNLOAD_DELAY=0.5 under CRAWLER_SETTING_POLITENESS_RATE=50
    (the README's form): the project's rate won, and each of 2 nodes kept its own 0.5 s, so
    the site got requests in pairs 0.02 s apart, with no word (an audit)."""
    addon = ClusterAddon(get_crawler(scrapy.Spider))

    def rate(rate_priority: str) -> float:
        settings = Settings(resolve_settings({}))
        settings.set("REDIS_URL", "redis://h:1/0", priority="project")
        settings.set("POLITENESS_RATE", 50, priority=rate_priority)
        settings.set("DOWNLOAD_DELAY", 0.5, priority="spider")
        addon.update_settings(settings)
        return settings.getfloat("POLITENESS_RATE")

    assert rate("project") == 2.0  # the environment's and settings.py's priority
    assert rate("cmdline") == 50  # -s POLITENESS_RATE=50 outranks custom_settings, as in Scrapy


def test_closespider_counts_are_said_to_count_per_node(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="crawler.addon"):
        project({"REDIS_URL": "redis://h:1/0", "CLOSESPIDER_PAGECOUNT": 20})
        project({"CLOSESPIDER_ITEMCOUNT": 5})  # standalone: as in Scrapy, nothing to say
    assert [record.getMessage() for record in caplog.records] == [
        "CLOSESPIDER_PAGECOUNT=20 counts per node in cluster mode: each node closes when it "
        "has crawled that many pages (N nodes: up to N times as many) and the others go on; "
        "what is left stays in the frontier for the next run (docs/settings.md)"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crawler.addon"):
        project({"REDIS_URL": "redis://h:1/0", "CLOSESPIDER_ITEMCOUNT": 5})
    (said,) = [record.getMessage() for record in caplog.records]
    # one node went to 4,500 items for CLOSESPIDER_ITEMCOUNT=500 with no word of why
    assert "An item counts once Kafka acknowledged it" in said


def test_the_no_item_timeout_is_said_to_count_per_node(caplog: pytest.LogCaptureFixture) -> None:
    """A node that waits for other nodes' links scrapes nothing meanwhile: with
    CLOSESPIDER_TIMEOUT_NO_ITEM it closes while the cluster still works."""
    with caplog.at_level(logging.WARNING, logger="crawler.addon"):
        project({"REDIS_URL": "redis://h:1/0", "CLOSESPIDER_TIMEOUT_NO_ITEM": 30})
    (said,) = [record.getMessage() for record in caplog.records]
    assert said.startswith("CLOSESPIDER_TIMEOUT_NO_ITEM=30 counts per node in cluster mode")


def test_per_node_download_limits_are_said_to_hold_per_node(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limits = {
        "AUTOTHROTTLE_ENABLED": True,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,  # said nothing, as the other two (an audit)
        "CONCURRENT_REQUESTS_PER_IP": 1,
        "DOWNLOAD_SLOTS": {"shop.test": {"delay": 2, "concurrency": 1}},
    }
    deprecated = scrapy.exceptions.ScrapyDeprecationWarning
    with caplog.at_level(logging.WARNING, logger="crawler.addon"):
        with pytest.warns(deprecated, match="PER_IP"):  # Scrapy's own warning
            project({"REDIS_URL": "redis://h:1/0", **limits})
        project(limits)  # standalone: as in Scrapy, nothing to say
        project({"REDIS_URL": "redis://h:1/0", "AUTOTHROTTLE_ENABLED": False})
    said = [record.getMessage() for record in caplog.records]
    assert [message.split(" ", 1)[0] for message in said] == [
        "AUTOTHROTTLE_ENABLED=True",
        "CONCURRENT_REQUESTS_PER_DOMAIN=1",
        "CONCURRENT_REQUESTS_PER_IP=1",
        "DOWNLOAD_SLOTS",
    ]
    assert all("POLITENESS_" in message for message in said)  # what holds cluster-wide instead
    # Scrapy paces DOWNLOAD_DELAY per IP with it; the cluster per host[:port] (an audit)
    assert "DOWNLOAD_DELAY is paced per host[:port]" in said[2]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (  # the limiter off: the delay is each node's (an audit: no word)
            {"DOWNLOAD_DELAY": 1, "POLITENESS_ENABLED": False},
            "DOWNLOAD_DELAY=1 holds per node: POLITENESS_ENABLED=False",
        ),
        (  # a site's own rate stays the site's, as a DOWNLOAD_SLOTS delay would in Scrapy
            {"DOWNLOAD_DELAY": 1, "POLITENESS_SITE_RATES": {"shop.test": 10}},
            "POLITENESS_SITE_RATES keeps its own rate for shop.test over DOWNLOAD_DELAY=1",
        ),
    ],
)
def test_a_download_delay_that_does_not_hold_for_every_site_says_so(
    values: dict[str, Any], expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="crawler"):
        project({"REDIS_URL": "redis://h:1/0", **values})
    assert expected in caplog.text


SCRAPY_COOKIES = "scrapy.downloadermiddlewares.cookies.CookiesMiddleware"
SHARED_COOKIES = "crawler.middlewares.shared_cookies.SharedCookiesMiddleware"


def enabled_cookie_middlewares(settings: Settings) -> dict[str, int]:
    """The cookie middlewares Scrapy will run, with their orders (700: the base's)."""
    enabled = build_component_list(
        settings.get_component_priority_dict_with_base("DOWNLOADER_MIDDLEWARES")
    )
    orders = {component_path(k): v for k, v in settings.getdict("DOWNLOADER_MIDDLEWARES").items()}
    return {
        path: orders.get(path) or 700
        for path in map(component_path, enabled)
        if path in (SCRAPY_COOKIES, SHARED_COOKIES)
    }


def test_scrapy_s_cookie_jars_named_by_a_project_are_the_shared_ones_in_cluster_mode(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A project that lists Scrapy's CookiesMiddleware (copied from a template) ran it beside
    the shared one: its own per-node jar then wrote the Cookie header last, and a login made on
    one node was not sent by the others. The shared one takes its place and order."""
    listed = {"DOWNLOADER_MIDDLEWARES": {SCRAPY_COOKIES: 650}}
    assert enabled_cookie_middlewares(project(listed)) == {SHARED_COOKIES: 650}  # standalone
    with caplog.at_level(logging.INFO, logger="crawler.addon"):
        cluster = project({"REDIS_URL": "redis://h:1/0", **listed})
    assert enabled_cookie_middlewares(cluster) == {SHARED_COOKIES: 650}
    assert "takes the place of scrapy.downloadermiddlewares.cookies.CookiesMiddleware" in (
        caplog.text
    )
    caplog.clear()
    own = {"DOWNLOADER_MIDDLEWARES": {SCRAPY_COOKIES: 700, SHARED_COOKIES: None}}
    with caplog.at_level(logging.WARNING, logger="crawler.addon"):
        kept = project({"REDIS_URL": "redis://h:1/0", **own})
    assert enabled_cookie_middlewares(kept) == {SCRAPY_COOKIES: 700}  # as asked, and said
    assert "each node's own" in caplog.text
    assert enabled_cookie_middlewares(project({"REDIS_URL": "redis://h:1/0"})) == {
        SHARED_COOKIES: 700
    }


def test_a_download_slot_delay_becomes_its_cluster_wide_rate() -> None:
    """A DOWNLOAD_SLOTS delay held per node (warned): two nodes sent the slot's site one
    request a second for a delay of 2 (an audit). As DOWNLOAD_DELAY, it is the slot's rate."""
    slots = {
        "shop.test": {"delay": 2, "concurrency": 1},
        "kept.test": {"delay": 4},
        "Shop:Checkout": {"delay": 1},  # a slot a spider names in meta: it stayed per node
    }
    cluster = project(
        {
            "REDIS_URL": "redis://h:1/0",
            "DOWNLOAD_SLOTS": slots,
            "POLITENESS_SITE_RATES": {"kept.test": 3},
        }
    )
    assert cluster.getdict("POLITENESS_SITE_RATES") == {
        "kept.test": 3,
        "shop.test": 0.5,
        "shop:checkout": 1,
    }
    assert cluster.getfloat("POLITENESS_JITTER") == 0.5  # Scrapy randomizes slot delays too
    assert project({"DOWNLOAD_SLOTS": slots}).getdict("POLITENESS_SITE_RATES") == {}


def test_redis_pipeline_keeps_its_items_key() -> None:
    values = {
        "ITEM_PIPELINES": {"scrapy_redis.pipelines.RedisPipeline": 400},
        "REDIS_ITEMS_KEY": "x",
    }
    assert project(values).get("REDIS_ITEMS_KEY") == "x"


# -- spider classes ---------------------------------------------------------------------------


def test_scrapy_redis_spider_classes_are_refused_with_the_import_to_use() -> None:
    from scrapy_redis.spiders import RedisCrawlSpider as TheirCrawlSpider
    from scrapy_redis.spiders import RedisSpider as TheirSpider

    class Old(TheirSpider):  # type: ignore[misc]
        name = "old"

    class OldCrawl(TheirCrawlSpider):  # type: ignore[misc]
        name = "old_crawl"

    with pytest.raises(ValueError, match=r"from crawler\.spiders\.base import RedisSpider"):
        scrapy_redis_compat.check_spider_class(Old)
    with pytest.raises(ValueError, match=r"from crawler\.spiders\.base import RedisCrawlSpider"):
        scrapy_redis_compat.check_spider_class(OldCrawl)


def test_a_spider_idle_handler_of_a_redis_spider_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The classic scrapy-redis pattern (a handler that schedules work and raises
    DontCloseSpider) is not called while the spider reads seeds, and once it stops reading
    keeps the node open with nothing to read: said at open, not left to be found out."""

    class Batches(RedisSpider):
        name = "batches"

        @classmethod
        def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> Batches:
            made = super().from_crawler(crawler, *args, **kwargs)
            crawler.signals.connect(made.on_idle, signal=signals.spider_idle)
            return made

        def on_idle(self) -> None:
            return None

    made = spider(Batches)
    assert made.crawler is not None
    with caplog.at_level(logging.WARNING, logger="crawler.spiders.base"):
        made.check_idle_handlers()  # on spider_opened: every component has connected by then
    assert "spider_idle handlers of spider 'batches' (" in caplog.text
    assert "on_idle" in caplog.text and "max_idle_time" in caplog.text
    quiet = spider(MySpider)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crawler.spiders.base"):
        quiet.check_idle_handlers()
    assert "spider_idle" not in caplog.text


def test_scrapy_redis_methods_that_would_be_ignored_are_refused() -> None:
    class Polling(RedisSpider):
        name = "polling"

        def next_requests(self) -> list[Request]:
            return []

    with pytest.raises(
        ValueError, match=r"next_requests\(\), a scrapy-redis method .* make_request_from_data"
    ):
        spider(Polling)


def test_start_requests_only_spiders_are_refused() -> None:
    class Old(scrapy.Spider):
        name = "old"

        def start_requests(self) -> list[Request]:
            return [Request("http://e.com/")]

    class Both(scrapy.Spider):
        name = "both"

        async def start(self) -> Any:
            yield Request("http://e.com/")

        def start_requests(self) -> list[Request]:
            return [Request("http://e.com/")]

    with pytest.raises(ValueError, match=r"Scrapy 2\.19 never calls"):
        scrapy_redis_compat.check_spider_class(Old)
    scrapy_redis_compat.check_spider_class(Both)
    scrapy_redis_compat.check_spider_class(MySpider)


@pytest.mark.parametrize("hook", ["next_requests", "setup_redis", "spider_idle", "fetch_data"])
def test_a_scrapy_redis_hook_our_spider_never_calls_is_refused(hook: str) -> None:
    spidercls = type("Hooked", (RedisSpider,), {"name": "hooked", hook: lambda self: None})
    with pytest.raises(ValueError, match=f"defines {hook}\\(\\), a scrapy-redis method"):
        scrapy_redis_compat.check_spider_class(spidercls)
    # A plain spider may have a method of that name for its own reasons.
    scrapy_redis_compat.check_spider_class(type("Plain", (scrapy.Spider,), {hook: None}))


# -- the spider's attributes as scrapy-redis leaves them ---------------------------------------


def test_the_spider_holds_its_resolved_seed_attributes() -> None:
    """scrapy-redis's setup_redis writes the resolved values back on the spider, and
    overrides read them (its own make_request_from_data starts with
    ``bytes_to_str(data, self.redis_encoding)``): they stayed None here."""
    made = spider(settings={"REDIS_ENCODING": "latin-1", "MAX_IDLE_TIME_BEFORE_CLOSE": 7})
    assert made.redis_key == "myspider:start_urls"
    assert made.redis_encoding == "latin-1"
    assert made.redis_batch_size == 16
    assert made.max_idle_time == 7.0
    given = spider(redis_key="%(name)s:high", redis_batch_size="4")
    assert (given.redis_key, given.redis_batch_size) == ("myspider:high", 4)


def test_a_list_of_seed_keys_stops_the_start() -> None:
    """scrapy-redis's master reads several keys from a list redis_key; here it was read as the
    one key "['a', 'b']" that nobody pushes to."""

    class Keys(RedisSpider):
        name = "keys"
        redis_key = ["keys:high", "keys:low"]  # type: ignore[assignment]  # noqa: RUF012

    with pytest.raises(ValueError, match=r"redis_key=\['keys:high', 'keys:low'\] must be a string"):
        spider(Keys)


class ArgumentSpider(RedisSpider):
    name = "argument"

    def make_request_from_data(self, data: bytes) -> Any:
        if data.startswith(b"boom"):
            raise KeyError("no id")
        return super().make_request_from_data(data)


def test_the_url_argument_is_the_spider_s_attribute_too_and_a_bad_one_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``-a url=`` seeds the spider, and, as Scrapy makes every argument, is ``self.url``; an
    argument seed the spider's make_request_from_data raised on ended start() (the node read
    no Redis seed and closed with start_error): it is dropped as an invalid seed."""
    made = spider(ArgumentSpider, url="boom,http://shop.test/1", settings={"REDIS_URL": ""})
    assert made.url == "boom,http://shop.test/1"  # type: ignore[attr-defined]

    async def started() -> list[Any]:
        return [output async for output in made.start()]

    with caplog.at_level(logging.ERROR, logger="crawler.spiders.base"):
        (request,) = asyncio.run(started())
    assert request.url == "http://shop.test/1"
    assert "Invalid seed dropped (error/KeyError)" in caplog.text
    assert made.crawler.stats is not None
    assert made.crawler.stats.get_value("seeds/invalid/error/KeyError") == 1


class StartUrlsSpider(RedisSpider):
    name = "start_urls"
    start_urls = ["http://shop.test/start", "not a url"]  # noqa: RUF012 - as Scrapy types it


def test_a_redis_spider_s_start_urls_are_crawled(caplog: pytest.LogCaptureFixture) -> None:
    """scrapy-redis (Scrapy's own ``start()``) crawls a RedisSpider's ``start_urls`` besides
    its Redis seeds; ours never made them, without a word (an audit: 2 items of 4). They are
    made at start on every node (the shared dedup keeps one, as for ``-a url=``); one that is
    no URL is dropped as an invalid seed."""
    made = spider(StartUrlsSpider, settings={"REDIS_URL": ""})

    async def started() -> list[Any]:
        return [output async for output in made.start()]

    with caplog.at_level(logging.ERROR, logger="crawler.spiders.base"):
        (request,) = asyncio.run(started())
    assert request.url == "http://shop.test/start"
    # standalone as Scrapy makes them: a page linking back to one did not take it for it (an
    # audit: 4 items where plain Scrapy gave 5)
    assert request.dont_filter
    assert "Invalid seed dropped" in caplog.text
    clustered = spider(StartUrlsSpider, settings={"REDIS_URL": "redis://127.0.0.1:1/0"})

    async def first() -> Any:
        return await anext(aiter(clustered.start()))

    # made on every node: the frontier keeps one a crawl, by a fingerprint of the crawl's own
    clustered_request = asyncio.run(first())
    assert clustered_request.dont_filter
    assert clustered_request.meta == {START_URL_META: True}


class ReadsServer(RedisSpider):
    name = "reads_server"

    def parse(self, response: Any, **kwargs: Any) -> Any:
        self.server.sadd("seen", response.url)  # type: ignore[attr-defined]


class MakesItsServer(ReadsServer):
    name = "makes_its_server"

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> Any:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.server = object()  # type: ignore[attr-defined]
        return spider


def test_a_spider_reading_scrapy_redis_s_server_is_refused_at_start() -> None:
    """``self.server`` (scrapy-redis's Redis client of the spider) failed every page with a
    bare AttributeError (an audit); a spider that reads it and does not set it stops the start,
    saying what to do. One that makes its own is accepted."""
    with pytest.raises(ValueError, match=r"reads self\.server, scrapy-redis's Redis client"):
        scrapy_redis_compat.check_spider_class(ReadsServer)
    scrapy_redis_compat.check_spider_class(MakesItsServer)
