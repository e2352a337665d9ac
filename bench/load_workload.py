"""The load generator's workload, without the crawler's modules: the baseline driver imports
the crawler of another commit beside it (``bench.frontier_baseline``).

Each page links 4 URLs never seen and 16 drawn uniformly from every URL queued before;
URLs spread over 50 sites; links are real Scrapy requests of a spider's callback.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from scrapy import Request, Spider

LEASE_BATCH, LINKS, NEW_LINKS = 8, 20, 4
HEARTBEAT_SECONDS = 5.0
IDLE_POLL_MS = 500  # FRONTIER_IDLE_POLL: a dry buffer's lease says it (work sharing)
SITES = 50


class LoadSpider(Spider):
    name = "load"

    def parse(self, response: Any) -> None:
        """The callback the links name (stored by name)."""


SPIDER = LoadSpider()


class UrlSpace:
    """The workload's URLs: each page links 4 new URLs and 16 enqueued before."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)
        self.counter = itertools.count()
        self.known: list[str] = []

    def fresh(self) -> str:
        n = next(self.counter)
        url = f"http://site{n % SITES}.test:8000/p/{n}.html"
        self.known.append(url)
        return url

    def links(self) -> list[str]:
        seen = [self.random.choice(self.known) for _ in range(LINKS - NEW_LINKS)]
        return [self.fresh() for _ in range(NEW_LINKS)] + seen


def link_request(url: str, parent: str) -> Request:
    site = url.split("/")[2]
    return Request(
        url,
        callback=SPIDER.parse,
        meta={"depth": 3, "crawler_scope": site},
        headers={"Referer": parent},
    )
