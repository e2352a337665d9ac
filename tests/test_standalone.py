"""Standalone mode: no Redis, no Kafka; items go to a JSON Lines feed."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from crawler.demo.site import Site, page_title
from crawler.middlewares import refused
from tests.cluster import logs, running_nodes, wait_for_exit
from tests.user_crawl import Reference, pipelines
from tests.user_site import UserSite

NO_SERVICES = {"REDIS_URL": "", "KAFKA_BOOTSTRAP_SERVERS": ""}


def test_standalone_crawl_writes_every_page_to_jsonl(site_500: Site, tmp_path: Path) -> None:
    feed = tmp_path / "items.jsonl"
    with running_nodes(
        1,
        workdir=tmp_path,
        env=NO_SERVICES,
        settings={"CRAWLER_STANDALONE_FEED": str(feed)},
        arguments={"url": site_500.url(0)},
    ) as nodes:
        assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)

    items = [orjson.loads(line) for line in feed.read_bytes().splitlines()]
    urls = [item["url"] for item in items]
    assert sorted(urls) == sorted(site_500.all_urls())
    titles = {item["url"]: item["title"] for item in items}
    assert titles[site_500.url(42)] == page_title(42)
    assert orjson.dumps(page_title(42)) in feed.read_bytes()  # non-ASCII kept as UTF-8
    log = (tmp_path / "node-0.log").read_text()
    assert (
        "Disabled <class 'crawler.pipelines.kafka.KafkaPipeline'>: KAFKA_BOOTSTRAP_SERVERS is empty"
        in log
    )
    assert "scrapy_redis" not in log


def test_a_stop_calls_no_errback_of_a_request_waiting_for_its_turn(tmp_path: Path) -> None:
    """At a CLOSESPIDER_* stop Scrapy fetches what its downloader holds and calls no errback;
    standalone, requests waiting for their politeness turn had their errback called with
    NotFetchedAtStop ("its lease goes back to the queue": there is none), 16 spurious items of
    26 in the feed (an audit)."""
    settings = {"CLOSESPIDER_ITEMCOUNT": "3", "POLITENESS_RATE": "4", "POLITENESS_BURST": "1"}
    with UserSite(16) as site, Reference("u_errback", site, tmp_path, settings) as reference:
        items = [orjson.loads(item) for item in reference.items()]
    assert [item for item in items if "errback" in item] == []
    assert len(items) > 3  # what was in the downloader at the stop was fetched, as in Scrapy
    assert "NotFetchedAtStop" not in reference.log.read_text()


def test_a_spider_that_could_not_open_is_no_forced_stop(tmp_path: Path) -> None:
    """A pipeline whose open_spider raises: Scrapy closes a spider it never opened, and the
    node's exit status said it was forced to stop (a review)."""
    settings = {"ITEM_PIPELINES": pipelines("FailingOpenPipeline")}
    with UserSite(4) as site, Reference("u_errback", site, tmp_path, settings) as reference:
        code = reference.process.wait(timeout=120)
    log = reference.log.read_text()
    assert "the pipeline's database does not answer" in log
    assert "stopped before its spider closed" not in log
    assert code == 1, log


def test_a_standalone_stop_waits_for_a_turn_but_not_for_a_cooldown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Standalone a stop lets a request's short wait for its turn run (Scrapy fetches what its
    downloader holds); a cooldown or Retry-After of minutes held the stop as long (a review)."""
    crawler = get_crawler(Spider)  # Scrapy's own scheduler
    monkeypatch.setattr(refused, "engine_closing", lambda _crawler: True)
    refused.not_waiting_past_stop(crawler, "politeness/stopped", 3.0, "its turn at a.test")
    with pytest.raises(refused.NotFetchedAtStop, match="waits 300s more for its turn"):
        refused.not_waiting_past_stop(crawler, "politeness/stopped", 300.0, "its turn at a.test")
