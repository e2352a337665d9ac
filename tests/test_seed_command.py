"""``crawler seed`` reads a seed as the spider's nodes do: one its ``make_request_from_data``
makes no request of (``None``, an empty list) is skipped, as scrapy-redis and the nodes skip it,
each saying so; seeds are written in the spider's encoding."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from scrapy import Request
from scrapy.utils.test import get_crawler

from crawler.cli.seed import check, describe, print_reports, to_push, unread_warning
from crawler.cli.seed_check import Outcome, SeedChecker, SeedReport
from crawler.spiders.base import RedisSpider
from crawler.spiders.pages import PagesSpider
from tests.base_values import base_values
from tests.cli_process import crawler_process, ok
from tests.cluster import running_nodes

SETTINGS = base_values()


class Picky(RedisSpider):
    name = "picky_seeds"

    def make_request_from_data(self, data: bytes) -> Any:
        if data.startswith(b"skip"):
            return None if data == b"skip-none" else []
        return super().make_request_from_data(data)


def test_crawler_seed_reports_a_skipped_seed_and_does_not_push_it(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """It was rejected as invalid (no_request), a reason no doc gave, and the command exited 1
    while a node takes such a seed and does nothing, as scrapy-redis does."""
    checker = SeedChecker(Picky, SETTINGS, redis_url)
    reports = check(checker, redis_client, ["skip-none", "skip-empty", "http://shop.test/1"])
    assert [report.outcome for report in reports] == [Outcome.SKIPPED, Outcome.SKIPPED, Outcome.NEW]
    assert to_push(reports) == [b"http://shop.test/1"]
    said = describe(reports[0])
    assert said.startswith("skipped: skip-none: ")
    assert "makes no request of it" in said
    assert reports[0].as_json() == {"seed": "skip-none", "outcome": "skipped"}


def test_a_node_counts_a_seed_it_skips(caplog: pytest.LogCaptureFixture) -> None:
    crawler = get_crawler(Picky, {**SETTINGS, "REDIS_URL": ""})
    spider = Picky.from_crawler(crawler)
    crawler.spider = spider
    assert crawler.stats is not None
    with caplog.at_level(logging.DEBUG, logger="crawler.spiders.base"):
        made = asyncio.run(spider._accept(None, b"skip-none"))  # type: ignore[arg-type]
    assert made == []
    assert crawler.stats.get_value("seeds/skipped") == 1
    assert "make_request_from_data made no request of seed b'skip-none'" in caplog.text
    (request,) = asyncio.run(spider._accept(None, b"http://shop.test/1"))  # type: ignore[arg-type]
    assert isinstance(request, Request)
    assert crawler.stats.get_value("seeds/skipped") == 1


class Latin(RedisSpider):
    name = "latin_seeds"
    redis_encoding = "latin-1"


def test_crawler_seed_writes_seeds_in_the_spider_s_encoding(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The command checked and pushed UTF-8 whatever REDIS_ENCODING said: a node reading
    latin-1 then fetched /echo?q=caf%C3%83%C2%A9 for café. A seed that encoding cannot
    write is invalid (not pushed)."""
    checker = SeedChecker(Latin, SETTINGS, redis_url)
    reports = check(checker, redis_client, ["http://shop.test/?q=café", "http://shop.test/€"])
    assert [report.outcome for report in reports] == [Outcome.NEW, Outcome.INVALID]
    assert reports[0].urls == ["http://shop.test/?q=caf%C3%A9"]  # as the node makes it
    assert reports[1].reason == "encoding"
    assert "latin-1" in reports[1].error
    assert to_push(reports) == ["http://shop.test/?q=café".encode("latin-1")]


