"""The prefetch buffer's refills ride on the turn's write when one is coming."""

from __future__ import annotations

from pathlib import Path

from crawler.demo.site import Site
from tests.one_node import crawl


def test_refills_go_with_the_turns_writes_and_every_page_is_crawled_once(
    redis_url: str, tmp_path: Path
) -> None:
    with Site(120) as site:
        run = crawl("pages", [site.url(0)], workdir=tmp_path, redis_url=redis_url, timeout=90)
    urls = [str(item["url"]) for item in run.items]
    assert len(urls) == len(set(urls)) == 120
    assert run.leftover == 0
    carried = run.stat("frontier/lease_calls/with_write")
    alone = run.stat("frontier/lease_calls/alone")
    assert carried > 0 and alone > 0  # the first lease, and those after an idle moment, go alone
    assert run.stat("frontier/leased") == 120
