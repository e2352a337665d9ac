"""Debian's Chromium drives through Playwright here (no Playwright browser download)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import orjson
import pytest
import redis
from playwright.async_api import async_playwright

from crawler.demo.nodes import REPO_ROOT, process_tree
from crawler.demo.server import BackgroundHTTPServer, QuietHandler
from crawler.demo.site import Site
from crawler.devservices._proc import cmdline
from tests.cluster import logs, running_nodes, wait_for_exit, wait_for_log
from tests.services import unavailable

CHROMIUM = "/usr/bin/chromium"
PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>js</title></head><body>"
    "<div id='out'></div><script>document.getElementById('out').textContent = "
    "'由脚本插入 ' + (6 * 7); document.title = '脚本标题';"
    "const a = document.createElement('a'); a.href = '/static'; a.textContent = 'next';"
    "document.body.appendChild(a);</script></body></html>"
).encode()
STATIC = b"<!doctype html><html><head><title>static</title></head><body>plain</body></html>"


class JsPage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(STATIC if self.path == "/static" else PAGE)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return


@pytest.fixture
def js_site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), JsPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_chromium_renders_javascript(js_site: str) -> None:
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")

    async def render() -> str:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            try:
                page = await browser.new_page()
                await page.goto(js_site)
                await page.wait_for_selector("#out:not(:empty)")
                return await page.inner_text("#out")
            finally:
                await browser.close()

    assert asyncio.run(render()) == "由脚本插入 42"


def test_a_seed_marked_for_the_browser_is_rendered_by_a_node(
    js_site: str, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")
    feed = tmp_path / "items.jsonl"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "CRAWLER_STANDALONE_FEED": str(feed),
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
        "SEEDS_ALLOWED_META": "browser",
    }
    with running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes:
        redis_client.lpush(
            "pages:start_urls", orjson.dumps({"url": js_site, "meta": {"browser": True}})
        )
        assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)
    titles = {
        item["url"]: item["title"] for item in map(orjson.loads, feed.read_bytes().splitlines())
    }
    # The title and the link exist only after the page's JavaScript ran.
    assert titles == {js_site: "脚本标题", js_site + "static": "static"}
    log = (tmp_path / "node-0.log").read_text()
    assert "'browser/requests': 1" in log
    assert "'playwright/page_count': 1" in log
    assert "'playwright/page_count/closed': 1" in log  # the page was closed after rendering


def rendered_crawl(spider: str, url: str, redis_url: str, tmp_path: Path) -> list[Any]:
    """One node of ``spider`` (of tests/spiders, argument ``url``) crawls; its items."""
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")
    feed = tmp_path / "items.jsonl"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "CRAWLER_STANDALONE_FEED": str(feed),
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
        "SPIDER_MODULES": "crawler.spiders,tests.spiders",
    }
    arguments = {"url": url}
    with running_nodes(
        1, workdir=tmp_path, env=env, settings=settings, spider=spider, arguments=arguments
    ) as nodes:
        assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)
    return [orjson.loads(line) for line in feed.read_bytes().splitlines()]


def test_a_plain_spider_with_page_methods_runs_them_on_whichever_node_leases_it(
    js_site: str, redis_url: str, tmp_path: Path
) -> None:
    """scrapy-playwright's ``PageMethod`` objects in meta go through the frontier's JSON."""
    items = rendered_crawl("page_methods", js_site, redis_url, tmp_path)
    items.sort(key=lambda item: str(item["url"]))
    assert items == [
        {"url": js_site, "title": "脚本标题"},
        {"url": js_site + "static", "title": "set by static", "ran": 1},
    ]


class FlakyJsPage(JsPage):
    """The scripted page, answered 500 the first time (Scrapy retries it)."""

    asked: ClassVar[set[str]] = set()

    def do_GET(self) -> None:
        if self.path not in self.asked:
            self.asked.add(self.path)
            body = b"<html><body>try again</body></html>"  # Chromium fails an empty 500
            self.send_response(500)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


def test_a_retried_request_that_took_its_page_gets_a_new_one_and_the_old_one_is_closed(
    redis_url: str, tmp_path: Path
) -> None:
    """Scrapy's retry copies meta, with scrapy-playwright's live page in it: the frontier could
    not store the retry, the page was lost with no record and its page never closed (pages
    held until the node froze)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), FlakyJsPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/flaky"
    try:
        items = rendered_crawl("include_page", url, redis_url, tmp_path)
    finally:
        server.shutdown()
        server.server_close()
    assert items == [{"url": url, "title": "脚本标题"}], logs(tmp_path)
    log = (tmp_path / "node-0.log").read_text()
    assert "'retry/count': 1" in log
    assert "'frontier/playwright_page_closed': 1" in log
    assert log.count("holds a live browser page (meta playwright_page") == 1
    assert "'playwright/page_count': 2" in log
    assert "'playwright/page_count/max_concurrent': 1" in log  # the first one was closed


APP = (
    b"<!doctype html><html><head><title>loading</title></head><body><script>"
    # A synchronous request finishes before the load event the page is captured at.
    b"const ask = new XMLHttpRequest(); ask.open('GET', '/whoami', false); ask.send();"
    b"document.title = 'user: ' + ask.responseText;"
    b"</script></body></html>"
)


