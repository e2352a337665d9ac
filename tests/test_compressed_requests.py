"""``FRONTIER_COMPRESS``: request bodies stored compressed by default, as JSON when it is off,
and every node reads both (bodies stored before it, nodes with the other setting)."""

from __future__ import annotations

import functools
import re
import uuid
from pathlib import Path

import orjson
import pytest
import redis
from scrapy import Request
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler.demo.site import Site
from crawler.frontier import codec
from crawler.frontier.acks import LeaseState
from crawler.frontier.client import Lease
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.request_store import RequestStore, failure_record
from crawler.frontier.settings import FrontierSettings
from crawler.spiders.pages import PagesSpider
from settings import base
from tests.cluster import crawl_site_once, logs
from tests.frontier_state import queue_entries
from tests.one_node import crawl


def store(compress: bool) -> RequestStore:
    return RequestStore(get_crawler(PagesSpider), PagesSpider(), compress=compress)


def test_requests_are_stored_compressed_unless_the_setting_is_off() -> None:
    spider = PagesSpider()
    request = Request(
        "https://user:secret@www.example.com/a?b=1",
        callback=spider.parse,
        meta={"depth": 2},
        headers={"Referer": "https://www.example.com/"},
    )
    compressed = store(True).encode(request, "")
    as_json = store(False).encode(request, "")
    assert compressed.body.startswith(codec.COMPRESSED)
    assert as_json.body.startswith(b"{") and orjson.loads(as_json.body)["url"] == request.url
    assert len(compressed.body) < len(as_json.body)
    for body in (compressed.body, as_json.body):  # either store reads either form
        for reader in (store(True), store(False)):
            again = reader.decode(Lease("l-1", body))
            assert again.to_dict(spider=spider) == request.to_dict(spider=spider)
    # a failure record holds the request as JSON, credentials masked, however it was stored
    state = LeaseState("l-1", compressed.body, failure="http_error")
    record = orjson.loads(failure_record(state, "node-a"))
    assert record["request"]["url"] == "https://user:***@www.example.com/a?b=1"


def test_the_setting_reads_as_given_with_s() -> None:
    values = Settings(vars(base))
    values.set("REDIS_URL", "redis://localhost:6379/0")
    assert FrontierSettings.from_settings(values).compress is True
    values.set("FRONTIER_COMPRESS", "False", priority="cmdline")
    assert FrontierSettings.from_settings(values).compress is False
    assert FrontierSettings.from_settings(values).backlog.compress is False


@pytest.mark.parametrize("compress", ["True", "False"])
def test_a_node_stores_what_it_queues_as_its_setting_says(
    compress: str, redis_url: str, tmp_path: Path
) -> None:
    """A node stopped after 3 pages leaves the links it found queued: compressed by default,
    JSON with ``-s FRONTIER_COMPRESS=False``."""
    with Site(40) as site:
        run = crawl(
            "pages",
            [site.url(0)],
            workdir=tmp_path,
            redis_url=redis_url,
            settings={"FRONTIER_COMPRESS": compress, "CLOSESPIDER_PAGECOUNT": "3"},
        )
    client = redis.Redis.from_url(redis_url)
    try:
        bodies = [body for _, body in queue_entries(client, FrontierKeys.for_spider("pages"))]
    finally:
        client.close()
    assert run.leftover > 0 and len(bodies) == run.leftover
    assert {body[:1] for body in bodies} == {codec.COMPRESSED if compress == "True" else b"{"}
    assert all(codec.loads(body)["url"].startswith(site.base_url) for body in bodies)


def test_nodes_storing_either_form_crawl_one_site_together(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """One node compresses what it queues, the other does not: each leases the other's
    requests from the shared queue, and every page is fetched exactly once."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "CRAWLER_STANDALONE_FEED": "",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
        "KAFKA_TOPIC_TEMPLATE": f"items-{uuid.uuid4().hex[:8]}-{{spider}}",
    }
    with Site(120, delay=0.2) as site:  # slow enough that one node cannot take it all
        seed = functools.partial(redis_client.lpush, "pages:start_urls")
        node_logs = crawl_site_once(
            site,
            seed,
            nodes=2,
            workdir=tmp_path,
            env=env,
            settings=settings,
            per_node=[{}, {"FRONTIER_COMPRESS": "False"}],
        )
    fetched = [int(n) for n in re.findall(r"'downloader/response_count': (\d+)", node_logs)]
    assert len(fetched) == 2 and min(fetched) > 0, logs(tmp_path)
    assert "cannot be decoded" not in node_logs
