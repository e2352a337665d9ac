"""A project's own DOWNLOAD_HANDLERS fetch its pages, beneath the node's download handler (which
paces requests and renders browser requests), as Scrapy runs them: the deprecated Deferred API
with a warning, and one that fails to build leaves only its scheme unsupported."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from pathlib import Path

import orjson
import pytest
from scrapy import Request
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler.addon import ClusterAddon
from crawler.demo.site import Site
from crawler.download_handler import BrowserMissing, NodeDownloadHandler
from settings.resolve import resolve_settings
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


@pytest.mark.parametrize(
    ("given", "fetched_by", "said"),
    [
        # as Scrapy 2.19 runs it
        ({"http": "DeferredHandler"}, "DeferredHandler", ["deprecated Deferred API"]),
        # as in Scrapy: http pages are still fetched when the ftp handler cannot be built
        ({"ftp": "BrokenHandler"}, "-", ['for scheme "ftp"', "needs a credentials file"]),
    ],
    ids=["deprecated_deferred_api", "fails_to_build"],
)
def test_a_handler_scrapy_runs_with_a_warning_or_an_error_is_run_so(
    given: dict[str, str], fetched_by: str, said: list[str], redis_url: str, tmp_path: Path
) -> None:
    handlers = json.dumps({scheme: f"{HANDLERS}.{name}" for scheme, name in given.items()})
    code, log, feed = run("cluster", redis_url, tmp_path, DOWNLOAD_HANDLERS=handlers)
    assert code == 0, log
    items = [orjson.loads(line) for line in feed.read_text().splitlines()]
    assert len(items) == 3, log
    assert {item["fetched_by"] for item in items} == {fetched_by}, log
    for text in said:
        assert text in log


def browser_settings(
    values: dict[str, object], cmdline: dict[str, object] | None = None
) -> Settings:
    """A node's settings once the add-on has set scrapy-playwright's from BROWSER_*."""
    settings = Settings(resolve_settings({}))
    settings.setdict(values, priority="project")
    settings.setdict(cmdline or {}, priority="cmdline")
    ClusterAddon().update_settings(settings)
    return settings


@pytest.mark.parametrize(
    ("values", "cmdline", "pages", "said"),
    [
        ({}, {}, 2, ""),
        (
            {"PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 1},
            {},
            1,
            "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT=1 is used, not BROWSER_MAX_PAGES=2",
        ),
        (
            {"PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 1},
            {"BROWSER_MAX_PAGES": 5},
            5,
            "BROWSER_MAX_PAGES=5 replaces PLAYWRIGHT_MAX_PAGES_PER_CONTEXT=1",
        ),
        (
            {},
            {"PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 3},
            3,
            "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT=3 is used",
        ),
        ({"PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 2}, {}, 2, ""),
    ],
    ids=[
        "ours",
        "project_s_own",
        "ours_from_the_command_line",
        "own_from_the_command_line",
        "same",
    ],
)
def test_scrapy_playwright_s_page_limit_given_beside_ours_is_never_silently_ignored(
    values: dict[str, object],
    cmdline: dict[str, object],
    pages: int,
    said: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A project's PLAYWRIGHT_MAX_PAGES_PER_CONTEXT silently beat BROWSER_MAX_PAGES, even one
    given with -s (an audit): the one given at the higher priority is used, and a difference
    is said."""
    with caplog.at_level(logging.WARNING, logger="crawler.browser_settings"):
        settings = browser_settings(values, cmdline)
    assert settings.getint("PLAYWRIGHT_MAX_PAGES_PER_CONTEXT") == pages
    assert said in caplog.text
    if not said:
        assert "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT" not in caplog.text
    contexts = browser_settings({"PLAYWRIGHT_MAX_CONTEXTS": 4}, {"BROWSER_MAX_CONTEXTS": 2})
    assert contexts.getint("PLAYWRIGHT_MAX_CONTEXTS") == 2


@pytest.mark.parametrize(
    ("values", "refusal"),
    [
        (
            {"PLAYWRIGHT_BROWSER_TYPE": "firefox"},
            "PLAYWRIGHT_BROWSER_TYPE='firefox': nodes render with Chromium",
        ),
        (
            {
                "BROWSER_ENABLED": False,
                "DOWNLOAD_HANDLERS": {
                    "https": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
                },
            },
            "BROWSER_ENABLED=False, but DOWNLOAD_HANDLERS names scrapy-playwright's handler "
            "for https",
        ),
    ],
    ids=["firefox", "browser_off_with_scrapy_playwright_s_handler"],
)
def test_browser_settings_that_cannot_work_are_refused_at_start(
    values: dict[str, object], refusal: str
) -> None:
    """Both were silently ignored (an audit): Firefox was launched with the Chromium binary
    (every page failed, "Running as root without --no-sandbox"), and scrapy-playwright's own
    handler rendered every page with the browser off."""
    with pytest.raises(ValueError, match=re.escape(refusal)):
        browser_settings(values)
    for given in ("chromium", "Chromium"):  # scrapy-playwright takes the name as given
        chosen = browser_settings({"PLAYWRIGHT_BROWSER_TYPE": given})["PLAYWRIGHT_BROWSER_TYPE"]
        assert chosen == "chromium"


