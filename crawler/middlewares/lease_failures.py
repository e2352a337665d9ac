"""``LeaseFailureMiddleware``: record leased requests whose download failed for good.

Downloader middleware closest to the engine, so it sees an exception only
after ``RetryMiddleware`` gave up (a retry or redirect is a new request that
replaces the lease instead). The lease completes as failed with
``download/<ExceptionClass>`` (``IgnoreRequest`` included, e.g. robots.txt).
Items an errback yields are not held by the lease.

Enabled with ``LeasingScheduler`` only.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler

from crawler.middlewares.lease_output import require_leasing_scheduler, tracked_lease


class LeaseFailureMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        require_leasing_scheduler(crawler)
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LeaseFailureMiddleware:
        return cls(crawler)

    def process_exception(self, request: Request, exception: Exception) -> None:
        if (found := tracked_lease(self.crawler, request)) is not None:
            tracker, lease_id = found
            tracker.fail(lease_id, f"download/{type(exception).__name__}")
            tracker.callback_done(lease_id)
