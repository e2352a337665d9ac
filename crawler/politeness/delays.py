"""Crawl delays learned from robots.txt, per crawler process (no Scrapy imports).

The robots.txt middleware records a site's ``Crawl-delay`` in its ``CrawlDelays``;
the rate limiter (which finds that middleware with ``crawler.get_downloader_middleware``)
slows that site to one request per delay. Every node reads robots.txt from
the same shared cache, so every node learns the same delay.
"""

from __future__ import annotations

from crawler.politeness.limiter import Rate


def site_of_netloc(netloc: str) -> str:
    """A site as the rate limiter names it: the ``host[:port]`` of a URL's netloc in lower
    case, without a user and password (they would be part of a Redis key, and of what
    ``crawler status`` prints)."""
    return netloc.rpartition("@")[2].lower()


class CrawlDelays:
    """Owned by the node's robots.txt middleware; the rate limiter reads it."""

    def __init__(self) -> None:
        self._delays: dict[str, float] = {}

    def set(self, site: str, seconds: float | None) -> None:
        if seconds and seconds > 0:
            self._delays[site] = seconds
        else:
            self._delays.pop(site, None)

    def apply(self, site: str, rate: Rate) -> Rate:
        """``rate``, slowed to the site's crawl delay if robots.txt asks for less."""
        delay = self._delays.get(site)
        if delay is None or rate.per_second <= 1.0 / delay:
            return rate
        return Rate(1.0 / delay, burst=1)
