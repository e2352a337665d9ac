"""Scrapy's commands that look at pages (``fetch``, ``view``, ``parse``, ``shell``, ``check``,
``bench``) run standalone with ``REDIS_URL`` set: they print what standalone Scrapy prints and
leave the frontier alone (they used to print nothing, and take the spider's start claim)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from crawler.demo.nodes import REPO_ROOT
from tests.user_site import UserSite

SPIDERS = "SPIDER_MODULES=tests.userproject.spiders"


@pytest.fixture(scope="module")
def site() -> Iterator[UserSite]:
    with UserSite(8) as running:
        yield running


def scrapy(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    result = subprocess.run(
        [sys.executable, "-m", "scrapy", *args, "-s", SPIDERS],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def frontier_keys(redis_url: str) -> list[bytes]:
    client = redis.Redis.from_url(redis_url)
    try:
        return [key for key in client.scan_iter("*u_start_urls*")] + [
            key for key in client.scan_iter("{default}*")
        ]
    finally:
        client.close()


def test_fetch_and_parse_print_the_page_and_its_items(site: UserSite, redis_url: str) -> None:
    page = site.url(3)
    fetched = scrapy(redis_url, "fetch", "--nolog", "--spider", "u_start_urls", page)
    assert "<title>Page 3</title>" in fetched.stdout
    assert "<title>Page 3</title>" in scrapy(redis_url, "fetch", "--nolog", page).stdout
    parsed = scrapy(redis_url, "parse", "--nolog", "--spider", "u_start_urls", page)
    assert "'title': 'Page 3'" in parsed.stdout and page in parsed.stdout
    assert frontier_keys(redis_url) == []


def test_shell_runs_its_code_on_the_page_and_writes_no_feed(
    site: UserSite, redis_url: str, tmp_path: Path
) -> None:
    feed = tmp_path / "feed.jsonl"
    code = "response.css('h1::text').get()"
    shell = scrapy(
        redis_url, "shell", site.url(2), "-c", code, "-s", f"CRAWLER_STANDALONE_FEED={feed}"
    )
    assert shell.stdout.strip() == "Page 2"
    assert frontier_keys(redis_url) == []
    assert "scrapy shell runs standalone: REDIS_URL and KAFKA_BOOTSTRAP_SERVERS" in shell.stderr
    assert not feed.exists()
