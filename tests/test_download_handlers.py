"""A project's own DOWNLOAD_HANDLERS fetch its pages, beneath the node's download handler (which
paces requests and renders browser requests), as Scrapy runs them: the deprecated Deferred API
with a warning, and one that fails to build leaves only its scheme unsupported."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from crawler.demo.site import Site
from tests.cluster import running_nodes, wait_for_exit

SETTINGS = {
    "SPIDER_MODULES": "crawler.spiders,tests.spiders",
    "METRICS_ENABLED": "False",
    "MAX_IDLE_TIME_BEFORE_CLOSE": "1",
}
HANDLERS = "tests.spiders.handler_mark"


def run(mode: str, redis_url: str, workdir: Path, **settings: str) -> tuple[int | None, str, Path]:
    env = {"REDIS_URL": redis_url if mode == "cluster" else "", "KAFKA_BOOTSTRAP_SERVERS": ""}
    feed = workdir / "items.jsonl"
    with (
        Site(3) as site,
        running_nodes(
            1,
            workdir=workdir,
            env=env,
            settings={**SETTINGS, "CRAWLER_STANDALONE_FEED": str(feed), **settings},
            spider="handler_mark",
            arguments={"site": site.base_url},
        ) as nodes,
    ):
        (code,) = wait_for_exit(nodes, timeout=60)
    return code, (workdir / "node-0.log").read_text(), feed


@pytest.mark.parametrize("mode", ["standalone", "cluster"])
@pytest.mark.parametrize("browser", ["True", "False"])
def test_a_projects_own_handler_fetches_its_pages(
    mode: str, browser: str, redis_url: str, tmp_path: Path
) -> None:
    given = json.dumps({"http": f"{HANDLERS}.MarkingHandler"})
    code, log, feed = run(
        mode, redis_url, tmp_path, DOWNLOAD_HANDLERS=given, BROWSER_ENABLED=browser
    )
    assert code == 0, log
    items = [orjson.loads(line) for line in feed.read_text().splitlines()]
    assert len(items) == 3, log
    assert {item["fetched_by"] for item in items} == {"MarkingHandler"}


def test_a_handler_on_the_deprecated_deferred_api_runs_with_a_warning(
    redis_url: str, tmp_path: Path
) -> None:
    """As Scrapy 2.19 runs it."""
    given = json.dumps({"http": f"{HANDLERS}.DeferredHandler"})
    code, log, feed = run("cluster", redis_url, tmp_path, DOWNLOAD_HANDLERS=given)
    assert code == 0, log
    items = [orjson.loads(line) for line in feed.read_text().splitlines()]
    assert {item["fetched_by"] for item in items} == {"DeferredHandler"}, log
    assert "deprecated Deferred API" in log


def test_a_handler_that_fails_to_build_leaves_only_its_scheme_unsupported(
    redis_url: str, tmp_path: Path
) -> None:
    """As in Scrapy: http pages are still fetched when the ftp handler cannot be built."""
    given = json.dumps({"ftp": f"{HANDLERS}.BrokenHandler"})
    code, log, feed = run("cluster", redis_url, tmp_path, DOWNLOAD_HANDLERS=given)
    assert code == 0, log
    assert len(feed.read_text().splitlines()) == 3, log
    assert 'for scheme "ftp"' in log and "needs a credentials file" in log
