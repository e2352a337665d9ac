"""``IdleRequests``: say when a spider_idle handler's requests are fetched by every node.

In cluster mode the spider's own ``spider_idle`` handlers are called on every node when the
whole cluster is idle (``ClusterStartMiddleware``), as Scrapy calls them once the crawl is
over. A handler that runs a next phase (``engine.crawl(request)``, ``DontCloseSpider``) adds
its requests on each node: the shared dedup keeps one of each, unless they have
``dont_filter``, and then each node fetches them all (an audit: 10 pages of a phase fetched
twice by 2 nodes, their items twice in Kafka). Each such request scheduled while the handlers
run is counted (``cluster_idle/dont_filter``), and the first is logged (WARNING) saying what
to do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler

from crawler.said_once import SaidOnce

logger = logging.getLogger(__name__)


class IdleRequests:
    def __init__(self, crawler: Crawler) -> None:
        assert crawler.stats is not None
        self._said = SaidOnce(crawler.stats, logger)
        self._handlers_running = False
        crawler.signals.connect(self._scheduled, signal=signals.request_scheduled)

    @contextmanager
    def handlers_running(self) -> Iterator[None]:
        """While the spider's idle handlers run."""
        self._handlers_running = True
        try:
            yield
        finally:
            self._handlers_running = False

    def _scheduled(self, request: Request, **kwargs: Any) -> None:
        if self._handlers_running and request.dont_filter:
            self._said.count(
                "cluster_idle/dont_filter",
                "A spider_idle handler scheduled %s with dont_filter=True: every node calls the "
                "spider's spider_idle handlers when the cluster is idle, so each node fetches "
                "such requests (standalone Scrapy fetched them once). Leave dont_filter off "
                "for them: the shared dedup then keeps one of each",
                request,
            )
