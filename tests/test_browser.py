"""Debian's Chromium drives through Playwright here (no Playwright browser download)."""

from __future__ import annotations

import asyncio
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.async_api import async_playwright

from tests.services import unavailable

CHROMIUM = "/usr/bin/chromium"
PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>js</title></head><body>"
    "<div id='out'></div><script>document.getElementById('out').textContent = "
    "'由脚本插入 ' + (6 * 7);</script></body></html>"
).encode()


class JsPage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(PAGE)

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
