"""A compressed body is capped while it is inflated, and a dropped response is a failure.

A real node on Redis crawls a local site with a gzip bomb (200 MB of zeros, 200 kB on
the wire) next to ordinary pages, with a 1 MiB cap given either way: the node's memory
stays low, the bomb's request fails with ``decompression/too_large``, and an
``IgnoreRequest`` raised by any downloader middleware's ``process_response`` fails its
request too (``download/IgnoreRequest``): nothing is left to the idle sweep.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import orjson
import pytest

from crawler.demo.server import BackgroundHTTPServer, QuietHandler
from tests.one_node import crawl, page, send

INFLATED = 200 * 1024 * 1024
CAP = 1024 * 1024
MIDDLEWARES = orjson.dumps({"tests.refusing_middleware.IgnoreInResponseMiddleware": 600}).decode()


def gzip_of_zeros(size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip stream
    chunk = bytes(1024 * 1024)
    body = b"".join(compressor.compress(chunk) for _ in range(size // len(chunk)))
    return body + compressor.flush()


class BombSite(BackgroundHTTPServer):
    """``/`` links to ``/p/1``, ``/bomb`` (``bomb``, gzip-encoded HTML) and ``/refuse``."""

    def __init__(self, bomb: bytes) -> None:
        class Handler(QuietHandler):
            def do_GET(self) -> None:
                if self.path == "/bomb":
                    send(self, 200, bomb, Content_Encoding="gzip")
                elif self.path == "/":
                    send(self, 200, page("home", "/p/1", "/bomb", "/refuse"))
                else:
                    send(self, 200, page(self.path))

        handler: type[BaseHTTPRequestHandler] = Handler
        super().__init__(handler)


@pytest.fixture(scope="module")
def bomb_site() -> Iterator[BombSite]:
    with BombSite(gzip_of_zeros(INFLATED)) as site:
        yield site


@pytest.mark.parametrize("cap_setting", ["DECOMPRESSION_MAXSIZE", "DOWNLOAD_MAXSIZE"])
def test_a_gzip_bomb_is_capped_while_inflated_and_fails_with_a_reason(
    cap_setting: str, bomb_site: BombSite, tmp_path: Path, redis_url: str
) -> None:
    settings = {cap_setting: str(CAP), "DOWNLOADER_MIDDLEWARES": MIDDLEWARES}
    run = crawl(
        "pages",
        [bomb_site.base_url + "/"],
        workdir=tmp_path,
        redis_url=redis_url,
        settings=settings,
    )
    assert run.urls() == {bomb_site.base_url + "/", bomb_site.base_url + "/p/1"}, run.log[-3000:]
    assert sorted((r["reason"], r["request"]["url"]) for r in run.failed) == [
        ("decompression/too_large", bomb_site.base_url + "/bomb"),
        ("download/IgnoreRequest", bomb_site.base_url + "/refuse"),
    ], run.log[-3000:]
    bomb = next(r for r in run.failed if r["reason"] == "decompression/too_large")
    assert f"body over {CAP} B when inflated" in bomb["error"]
    assert run.stat("decompression/too_large") == 1
    assert run.stat("frontier/stragglers") == 0
    assert run.leftover == 0
    # Inflated in chunks under the cap: far below the 200 MB the bomb holds.
    assert run.peak_rss < 200 * 1024 * 1024, run.peak_rss
