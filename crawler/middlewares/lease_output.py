"""``LeaseOutputMiddleware``: tell the frontier when a leased request's output is settled.

Spider middleware, closest to the engine. It tags the requests a callback
yields with their parent lease and holds the lease until the scheduler has
them (Scrapy hands callback output to its workers through a queue, so the
output ends before its requests are scheduled); it holds the lease for every
item until the pipelines settle it, and releases the callback's own hold when
the output ends. Callback errors mark the lease failed with
``spider_exception/<ExceptionClass>`` (``CloseSpider`` too: the page's output ends there).

Items are matched to their lease through the response that Scrapy's
``item_scraped`` / ``item_dropped`` / ``item_error`` signals carry (its
``request`` holds the lease id), never through the item object: a pipeline
may return a new dict, another item class or anything else. An item dropped
with ``ItemRequeued`` (its delivery failed even to the spool) sends the
request back to the queue.

Enabled with ``LeasingScheduler`` only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import CloseSpider, NotConfigured
from scrapy.http import Response
from scrapy.utils.misc import load_object
from twisted.python.failure import Failure

from crawler.exceptions import ItemRequeued
from crawler.frontier.acks import AckTracker
from crawler.frontier.scheduler import LEASE_META, PARENT_META, LeasingScheduler
from crawler.node_context import NodeContext


def leases_requests(crawler: Crawler) -> bool:
    """Whether the crawl's scheduler is the frontier's (cluster mode), not Scrapy's own."""
    scheduler = load_object(crawler.settings.get("SCHEDULER"))
    return isinstance(scheduler, type) and issubclass(scheduler, LeasingScheduler)


def require_leasing_scheduler(crawler: Crawler) -> None:
    if not leases_requests(crawler):
        raise NotConfigured


def tracked_lease(crawler: Crawler, request: Request | None) -> tuple[AckTracker, str] | None:
    """The lease ``request`` was leased under, if this node holds it."""
    return _tracked(crawler, request, LEASE_META)


def tracked_parent(crawler: Crawler, request: Request) -> tuple[AckTracker, str] | None:
    """The lease of the page whose callback yielded ``request``, if this node holds it."""
    return _tracked(crawler, request, PARENT_META)


def _tracked(
    crawler: Crawler, request: Request | None, meta_key: str
) -> tuple[AckTracker, str] | None:
    context = NodeContext.of(crawler)
    tracker = context.tracker if context is not None else None
    lease_id = request.meta.get(meta_key) if request is not None else None
    if tracker is None or not isinstance(lease_id, str) or not tracker.tracks(lease_id):
        return None
    return tracker, lease_id


def source_request(source: Response | Failure | None) -> Request | None:
    """The request behind an item signal's ``response``: a response, or the failure an
    errback received (Scrapy sets its ``request``)."""
    request = getattr(source, "request", None)
    return request if isinstance(request, Request) else None


def fail_page(crawler: Crawler, response: Response, reason: str, error: str) -> None:
    """A callback's page failed for good without an exception (an error answer the spider
    gives up on): its lease ends failed with ``reason``, a failure record an operator can retry
    (``crawler failed``). Nothing without a lease (standalone)."""
    if (tracked := tracked_lease(crawler, response.request)) is not None:
        tracker, lease_id = tracked
        tracker.fail(lease_id, reason, error)


def fail(tracker: AckTracker, lease_id: str, exc: Exception) -> None:
    """Record a callback's exception as the lease's failure (the record says why, credentials
    masked in it). ``CloseSpider`` too, with its reason: Scrapy takes it as the spider's wish
    to stop, and the node closes, but the page's output ends where it was raised while the
    other nodes crawl on; done, its links not yet yielded were lost without a word and the
    crawl said finished (an audit). Failed, ``crawler status`` counts it and ``crawler failed
    <spider> retry`` crawls it again."""
    error = exc.reason if isinstance(exc, CloseSpider) else str(exc)
    tracker.fail(lease_id, f"spider_exception/{type(exc).__name__}", str(error) or None, exc)


async def track_output(
    tracker: AckTracker, lease_id: str, result: AsyncIterator[Any]
) -> AsyncIterator[Any]:
    """Pass a callback's (or errback's) output through, holding the lease for each piece."""
    try:
        async for output in result:
            if isinstance(output, Request):
                output.meta[PARENT_META] = lease_id
                tracker.hold_request(lease_id)
            elif output is not None:
                tracker.hold(lease_id)  # released by the item's signal
            yield output
    except Exception as exc:
        fail(tracker, lease_id, exc)
        raise
    finally:
        tracker.callback_done(lease_id)


class LeaseOutputMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        require_leasing_scheduler(crawler)
        self.crawler = crawler
        for signal in (signals.item_scraped, signals.item_dropped, signals.item_error):
            crawler.signals.connect(self._item_settled, signal=signal)
        crawler.signals.connect(self._spider_error, signal=signals.spider_error)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LeaseOutputMiddleware:
        return cls(crawler)

    def process_spider_input(self, response: Response) -> None:
        """The response reaches the spider: a request with its lease's meta from now on is
        new work, not a redirect or retry (``AckTracker.replace``)."""
        if (found := tracked_lease(self.crawler, response.request)) is not None:
            tracker, lease_id = found
            tracker.answer(lease_id)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        found = tracked_lease(self.crawler, response.request)
        if found is None:
            async for output in result:
                yield output
            return
        async for output in track_output(*found, result):
            yield output

    def process_spider_exception(self, response: Response, exception: Exception) -> None:
        if (found := tracked_lease(self.crawler, response.request)) is not None:
            fail(*found, exception)

    def _item_settled(self, response: Response | Failure | None = None, **kwargs: Any) -> None:
        found = tracked_lease(self.crawler, source_request(response))
        if found is None:
            return
        tracker, lease_id = found
        exception = kwargs.get("exception")
        if isinstance(exception, ItemRequeued):
            tracker.requeue(lease_id, exception.reason)
        tracker.release(lease_id)

    def _spider_error(self, failure: Failure, response: Response, **kwargs: Any) -> None:
        if (found := tracked_lease(self.crawler, source_request(response))) is not None:
            tracker, lease_id = found
            if isinstance(failure.value, Exception):
                fail(tracker, lease_id, failure.value)
            tracker.callback_done(lease_id)