def test_the_browser_settings_keep_what_scrapy_playwright_users_give() -> None:
    """A spider naming two browser contexts waited for ever for the second one (the add-on
    capped contexts at 1, scrapy-playwright's are unlimited); a project's own launch options
    replaced the Chromium path instead of being merged with it (every page failed)."""
    default = browser_settings({})
    assert "PLAYWRIGHT_MAX_CONTEXTS" not in default or default["PLAYWRIGHT_MAX_CONTEXTS"] is None
    assert browser_settings({"BROWSER_MAX_CONTEXTS": 3})["PLAYWRIGHT_MAX_CONTEXTS"] == 3
    own = browser_settings({"PLAYWRIGHT_LAUNCH_OPTIONS": {"headless": False, "args": ["--x"]}})
    assert own.getdict("PLAYWRIGHT_LAUNCH_OPTIONS") == {
        "executable_path": "/usr/bin/chromium",
        "headless": False,  # yours win
        "args": ["--x"],
    }


def test_a_persistent_context_is_launched_with_the_node_s_chromium() -> None:
    """scrapy-playwright launches a context with a ``user_data_dir`` on its own, from the
    context's arguments, not PLAYWRIGHT_LAUNCH_OPTIONS: every browser request failed with
    "Executable doesn't exist at /root/.cache/ms-playwright/..." (an audit), where standalone
    scrapy-playwright went on with its default context."""
    contexts = {
        "persist": {"user_data_dir": "/tmp/profile"},
        "own": {"user_data_dir": "/tmp/other", "executable_path": "/opt/chrome", "headless": False},
        "plain": {"user_agent": "x"},
    }
    given = browser_settings({"PLAYWRIGHT_CONTEXTS": contexts}).getdict("PLAYWRIGHT_CONTEXTS")
    assert given == {
        "persist": {
            "user_data_dir": "/tmp/profile",
            "executable_path": "/usr/bin/chromium",
            "headless": True,
        },
        "own": contexts["own"],  # yours win
        "plain": {"user_agent": "x"},  # launched by the browser, with its launch options
    }


def test_a_missing_chromium_is_named_at_start_and_no_browser_is_started(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="crawler.browser_settings"):
        browser_settings({"BROWSER_EXECUTABLE": "/nonexistent/chromium"})
    assert "BROWSER_EXECUTABLE='/nonexistent/chromium' is not an executable file" in caplog.text
    launch = {"executable_path": "/nonexistent/chromium"}  # as the add-on sets it
    crawler = get_crawler(settings_dict={"PLAYWRIGHT_LAUNCH_OPTIONS": launch})
    handler = NodeDownloadHandler.from_crawler(crawler)
    with pytest.raises(BrowserMissing, match="BROWSER_EXECUTABLE='/nonexistent/chromium'"):
        asyncio.run(handler.start_browser())
    assert crawler.stats is not None
    assert crawler.stats.get_value("browser/start_failed") == 1
    assert crawler.stats.get_value("browser/started") is None


def test_a_browser_request_with_the_browser_off_is_fetched_without_it_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With BROWSER_ENABLED=False, scrapy-playwright's requests were fetched as plain
    downloads with no word: their scripts never ran (an audit: 4 items of 22, the rest's
    callbacks failing on a missing playwright_page)."""
    crawler = get_crawler(settings_dict={"BROWSER_ENABLED": False})
    handler = NodeDownloadHandler.from_crawler(crawler)
    asking = [
        Request("http://e.com/a", meta={"playwright": True}),
        Request("http://e.com/b", meta={"browser": True}),
    ]
    with caplog.at_level(logging.WARNING, logger="crawler.download_handler"):
        rendered = [handler.renders(request, "http") for request in asking]
        assert not handler.renders(Request("http://e.com/c"), "http")
    assert rendered == [False, False]
    assert crawler.stats is not None
    assert crawler.stats.get_value("browser/disabled") == 2
    assert caplog.text.count("BROWSER_ENABLED is off") == 1  # once a node
    assert "http://e.com/a asks for a browser" in caplog.text
    on = NodeDownloadHandler(get_crawler(settings_dict={"BROWSER_ENABLED": True}))
    assert on.renders(asking[0], "http")