CLI = (sys.executable, "-m", "crawler", "sessions")


class SessionApp(QuietHandler):
    """A page whose script asks /whoami, which only the session cookie answers."""

    def do_GET(self) -> None:
        cookie = self.headers.get("Cookie", "")
        if self.path == "/whoami":
            body = b"alice" if "session=token-1" in cookie else b"anonymous"
            self._reply(body, {})
        else:
            self._reply(APP, {"Set-Cookie": "seen=yes; Path=/"})

    def _reply(self, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(200)
        for name, value in {"Content-Type": "text/html; charset=utf-8", **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def test_browser_pages_carry_the_shared_session_and_its_new_cookies_flow_back(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")
    imported = subprocess.run(
        [
            *CLI,
            "import",
            "jsapp",
            "alice",
            "--cookie-header",
            "session=token-1",
            "--redis",
            redis_url,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    feed = tmp_path / "items.jsonl"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "SPIDER_MODULES": "crawler.spiders,tests.spiders",
        "CRAWLER_STANDALONE_FEED": str(feed),
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
    }
    with (
        BackgroundHTTPServer(SessionApp) as app,
        running_nodes(
            1, workdir=tmp_path, env=env, settings=settings, spider="browser_session"
        ) as nodes,
    ):
        redis_client.lpush("browser_session:start_urls", app.base_url + "/")
        assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)
    (item,) = [orjson.loads(line) for line in feed.read_bytes().splitlines()]
    # The page's own XHR carried the session cookie: only then does /whoami say alice.
    assert item["title"] == "user: alice"
    listed = subprocess.run(
        [*CLI, "list", "jsapp", "--json", "--redis", redis_url],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    (session,) = [orjson.loads(line) for line in listed.stdout.splitlines()]
    assert "seen" in session["cookies"]  # the cookie the rendered page set flowed back


# --------------------------------------------------------------------------- lean nodes
# Playwright starts with the first request that needs a browser, not with the node.

STARTED = "Started Playwright for the first browser request"


def playwright_drivers(pid: int) -> list[int]:
    return [child for child in process_tree(pid) if "run-driver" in (cmdline(child) or "")]


def test_an_idle_node_is_one_process_until_a_page_needs_the_browser(
    js_site: str, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")
    feed = tmp_path / "items.jsonl"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "CRAWLER_STANDALONE_FEED": str(feed),
        "SEEDS_ALLOWED_META": "browser",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
    }
    log = tmp_path / "node-0.log"
    with (
        Site(20) as site,
        running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        (node,) = nodes
        assert wait_for_log(log, "Spider opened", 60), logs(tmp_path)
        redis_client.lpush("pages:start_urls", site.url(0))
        deadline = time.monotonic() + 60
        while len(site.hits) < 20 and time.monotonic() < deadline:
            assert process_tree(node.pid) == [node.pid], "a node without renders forked"
            time.sleep(0.2)
        assert len(site.hits) >= 20, logs(tmp_path)
        time.sleep(2)  # scrapy-playwright's handler would have started with the engine
        assert process_tree(node.pid) == [node.pid]

        redis_client.lpush(
            "pages:start_urls", orjson.dumps({"url": js_site, "meta": {"browser": True}})
        )
        assert wait_for_log(log, STARTED, 60), logs(tmp_path)
        assert len(playwright_drivers(node.pid)) == 1  # one driver for the node, not per scheme
        assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)
    titles = {
        item["url"]: item["title"] for item in map(orjson.loads, feed.read_bytes().splitlines())
    }
    assert titles[js_site] == "脚本标题"  # rendered: the title exists only after the script ran
    assert len(titles) == 22  # 20 plain pages, the rendered one and its static link
    text = log.read_text()
    assert text.count(STARTED) == 1
    assert "'browser/started': 1" in text
    # Installed for http and https, the one handler is closed once per scheme: no error.
    assert "Traceback" not in text


def test_a_browser_that_cannot_start_fails_its_requests_and_the_node_goes_on(
    js_site: str, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    feed = tmp_path / "items.jsonl"
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "CRAWLER_STANDALONE_FEED": str(feed),
        "SEEDS_ALLOWED_META": "browser",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
        "PLAYWRIGHT_BROWSER_PROVIDER": "tests.unstartable_browser.UnstartableBrowserProvider",
    }
    with (
        Site(3) as site,
        running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        for seed in ({"url": js_site, "meta": {"browser": True}}, {"url": site.url(0)}):
            redis_client.lpush("pages:start_urls", orjson.dumps(seed))
        assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path)
        assert process_tree(nodes[0].pid) == [nodes[0].pid]
    urls = {orjson.loads(line)["url"] for line in feed.read_bytes().splitlines()}
    assert urls == site.all_urls()  # the plain pages, not the one that needed the browser
    text = (tmp_path / "node-0.log").read_text()
    assert "the Playwright driver cannot start" in text
    assert "'browser/start_failed': 1" in text
    assert "browser/started" not in text and STARTED not in text
    (failure,) = map(orjson.loads, redis_client.hvals("{pages}:failed"))
    assert failure["request"]["url"] == js_site  # its request failed, with the reason
    assert "the Playwright driver cannot start" in failure["error"]
