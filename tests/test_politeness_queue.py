"""The rate limit holds for requests that waited in Scrapy's own per-site queue.

With ``CONCURRENT_REQUESTS_PER_DOMAIN=1`` the fast pages queue behind a slow one. A limiter that
booked their times as they entered the downloader would let them all go at once when the slow
response came back; the limit is for when a request leaves.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path

import pytest

from crawler.demo.server import BackgroundHTTPServer, QuietHandler
from tests.cluster import logs, running_nodes, wait_for_exit
from tests.one_node import send

RATE = 2.0  # requests a second: one every 500 ms


class SlowFirstSite(BackgroundHTTPServer):
    """``/slow`` answers after 3 s, anything else at once; records when each request came."""

    def __init__(self) -> None:
        self.arrivals: list[tuple[float, str]] = []
        lock = threading.Lock()
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                with lock:
                    site.arrivals.append((time.monotonic(), self.path))
                if self.path == "/slow":
                    time.sleep(3)
                send(self, 200, b"<html><title>t</title></html>")

        super().__init__(Handler)


def gaps(arrivals: list[tuple[float, str]]) -> list[float]:
    times = sorted(at for at, _path in arrivals)
    return [round(later - earlier, 2) for earlier, later in itertools.pairwise(times)]


@pytest.mark.parametrize("mode", ["standalone", "cluster"])
def test_requests_queued_behind_a_slow_response_keep_the_rate(
    mode: str, redis_url: str, tmp_path: Path
) -> None:
    env = {"REDIS_URL": redis_url if mode == "cluster" else "", "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        "SPIDER_MODULES": "crawler.spiders,tests.spiders",
        "BROWSER_ENABLED": "False",
        "METRICS_ENABLED": "False",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "1",
        "CRAWLER_STANDALONE_FEED": "",
        "POLITENESS_RATE": str(RATE),
        "POLITENESS_BURST": "1",
    }
    with (
        SlowFirstSite() as site,
        running_nodes(
            1,
            workdir=tmp_path,
            env=env,
            settings=settings,
            spider="behind_slow",
            arguments={"site": site.base_url},
        ) as nodes,
    ):
        assert wait_for_exit(nodes, timeout=60) == [0], logs(tmp_path)
    assert len(site.arrivals) == 7, logs(tmp_path)
    assert site.arrivals[0][1] == "/slow"
    # every request left about 1 / RATE after the one before (slack for a loaded machine's
    # timers; the limiter booked them exactly 500 ms apart), not all at once
    assert min(gaps(site.arrivals)) >= 0.8 / RATE, gaps(site.arrivals)
