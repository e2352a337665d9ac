"""Cluster-wide politeness: the limiter's arithmetic, and 3 nodes against one limited site."""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TypeVar

import pytest
import redis
from redis.asyncio import Redis
from scrapy import Request, Spider
from scrapy.http import Response
from scrapy.settings import Settings
from scrapy.utils.conf import arglist_to_dict
from scrapy.utils.test import get_crawler

from crawler.demo.site import Site
from crawler.devservices import RedisServer
from crawler.middlewares.politeness import (
    AUTO_SLOT_META,
    ClusterRateLimitMiddleware,
    retry_after_seconds,
    site_for,
    site_of,
)
from crawler.middlewares.refused import NotFetchedAtStop
from crawler.politeness.delays import CrawlDelays
from crawler.politeness.limiter import Limiter, LocalLimiter, Penalty, Rate, RedisLimiter
from crawler.politeness.settings import PolitenessSettings
from crawler.redis_outage import OutageGuard
from settings.resolve import SETTING_PREFIX, resolve_settings
from tests.base_values import base_values
from tests.clock_steps import ClockWatch
from tests.cluster import logs, running_nodes, wait_for_exit

T = TypeVar("T")
PENALTY = Penalty(cooldown=1.0, max_cooldown=10.0, min_factor=0.1, recovery=0.5, strike_window=60)


def with_limiter(backend: str, redis_url: str, scenario: Callable[[Limiter], Awaitable[T]]) -> T:
    """Run ``scenario`` on a fresh limiter of ``backend`` (closing its Redis client)."""

    async def main() -> T:
        if backend == "local":
            return await scenario(LocalLimiter())
        client = Redis.from_url(redis_url)
        try:
            return await scenario(RedisLimiter(client, "l:%(site)s"))
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("backend", ["local", "redis"])
def test_reservations_space_requests_after_the_burst(backend: str, redis_url: str) -> None:
    async def scenario(limiter: Limiter) -> list[float]:
        return [await limiter.reserve("site:1", Rate(10.0, burst=3), PENALTY) for _ in range(6)]

    got = with_limiter(backend, redis_url, scenario)
    # 3 at once, then one every 100 ms (a few ms of slack for the calls themselves)
    assert [round(w, 1) for w in got] == [0.0, 0.0, 0.0, 0.1, 0.2, 0.3]


@pytest.mark.parametrize("backend", ["local", "redis"])
def test_a_spread_scales_the_room_a_request_leaves_after_it(backend: str, redis_url: str) -> None:
    """POLITENESS_JITTER's spreads (RANDOMIZE_DOWNLOAD_DELAY's, in the cluster): each request
    leaves its interval times its spread before the next one's slot."""

    async def scenario(limiter: Limiter) -> list[float]:
        rate = Rate(10.0)
        return [
            await limiter.reserve("site:1", rate, PENALTY, spread)
            for spread in (1.5, 0.5, 1.0, 1.0)
        ]

    got = with_limiter(backend, redis_url, scenario)
    # each a few ms less: the calls themselves take that long
    for wait, want in zip(got, [0.0, 0.15, 0.2, 0.3], strict=True):
        assert want - 0.02 <= wait <= want, got


@pytest.mark.parametrize("backend", ["local", "redis"])
def test_penalty_cools_down_then_recovers_gradually(backend: str, redis_url: str) -> None:
    async def scenario(limiter: Limiter) -> tuple[float, float, float, float]:
        first = await limiter.penalize("site:1", 0.0, PENALTY)
        second = await limiter.penalize("site:1", 3.5, PENALTY)  # Retry-After wins if longer
        wait = await limiter.reserve("site:1", Rate(10.0), PENALTY)
        spacing = await limiter.reserve("site:1", Rate(10.0), PENALTY) - wait
        return first, second, wait, spacing

    first, second, wait, spacing = with_limiter(backend, redis_url, scenario)
    assert round(first, 1) == 1.0
    assert round(second, 1) == 3.5
    assert round(wait, 1) == 3.5  # nothing before the cooldown ends
    # two penalties halved the rate twice: slots are 400 ms apart until it recovers
    assert round(spacing, 1) == 0.4


