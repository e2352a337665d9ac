"""``LeaseFailureMiddleware``: keep a leased request's lease attached to its outcome.

Downloader middleware closest to the engine, so it sees the final word of
every other middleware:

- an exception only after ``RetryMiddleware`` gave up (a retry or redirect is a
  new request that replaces the lease instead): the lease is marked failed
  with ``download/<ExceptionClass>`` (``IgnoreRequest`` included, e.g.
  robots.txt). Without an errback it completes at once; with one, the
  errback's output (items and requests) is held by the lease like a
  callback's, and the lease completes when that output ends;
- a response a middleware built anew, whose ``request`` is not the leased one:
  the lease id is copied to that request, so its callback's output is tracked.

Enabled with ``LeasingScheduler`` only.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.utils.asyncgen import as_async_generator
from scrapy.utils.misc import arg_to_iter
from twisted.python.failure import Failure

from crawler.frontier.acks import AckTracker
from crawler.frontier.scheduler import LEASE_META
from crawler.middlewares.lease_output import require_leasing_scheduler, track_output, tracked_lease


def tracked_errback(
    errback: Callable[..., Any], tracker: AckTracker, lease_id: str
) -> Callable[[Failure], Any]:
    """``errback`` whose output is held by the lease (Scrapy passes errback output to the
    scraper without spider middlewares, so ``LeaseOutputMiddleware`` never sees it)."""

    def call(failure: Failure) -> Any:
        try:
            output = errback(failure)
        except BaseException:
            tracker.callback_done(lease_id)
            raise
        if isinstance(output, Failure):
            tracker.callback_done(lease_id)
            return output
        return track_output(tracker, lease_id, _as_async_iterator(output))

    return call


async def _as_async_iterator(output: Any) -> AsyncIterator[Any]:
    if inspect.isawaitable(output):
        output = await output
    if not hasattr(output, "__aiter__"):
        output = as_async_generator(arg_to_iter(output))
    async for value in output:
        yield value


class LeaseFailureMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        require_leasing_scheduler(crawler)
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LeaseFailureMiddleware:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        replaced = response.request
        lease_id = request.meta.get(LEASE_META)
        if replaced is not None and replaced is not request and lease_id is not None:
            replaced.meta.setdefault(LEASE_META, lease_id)
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        if (found := tracked_lease(self.crawler, request)) is None:
            return
        tracker, lease_id = found
        tracker.fail(lease_id, f"download/{type(exception).__name__}")
        if request.errback is None:
            tracker.callback_done(lease_id)
        else:
            request.errback = tracked_errback(request.errback, tracker, lease_id)