def test_crawler_seed_says_a_url_too_long_for_the_spider_is_invalid(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The nodes reject a seed whose URL Scrapy's UrlLengthMiddleware would drop; the command
    said `new:` and pushed it (a review). Without the middleware (URLLENGTH_LIMIT=0) it goes."""
    long_url = f"http://shop.test/?q={'x' * 3000}"
    reports = check(SeedChecker(Picky, SETTINGS, redis_url), redis_client, [long_url])
    assert [(report.outcome, report.reason) for report in reports] == [
        (Outcome.INVALID, "url_too_long")
    ]
    assert "more than URLLENGTH_LIMIT=2083" in reports[0].error
    unlimited = SeedChecker(Picky, {**SETTINGS, "URLLENGTH_LIMIT": 0}, redis_url)
    assert [report.outcome for report in check(unlimited, redis_client, [long_url])] == [
        Outcome.NEW
    ]


def test_crawler_seed_says_a_seed_the_frontier_cannot_store_is_invalid(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A seed whose meta nests deeper than JSON stores was pushed (`new:`), and the node that
    took it logged an ERROR and recorded it nowhere (an audit)."""
    deep = b'{"url": "http://shop.test/", "meta": {"deep": ' + b"[" * 300 + b"]" * 300 + b"}}"
    reports = check(SeedChecker(Picky, SETTINGS, redis_url), redis_client, [deep.decode()])
    assert [(report.outcome, report.reason) for report in reports] == [
        (Outcome.INVALID, "unstorable")
    ]
    assert "cannot be stored in Redis" in reports[0].error


def _live_with_seed_key(client: redis.Redis, takers: str, timeout: float = 30) -> None:
    """Wait until a node beats in ``pages``' frontier and reads seeds (``takers`` holds it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.zcard("{pages}:nodes") and client.hlen(takers):
            return
        time.sleep(0.2)
    raise AssertionError("the node did not start reading seeds")


@pytest.mark.parametrize(
    ("node_seed_key", "warned"), [("alt:%(name)s", True), ("", False)], ids=["other", "same"]
)
def test_seeds_pushed_where_no_live_node_reads_are_warned_about(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path, node_seed_key: str, warned: bool
) -> None:
    """Nodes started with -s SEEDS_KEY=alt:%(name)s: `crawler seed pages URL` said "Pushed 1
    seeds to pages:start_urls", exit 0, and no node ever read them."""
    own = {"SEEDS_KEY": node_seed_key} if node_seed_key else {}
    takers = "{alt:pages}:takers" if node_seed_key else "{pages:start_urls}:takers"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    with running_nodes(1, workdir=tmp_path, env=env, settings=own):
        _live_with_seed_key(redis_client, takers)
        checker = SeedChecker(PagesSpider, SETTINGS, redis_url)
        warning = unread_warning(redis_client, "pages", checker.seed_settings)
    if warned:
        assert warning is not None
        assert "no live node reads seeds from pages:start_urls" in warning
        assert "node-0" in warning and "CRAWLER_SETTING_SEEDS_KEY" in warning
    else:
        assert warning is None


@pytest.mark.parametrize("named_by", ["SCRAPY_SETTINGS_MODULE", "scrapy.cfg"])
def test_the_commands_read_the_settings_module_the_nodes_read(
    redis_url: str, redis_client: redis.Redis, other_redis_url: str, tmp_path: Path, named_by: str
) -> None:
    """A project of its own (``SCRAPY_SETTINGS_MODULE``, beginning ``from settings import *``
    as the migration guide says) sets Redis and the seed key's type: the nodes read them, the
    ``crawler`` commands read only this project's settings. ``crawler seed`` pushed into
    another Redis database, as a list the nodes refused, and ``crawler status`` said NOT
    STARTED while a node ran (an audit). A scrapy-redis project names it in its scrapy.cfg,
    as `scrapy crawl` reads it: the commands read only the variable, and the seeds went to a
    list no node read (another audit)."""
    database = other_redis_url  # the module's, over the environment's (redis_client's)
    package = tmp_path / "ownproject"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(
        "from settings import *  # noqa: F403\n"
        f"REDIS_URL = {database!r}\n"
        "REDIS_START_URLS_AS_SET = True\n"
    )
    env = {"REDIS_URL": redis_url}
    if named_by == "scrapy.cfg":  # in a folder of the project, as `scrapy crawl` may be run
        (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = ownproject.settings\n")
        (tmp_path / "docs").mkdir()  # not the project's folder: its module is found by the cfg
        ok(crawler_process("seed", "pages", "http://own.test/", env=env, cwd=tmp_path / "docs"))
    else:
        env |= {
            "SCRAPY_SETTINGS_MODULE": "ownproject.settings",
            "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        ok(crawler_process("seed", "pages", "http://own.test/", env=env))
    own = redis.Redis.from_url(database)
    try:
        assert own.type("pages:start_urls") == b"set"
        assert own.smembers("pages:start_urls") == {b"http://own.test/"}
    finally:
        own.close()
    assert not redis_client.exists("pages:start_urls")


def test_every_invalid_seed_is_listed_and_others_are_summed_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An audit: 20,000 seeds from a file listed 100 of each outcome, so rejects past the
    100th were not named, though they are not pushed anywhere an operator could find them.
    New and seen seeds past 100 are summed up; every invalid one is listed."""
    reports = [SeedReport(f"http://h/{n}", Outcome.NEW) for n in range(150)]
    reports += [SeedReport(f"bad{n}", Outcome.INVALID, reason="scheme") for n in range(150)]
    print_reports(reports)
    out = capsys.readouterr().out
    assert "... and 50 more new seeds" in out
    assert "invalid (scheme): 'bad149'" in out and "more invalid" not in out