def test_retry_after_parsing() -> None:
    assert retry_after_seconds(b"7") == 7.0
    assert retry_after_seconds(None) == 0.0
    assert retry_after_seconds(b"soon") == 0.0
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= retry_after_seconds(future.encode()) <= 31


def per_second(times: list[float]) -> list[int]:
    start = times[0]
    buckets = Counter(int(t - start) for t in times)
    return [buckets[second] for second in range(max(buckets) + 1)]


@pytest.mark.slow
def test_three_nodes_share_one_rate_limit(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """3 nodes at 20 req/s for the cluster: at most 20 + burst in any second at the site. The
    limiter keeps Redis's time, the site its monotonic clock: the seconds a step of the wall
    clock touched (``tests.clock_steps``) are said and left out. A step ahead lets the requests
    booked before it go with those booked after (a CI run once counted 33, then 24, 39 and 29 in
    a second, with 20 in every second before them)."""
    rate, burst = 20, 5
    settings = {"POLITENESS_RATE": str(rate), "POLITENESS_BURST": str(burst)}
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    with (
        Site(2000) as site,
        running_nodes(
            3, workdir=tmp_path, env=env, settings={**settings, "CRAWLER_STANDALONE_FEED": ""}
        ) as nodes,
        ClockWatch() as clock,
    ):
        redis_client.lpush("pages:start_urls", site.url(0))
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and (
            not site.hit_times or time.monotonic() - site.hit_times[0] < 31
        ):
            time.sleep(0.2)
        times = list(site.hit_times)
    assert all(node.returncode is not None for node in nodes)
    assert times, logs(tmp_path)
    stepped = clock.touched_seconds(times[0], before=1, after=2)
    counted = {second: n for second, n in enumerate(per_second(times)) if 1 <= second <= 30}
    counts = [n for second, n in counted.items() if second not in stepped]
    print(f"requests per second: {list(counted.values())}; wall clock steps: {clock.steps}")
    assert len(counts) >= 20, f"the wall clock stepped {clock.steps}: too few seconds left"
    assert max(counts) <= rate + burst - 1, counted
    assert abs(statistics.mean(counts) - rate) <= rate * 0.1, counted
    for index in range(3):
        assert "'politeness/delayed'" in (tmp_path / f"node-{index}.log").read_text(), logs(
            tmp_path
        )


def test_a_429_seen_by_one_node_slows_every_node(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    settings = {
        "POLITENESS_RATE": "30",
        "POLITENESS_BURST": "1",
        "POLITENESS_COOLDOWN": "1",
        "CRAWLER_STANDALONE_FEED": "",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
    }
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    limited = {"/p/40.html": (429, {"Retry-After": "3"})}
    with (
        Site(300, answer_once=limited) as site,
        running_nodes(3, workdir=tmp_path, env=env, settings=settings) as nodes,
        ClockWatch() as clock,
    ):
        redis_client.lpush("pages:start_urls", site.url(0))
        assert wait_for_exit(nodes, timeout=180) == [0, 0, 0], logs(tmp_path)
    ((answered_at, _path, status),) = site.special_answers
    assert status == 429
    during = [t for t in site.hit_times if answered_at + 0.3 < t < answered_at + 2.9]
    # the cooldown runs on Redis's clock: a step ahead of the wall clock cuts it short
    if clock.steady_between(answered_at - 1, answered_at + 4, "the Retry-After window"):
        assert during == [], f"{len(during)} requests inside the Retry-After window"
    assert site.hits["/p/40.html"] == 2  # retried after the cooldown
    penalized = [
        index
        for index in range(3)
        if "'politeness/penalty/429': 1" in (tmp_path / f"node-{index}.log").read_text()
    ]
    assert len(penalized) == 1  # one node saw the 429 ...
    assert len(site.hits) == 300  # ... and every page was still crawled


def test_a_node_stopped_while_its_site_cools_down_stops_at_once_and_returns_its_leases(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A 429 with Retry-After: 120 cools the site; a SIGTERM then waited for every request
    sleeping out that cooldown (Scrapy's close waits for the downloads in progress), far past
    the 120 s grace of the deployment docs: they are now not fetched, their leases go back."""
    settings = {
        "POLITENESS_RATE": "20",
        "CONCURRENT_REQUESTS": "4",
        "FRONTIER_LEASE_TIMEOUT": "600",
        "CRAWLER_STANDALONE_FEED": "",
    }
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    limited = {"/p/5.html": (429, {"Retry-After": "120"})}
    with (
        Site(60, answer_once=limited) as site,
        running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        redis_client.lpush("pages:start_urls", site.url(0))
        deadline = time.monotonic() + 60
        while not site.special_answers:
            assert time.monotonic() < deadline, logs(tmp_path)
            time.sleep(0.1)
        time.sleep(2)  # the node's other requests wait out the cooldown now
        assert redis_client.zcard("{pages}:leases") > 0
        nodes[0].send_signal(signal.SIGTERM)
        assert wait_for_exit(nodes, timeout=30) == [0], logs(tmp_path)
    assert redis_client.zcard("{pages}:leases") == 0
    assert int(redis_client.get("{pages}:queue:count") or 0) > 0
    text = (tmp_path / "node-0.log").read_text()
    stopped = re.search(r"'frontier/requeued/politeness/stopped': (\d+)", text)
    assert stopped is not None, text
    assert f"; {stopped[1]} more, not fetched at the stop, went back" in text, text


def test_a_site_leaves_out_the_user_and_password_of_its_url() -> None:
    """They would be part of a Redis key for an hour and printed by ``crawler status``."""
    assert site_of("http://alice:s3cret@Shop.Test:8080/p") == "shop.test:8080"
    assert site_of("https://token@shop.test/p") == "shop.test"


def politeness(
    given: dict[str, object],
    *,
    command_line: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> PolitenessSettings:
    """The politeness settings of a node given ``given`` (``custom_settings``), ``-s`` options
    (``command_line``, parsed as ``scrapy crawl`` parses them) and the environment."""
    settings = Settings(resolve_settings(environ or {}))
    settings.setdict(given, priority="spider")
    settings.setdict(arglist_to_dict(list(command_line)), priority="cmdline")
    return PolitenessSettings.from_settings(settings)


def test_a_site_rate_applies_to_its_site_as_the_limiter_names_it() -> None:
    for url in (
        "http://127.0.0.1:18731/p",
        "http://Shop.Test/",
        "http://[::1]:8080/",
        "http://alice:s3cret@shop.test:81/",
        "http://xn--bcher-kva.de/",
    ):
        site = site_of(url)
        assert politeness({"POLITENESS_SITE_RATES": {site: 1}}).rate_for(site) == Rate(1.0), url
    # A key without a port applies to every port of its host; keys are read in lower case.
    for key, site in (("Shop.Test", "shop.test:8080"), ("[::1]", "[::1]:8080")):
        assert politeness({"POLITENESS_SITE_RATES": {key: 1}}).rate_for(site) == Rate(1.0), key


@pytest.mark.parametrize(
    ("key", "instead"),
    [
        ("http://127.0.0.1:18731/", "'127.0.0.1:18731'"),
        ("https://shop.test", "'shop.test'"),
        ("//shop.test:81", "'shop.test:81'"),
        ("shop.test/catalog", "'shop.test'"),
        ("127.0.0.1:18731/", "'127.0.0.1:18731'"),
        ("alice@shop.test", "'shop.test'"),
        (" shop.test", "'shop.test'"),
        ("shop.test:080", "'shop.test'"),
        # a site leaves out its scheme's default port: such a key matched no request (an audit)
        ("example.com:80", "'example.com'"),
        ("shop.test:443", "'shop.test'"),
        ("[::1]:80", "'[::1]'"),
        # a host:port mistyped was taken for a download_slot name, pacing nothing (an audit)
        ("localhost:80800", "host or host:port"),
        ("[::1:8080", "host or host:port"),
        ("shop.test:", "'shop.test'"),
        ("bücher.de", "'xn--bcher-kva.de'"),
        ("shop.test:99999", "host or host:port"),
        ("", "host or host:port"),
    ],
)
def test_a_site_rate_key_that_names_no_site_is_refused(key: str, instead: str) -> None:
    """Such a key matched no request: its site was crawled at the default rate, faster than
    asked. It is refused, naming the setting, the key, the value and what to write."""
    expected = rf"POLITENESS_SITE_RATES\[{re.escape(repr(key))}\]=1: .* write {re.escape(instead)}"
    with pytest.raises(ValueError, match=expected):
        politeness({"POLITENESS_SITE_RATES": {key: 1}})
    with pytest.raises(ValueError, match=expected):  # -s, as JSON
        politeness({}, command_line=[f'POLITENESS_SITE_RATES={{"{key}": 1}}'])


def test_a_slot_name_shaped_like_a_mistyped_port_is_said(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="crawler.politeness.settings"):
        politeness({"POLITENESS_SITE_RATES": {"localhost:8o80": 1, "shop:checkout": 1}})
    (said,) = [record.getMessage() for record in caplog.records]
    assert "'localhost:8o80' is no host:port" in said
    assert "only requests whose meta download_slot is 'localhost:8o80'" in said


@pytest.mark.parametrize("slot", ["shop:checkout", "API slot", "shop test"])
def test_a_site_rate_may_name_a_download_slot(slot: str) -> None:
    """The docs say POLITENESS_SITE_RATES may name a ``download_slot`` a spider gives its
    requests, and the limiter paces such a slot under its name; a name not shaped like a host
    was refused at start (an audit), leaving only the default rate for it."""
    settings = politeness({"POLITENESS_SITE_RATES": {slot: 1}})
    assert settings.rate_for(slot.lower()).per_second == 1


def test_two_site_rate_keys_for_one_site_are_refused() -> None:
    with pytest.raises(ValueError, match=r"POLITENESS_SITE_RATES: 'Shop.Test' and 'shop.test'"):
        politeness({"POLITENESS_SITE_RATES": {"Shop.Test": 1, "shop.test": 2}})


def test_a_rate_with_an_unknown_field_is_refused() -> None:
    """``{"rate": 1, "bursty": 3}`` was read as rate 1 and the default burst."""
    with pytest.raises(
        ValueError,
        match=r"POLITENESS_SITE_RATES\['127.0.0.1:18731'\]=\{'rate': 1, 'bursty': 3\}: "
        r"unknown field 'bursty'; a rate is a number or \{\"rate\": r, \"burst\": b\}",
    ):
        politeness({"POLITENESS_SITE_RATES": {"127.0.0.1:18731": {"rate": 1, "bursty": 3}}})
    with pytest.raises(ValueError, match=r"POLITENESS_RATE=\{'rate': 1, 'bursty': 3\}: unknown"):
        politeness({"POLITENESS_RATE": {"rate": 1, "bursty": 3}})


def test_the_default_rate_takes_a_json_object_on_the_command_line() -> None:
    """``-s 'POLITENESS_RATE={"rate": 2, "burst": 3}'`` was refused as not a rate, although
    the same dict in ``custom_settings`` was accepted."""
    given = '{"rate": 2, "burst": 3}'
    assert politeness({"POLITENESS_RATE": {"rate": 2, "burst": 3}}).default == Rate(2.0, 3)
    assert politeness({}, command_line=[f"POLITENESS_RATE={given}"]).default == Rate(2.0, 3)
    environ = {f"{SETTING_PREFIX}POLITENESS_RATE": f" {given}"}
    assert politeness({}, environ=environ).default == Rate(2.0, 3)
    assert politeness({}, command_line=["POLITENESS_RATE=2"]).default == Rate(2.0, 1)
    with pytest.raises(ValueError, match=r"POLITENESS_RATE='\{\"rate\": 2' is not a JSON object"):
        politeness({}, command_line=['POLITENESS_RATE={"rate": 2'])
    with pytest.raises(ValueError, match=r"POLITENESS_RATE=\{'rate': 0\}: the rate must be a"):
        politeness({}, command_line=['POLITENESS_RATE={"rate": 0}'])
    # the burst refused by its own name (it was said to be POLITENESS_RATE's)
    with pytest.raises(ValueError, match=r"POLITENESS_BURST=0 must be >= 1"):
        politeness({}, command_line=["POLITENESS_BURST=0"])


class Shell(Spider):
    name = "shell"


def test_a_wait_for_a_turn_ends_at_a_stop_only() -> None:
    """``scrapy shell`` drives an engine outside a crawl (``crawler.crawling`` stays False): a
    fetch that must wait for its site's turn waits there, as it does in a crawl; a stopping
    engine (or one closing its spider) ends the wait with the request not fetched."""
    values = base_values()
    crawler = get_crawler(Shell, {**values, "REDIS_URL": ""})
    middleware = ClusterRateLimitMiddleware.from_crawler(crawler)
    slot = SimpleNamespace(closing=None)
    engine = SimpleNamespace(_stopping=False, _slot=slot)
    crawler.engine = engine  # type: ignore[assignment]
    crawler.crawling = False  # as in scrapy shell

    async def waited(wait: float) -> float:
        began = time.monotonic()
        await middleware._wait_turn(wait, "shop.test")
        return time.monotonic() - began

    assert asyncio.run(waited(0.3)) >= 0.3
    engine._stopping = True  # ExecutionEngine.stop_async
    # standalone (no lease to give back) a wait past STANDALONE_STOP_WAIT is cut too
    with pytest.raises(NotFetchedAtStop, match="the spider closes while the request waits 30s"):
        asyncio.run(waited(30))
    engine._stopping, slot.closing = False, object()
    with pytest.raises(NotFetchedAtStop):
        asyncio.run(waited(30))


def standalone_limiter(settings: Mapping[str, str] | None = None) -> ClusterRateLimitMiddleware:
    """The limiter of a node without Redis, with the project's settings and ``settings``."""
    values = base_values()
    crawler = get_crawler(Shell, {**values, "REDIS_URL": "", **(settings or {})})
    middleware = ClusterRateLimitMiddleware.from_crawler(crawler)
    middleware._delays = CrawlDelays()  # no robots.txt middleware: no engine here
    return middleware


@pytest.mark.parametrize(("jitter", "low", "high"), [("0.5", 0.5, 1.5), ("0", 1.0, 1.0)])
def test_each_request_draws_its_spread_from_the_jitter(
    jitter: str, low: float, high: float
) -> None:
    """``POLITENESS_JITTER``: each request books its slot with a spread drawn in 1 +- it."""
    middleware = standalone_limiter({"POLITENESS_JITTER": jitter, "POLITENESS_RATE": "1000"})
    spreads: list[float] = []
    reserve = middleware.local.reserve

    async def recorded(site: str, rate: Rate, penalty: Penalty, spread: float = 1.0) -> float:
        spreads.append(spread)
        return await reserve(site, rate, penalty, spread)

    middleware.local.reserve = recorded  # type: ignore[method-assign]

    async def scenario() -> None:
        for n in range(40):
            await middleware.pace(Request(f"http://shop.test/{n}"))

    asyncio.run(scenario())
    assert all(low <= spread <= high for spread in spreads)
    assert len(set(spreads)) == (40 if low < high else 1)


def test_a_jitter_of_one_or_more_is_refused() -> None:
    with pytest.raises(ValueError, match=r"POLITENESS_JITTER=1.0 must be in \[0, 1\)"):
        standalone_limiter({"POLITENESS_JITTER": "1"})


def test_hosts_a_spider_groups_in_one_download_slot_share_one_cluster_rate() -> None:
    """Scrapy paces a ``meta['download_slot']`` as one (127.0.0.1 and localhost on one server);
    the cluster limiter paced each host:port on its own, so two nodes sent that server about
    twice the pace standalone Scrapy did (an audit: 12 requests in 6 s against 32 in 37 s),
    silently. The limiter paces a slot the spider gave as one site. Scrapy's own slot, the
    host name (also carried by a redirect to another host), is not one."""
    middleware = standalone_limiter({"POLITENESS_RATE": "2", "POLITENESS_BURST": "1"})

    def waits(*requests: Request) -> list[float]:
        async def paced() -> list[float]:
            found = []
            for request in requests:
                began = time.monotonic()
                await middleware.pace(request)
                found.append(time.monotonic() - began)
            return found

        return asyncio.run(paced())

    grouped = [
        Request(f"http://{host}:8080/p", meta={"download_slot": "server"})
        for host in ("127.0.0.1", "localhost")
    ]
    assert [site_for(request) for request in grouped] == ["server", "server"]
    first, second = waits(*grouped)
    assert first < 0.1 and second > 0.3  # one site at 2/s: the second waits for its turn
    scrapys = {AUTO_SLOT_META: True}  # reached the downloader without a slot: Scrapy's own
    redirected = Request(
        "http://other.test/p",
        meta={**scrapys, "download_slot": "first.test", "redirect_urls": ["http://first.test/a"]},
    )
    plain = Request("http://shop.test:81/p", meta={**scrapys, "download_slot": "shop.test"})
    assert [site_for(redirected), site_for(plain)] == ["other.test", "shop.test:81"]


def test_a_download_slot_named_after_one_of_its_hosts_is_one_site() -> None:
    """The docs' own example, 127.0.0.1 and localhost paced as the slot ``localhost``: the
    requests to localhost were paced as ``localhost:P`` (their slot is their host name, which
    was taken for Scrapy's own), the others as ``localhost``: twice the slot's rate at the
    server (an audit: 2.05/s for 1/s). A slot the spider gave is the spider's, whatever its
    name; only the one Scrapy gives a request that reached the downloader without one is not."""
    middleware = standalone_limiter()
    grouped = [
        Request(f"http://{host}:8080/p", meta={"download_slot": "localhost"})
        for host in ("localhost", "127.0.0.1")
    ]
    plain = Request("http://shop.test:81/p")
    for request in [*grouped, plain]:
        middleware.process_request(request)
    plain.meta["download_slot"] = "shop.test"  # as Scrapy's downloader then sets it
    assert [site_for(request) for request in [*grouped, plain]] == [
        "localhost",
        "localhost",
        "shop.test:81",
    ]


@pytest.mark.parametrize(
    ("url", "site"),
    [
        ("http://example.com:80/a", "example.com"),
        ("https://example.com:443/a", "example.com"),
        ("https://example.com:80/a", "example.com:80"),
        ("http://[::1]:80/a", "[::1]"),
    ],
)
def test_a_default_port_written_out_is_the_same_site(url: str, site: str) -> None:
    """``http://example.com:80/a`` and ``http://example.com/a`` were two sites, each at the
    full rate (an audit); Scrapy paces them as one host."""
    assert site_for(Request(url)) == site


def test_a_cached_429_pauses_no_site() -> None:
    """With HTTPCACHE_ENABLED a 429 or 503 from the cache started a cluster-wide cooldown, as
    if the site had answered it again: a crawl of 3 s took 27 (an audit)."""
    middleware = standalone_limiter()
    request = Request("http://cached.test/limited")
    cached = Response(request.url, status=429, request=request, flags=["cached"])
    asyncio.run(middleware.process_response(request, cached))
    assert not [key for key in middleware.stats.get_stats() if key.startswith("politeness/")]
    answered = Response(request.url, status=429, request=request)
    asyncio.run(middleware.process_response(request, answered))
    assert middleware.stats.get_value("politeness/penalty/429") == 1


def test_a_cooldown_read_at_maxmemory_does_not_say_redis_is_back(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis at ``maxmemory`` answers reads and refuses writes (``-OOM``): a node's politeness
    said "Redis is back" each time a site's cooldown check (a read) went through while a
    reservation (a write) waited for Redis, three times in its first second (an experiment).
    Only the write that met the outage ends it, once."""
    admin = redis.Redis.from_url(own_redis.url)
    middleware = standalone_limiter()

    async def scenario() -> None:
        client = Redis.from_url(own_redis.url)
        middleware.shared = RedisLimiter(client, "l:%(site)s")
        middleware.guard = OutageGuard("politeness", lambda reason: None, max_delay=0.05)
        admin.config_set("maxmemory", "1")
        reserve: asyncio.Future[float] | None = None
        try:
            reserve = asyncio.ensure_future(
                middleware._limited("reserve", "shop.test", Rate(10.0), PENALTY)
            )
            await asyncio.sleep(0.3)  # it met -OOM and retries
            assert not reserve.done()
            assert await middleware._limited("cooling", "shop.test") == 0
            await asyncio.sleep(0.1)
            assert "Redis is back" not in caplog.text
        finally:
            admin.config_set("maxmemory", "0")
            if reserve is not None:
                assert await reserve == 0
            await client.aclose()

    try:
        with caplog.at_level(logging.WARNING, logger="crawler.redis_outage"):
            asyncio.run(scenario())
    finally:
        admin.close()
    said = [r.getMessage() for r in caplog.records]
    assert [m.split(":")[1].split(" after")[0] for m in said if "pausing" in m or "back" in m] == [
        " Redis unavailable (oom); pausing and retrying",
        " Redis is back",
    ], said
