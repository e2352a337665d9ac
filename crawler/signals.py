"""Signals the project's components send each other through ``crawler.signals``, and how they
hand the spider's own ``spider_idle`` handlers the signal in cluster mode."""

from __future__ import annotations

import weakref
from typing import Any

from pydispatch import dispatcher, saferef  # type: ignore[import-untyped]
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, DontCloseSpider
from twisted.python.failure import Failure

#: Sent (with ``send_catch_log_async``) to wait until every request this node handed to
#: ``LeasingScheduler`` is stored in Redis; the scheduler's handler returns when it is.
frontier_flush = object()

#: ``spider_idle`` as the spider's own handlers get it in cluster mode (``ClusterStartMiddleware``
#: moves them here when the spider opens): sent when the whole cluster is idle, as Scrapy sends
#: ``spider_idle`` once the crawl is over, not each time this node runs dry while others crawl.
cluster_idle = object()


def user_receivers(crawler: Crawler, signal: object) -> list[Any]:
    """The receivers of ``signal`` that are neither Scrapy's nor the project's."""
    return [receiver for receiver, _ in _user_connections(crawler, signal)]


def _user_connections(crawler: Crawler, signal: object) -> list[tuple[Any, bool]]:
    """Each user receiver of ``signal``, and whether it was connected weakly (the default;
    ``weak=False`` keeps a lambda or closure alive, and must be given to disconnect it)."""
    connections = []
    for entry in dispatcher.getAllReceivers(crawler.signals.sender, signal):
        weak = isinstance(entry, weakref.ReferenceType | saferef.BoundMethodWeakref)
        receiver = entry() if weak else entry
        module = str(getattr(receiver, "__module__", ""))
        if receiver is not None and not module.startswith(("scrapy.", "crawler.")):
            connections.append((receiver, weak))
    return connections


def move_user_idle_handlers(crawler: Crawler) -> list[Any]:
    """Connect the user's ``spider_idle`` receivers to ``cluster_idle`` instead, as weakly or
    strongly as they were; returns them."""
    moved = _user_connections(crawler, signals.spider_idle)
    for receiver, weak in moved:
        crawler.signals.disconnect(receiver, signal=signals.spider_idle, weak=weak)
        crawler.signals.connect(receiver, signal=cluster_idle, weak=weak)
    return [receiver for receiver, _ in moved]


def send_idle(crawler: Crawler, signal: object, spider: Spider) -> str | None:
    """Send an idle signal as Scrapy's engine sends ``spider_idle``: None when a handler raised
    ``DontCloseSpider`` (the spider stays open), else the reason to close with (a
    ``CloseSpider``'s, or ``finished``)."""
    results = crawler.signals.send_catch_log(
        signal, spider=spider, dont_log=(DontCloseSpider, CloseSpider)
    )
    raised = [result.value for _, result in results if isinstance(result, Failure)]
    if any(isinstance(exc, DontCloseSpider) for exc in raised):
        return None
    return next((exc.reason for exc in raised if isinstance(exc, CloseSpider)), "finished")
