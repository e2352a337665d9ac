"""robots.txt is fetched once for the whole cluster and its Crawl-delay binds every node."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
import redis
from scrapy import Spider
from scrapy.utils.test import get_crawler

from crawler.demo.site import Site
from crawler.middlewares.robots import SharedRobotsTxtMiddleware
from tests.base_values import base_values
from tests.clock_steps import ClockWatch
from tests.cluster import logs, running_nodes, wait_for_exit

ROBOTS = "User-agent: *\nCrawl-delay: 0.1\nDisallow: /p/7.html\n"
JITTER = 0.5  # seconds: how much later than another a request may reach the site


def most_within(times: list[float], width: float) -> int:
    """The most of ``times`` (sorted) that any window ``width`` seconds wide holds."""
    first, most = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= width:
            first += 1
        most = max(most, last - first + 1)
    return most


def test_robots_txt_is_shared_and_its_crawl_delay_binds_the_cluster(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "ROBOTSTXT_OBEY": "True",
        "CRAWLER_STANDALONE_FEED": "",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
        # Small nodes, so that neither can lease the whole (narrow) frontier alone.
        "CONCURRENT_REQUESTS": "2",
        "FRONTIER_PREFETCH": "1",
    }
    with (
        Site(60, robots=ROBOTS) as site,
        running_nodes(2, workdir=tmp_path, env=env, settings=settings) as nodes,
        ClockWatch() as clock,
    ):
        redis_client.lpush("pages:start_urls", site.url(0))
        assert wait_for_exit(nodes, timeout=180) == [0, 0], logs(tmp_path)
    assert site.hits["/robots.txt"] == 1  # one node fetched it, the other used the cache
    assert "/p/7.html" not in site.hits
    assert redis_client.get(f"robots:{{{site.base_url.split('//')[1]}}}") == ROBOTS.encode()
    # Crawl-delay 0.1 s: 10 requests a second. The site sees them a trip after they may go,
    # and on a loaded machine trips differ by up to JITTER (a stall of the site's thread lets
    # a few arrive together, 14 in one second once), so a second may hold those of its own and
    # of the JITTER before it; and the whole crawl cannot be quicker than its delays.
    # The delays run on Redis's clock: a step ahead of the wall clock (tests.clock_steps) cuts
    # them short.
    times = sorted(site.hit_times)[1:]  # robots.txt itself goes before any delay
    if clock.steady_between(times[0] - 1, times[-1] + 1, "the crawl delay"):
        assert most_within(times, 1.0) <= 10 * (1 + JITTER) + 1, times
        assert times[-1] - times[0] >= (len(times) - 1) / 10 - JITTER, times
    text = "".join((tmp_path / f"node-{i}.log").read_text() for i in range(2))
    assert "asks for a crawl delay of 0.1s" in text
    assert "'robotstxt/shared_hit': 1" in text
    # the page robots.txt forbids is failed with Scrapy's own word for it, not as a download
    # error (`download/IgnoreRequest`, which `crawler failed retry` would refuse again: an audit)
    (record,) = [orjson.loads(raw) for raw in redis_client.hvals("{pages}:failed")]
    assert (record["reason"], record["error"]) == ("robotstxt/forbidden", "Forbidden by robots.txt")


@pytest.mark.parametrize("cluster", [True, False], ids=["cluster", "standalone"])
def test_requests_that_wait_for_robots_txt_together_are_all_checked(
    cluster: bool, redis_url: str, tmp_path: Path
) -> None:
    """Every request that arrives while robots.txt is being fetched gets its rules (Scrapy
    2.19's own middleware gave the parser to the first waiter and None, "allowed", to the
    others)."""
    env = {"REDIS_URL": redis_url if cluster else "", "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "SPIDER_MODULES": "tests.spiders",
        "CRAWLER_STANDALONE_FEED": str(tmp_path / "items.jsonl"),
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
        "POLITENESS_ENABLED": "False",
    }
    with Site(20, robots="User-agent: *\nDisallow: /p/1\n", delay=0.3) as site:
        arguments = {"site": site.base_url}
        with running_nodes(
            1,
            workdir=tmp_path,
            env=env,
            settings=settings,
            spider="robots_burst",
            arguments=arguments,
        ) as nodes:
            assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)
        forbidden = sorted(path for path in site.hits if path.startswith("/p/1"))
        assert forbidden == []
        assert site.hits["/p/0.html"] == 1 and site.hits["/p/2.html"] == 1


class Shop(Spider):
    name = "shop"


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("robots:shared", "must hold %\\(site\\)s"),  # every site would share one robots.txt
        ("robots:%(host)s", "must hold %\\(site\\)s"),  # a KeyError at each request, before
        ("robots:%(site)s:%d", "is not a valid template"),
    ],
)
def test_a_cache_key_without_the_site_is_refused_at_start(key: str, said: str) -> None:
    values = base_values()
    crawler = get_crawler(Shop, {**values, "ROBOTSTXT_OBEY": True, "ROBOTSTXT_CACHE_KEY": key})
    with pytest.raises(ValueError, match=f"ROBOTSTXT_CACHE_KEY={re.escape(repr(key))} {said}"):
        SharedRobotsTxtMiddleware.from_crawler(crawler)
