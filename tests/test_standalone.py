"""Standalone mode: no Redis, no Kafka; items go to a JSON Lines feed."""

from __future__ import annotations

from pathlib import Path

import orjson

from crawler.demo.site import Site, page_title
from tests.cluster import logs, running_nodes, wait_for_exit

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
