"""``hopper``: a plain ``scrapy.Spider`` whose every page links to the same page on the next
site, so most links lead to another site (and, on a partitioned frontier, another part).

``-a sites=http://127.0.0.1:P1,http://127.0.0.1:P2,...``: its start URLs are the sites' roots.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response


class HopperSpider(scrapy.Spider):
    name = "hopper"

    def __init__(self, sites: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sites = [site.rstrip("/") for site in sites.split(",") if site]
        self.start_urls = [f"{site}/" for site in self.sites]

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield {"url": response.url}
        here = f"{urlsplit(response.url).scheme}://{urlsplit(response.url).netloc}"
        after = self.sites[(self.sites.index(here) + 1) % len(self.sites)]
        path = urlsplit(response.url).path
        yield scrapy.Request(after + path)
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)
