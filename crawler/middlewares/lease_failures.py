"""``LeaseFailureMiddleware``: keep a leased request's lease attached to its outcome.

Downloader middleware closest to the engine. A download can end in failure in
three places: the download itself or a middleware's ``process_request`` (these
pass through ``process_exception``), or a middleware's ``process_response``
(``HttpCompressionMiddleware``'s size cap, any ``IgnoreRequest`` there: Scrapy
hands these straight to the request's errback, past every ``process_exception``).
So while a leased request is downloaded its errback is a ``LeaseErrback``: the
one place every download failure reaches. It marks the lease failed with the
exception's reason (``RefusedRequest.reason``, else ``download/<ExceptionClass>``,
``IgnoreRequest`` included) and its message, URL credentials masked, as the
record's ``error``. Without an errback of its own the request's lease then
completes; with one, that errback's output (items and requests) is held by the
lease like a callback's, and the lease completes when that output ends. A request
not fetched because its node stops (``NotFetchedAtStop``) goes back to the queue
without the spider's errback, as standalone Scrapy calls none at a stop.

The request's own errback comes back when a response passes (a spider
middleware's ``process_spider_input`` may still call it, as Scrapy does) and on
every request scheduled again (a redirect, a retry, a ``replace()``: it is
stored by name). A retry or redirect is a new request that replaces the lease.

A response a middleware built anew, whose ``request`` is not the leased one,
gets the lease id copied to that request, so its callback's output is tracked.

The engine drops a request before the scheduler when a ``request_scheduled`` handler raises
``IgnoreRequest`` (Scrapy's ``OffsiteMiddleware``, a user's extension), and says so to no one.
A request that still carries the frontier's meta once the engine is done with it never reached
the scheduler (which takes that meta off): its hold on its parent's lease is released, as a
duplicate link's is, and a dropped retry or redirect ends its lease (as done, unless a reason
to fail it was recorded). Without that the lease waited for the idle sweep: on a busy node,
for ever, and a stop or a crash had every page it held fetched again.

Enabled with ``LeasingScheduler`` only.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.utils.asyncgen import as_async_generator
from scrapy.utils.asyncio import call_later
from scrapy.utils.misc import arg_to_iter
from twisted.python.failure import Failure

from crawler.frontier.acks import AckTracker
from crawler.frontier.scheduler import LEASE_META, PARENT_META
from crawler.middlewares.lease_output import (
    require_leasing_scheduler,
    track_output,
    tracked_lease,
    tracked_parent,
)
from crawler.middlewares.refused import NotFetchedAtStop, failure_reason
from crawler.url_credentials import mask_secrets


class LeaseErrback:
    """The errback of a leased request while it is downloaded (see the module)."""

    def __init__(
        self, original: Callable[[Failure], Any] | None, tracker: AckTracker, lease_id: str
    ) -> None:
        self.original = original
        self.tracker = tracker
        self.lease_id = lease_id

    def __call__(self, failure: Failure) -> Any:
        value = failure.value
        if isinstance(value, NotFetchedAtStop):
            self.tracker.requeue(self.lease_id, value.reason)
        else:
            error = mask_secrets(str(value))
            self.tracker.fail(self.lease_id, failure_reason(value), error or None)
        self.tracker.answer(self.lease_id)
        # a request put back is no failure of the spider's: its errback is not called
        if self.original is None or isinstance(value, NotFetchedAtStop):
            self.tracker.callback_done(self.lease_id)
            return failure
        try:
            output = self.original(failure)
        except BaseException:
            self.tracker.callback_done(self.lease_id)
            raise
        if isinstance(output, Failure):
            self.tracker.callback_done(self.lease_id)
            return output
        return track_output(self.tracker, self.lease_id, _as_async_iterator(output))


def own_errback(request: Request) -> None:
    """Give ``request`` its own errback back, if a ``LeaseErrback`` stands in for it."""
    if isinstance(request.errback, LeaseErrback):
        request.errback = request.errback.original


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
        crawler.signals.connect(self.request_scheduled, signal=signals.request_scheduled)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LeaseFailureMiddleware:
        return cls(crawler)

    def request_scheduled(self, request: Request, spider: Spider) -> None:
        own_errback(request)  # a copy of a request being downloaded: stored, by name
        if PARENT_META in request.meta or LEASE_META in request.meta:
            call_later(0, self._settle_if_dropped, request)

    def _settle_if_dropped(self, request: Request) -> None:
        """After the engine scheduled ``request`` or dropped it (see the module)."""
        if (parent := tracked_parent(self.crawler, request)) is not None:
            tracker, parent_lease = parent
            tracker.add_child(parent_lease, None)
        elif (found := tracked_lease(self.crawler, request)) is not None:
            tracker, lease_id = found
            tracker.replace(lease_id, None)

    def process_request(self, request: Request) -> None:
        self._watch(request)

    def process_response(self, request: Request, response: Response) -> Response:
        own_errback(request)
        replaced = response.request
        lease_id = request.meta.get(LEASE_META)
        if replaced is not None and replaced is not request and lease_id is not None:
            replaced.meta.setdefault(LEASE_META, lease_id)
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        self._watch(request)  # raised before process_request reached this middleware

    def _watch(self, request: Request) -> None:
        if isinstance(request.errback, LeaseErrback):
            return
        if (found := tracked_lease(self.crawler, request)) is not None:
            request.errback = LeaseErrback(request.errback, *found)
