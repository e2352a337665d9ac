"""``RefusedRequest``: a request a component refused on purpose, with the reason to record;
``NotFetchedAtStop``: one a stopping node gave up on, which goes back to the queue."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest

from crawler.middlewares.lease_output import leases_requests
from crawler.redis_outage import GaveUp
from crawler.wakeup import engine_closing


class RefusedRequest(IgnoreRequest):
    """Raised instead of a bare ``IgnoreRequest``; ``reason`` (``component/event``) is the
    stat and, in cluster mode, the failure reason of the request's lease."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


STOP_LOOK = 0.5  # seconds between two looks at a stop while a request waits (turn, session)


class NotFetchedAtStop(IgnoreRequest):
    """The node stops and a Redis its download waits on does not answer: the request is not
    fetched, and its lease goes back to the queue (``reason``: the requeue reason) instead of
    being recorded as failed."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


STANDALONE_STOP_WAIT = 10.0  # s: the longest wait a standalone stop lets a request finish


def not_waiting_past_stop(crawler: Crawler, reason: str, left: float, what: str) -> None:
    """A request waits ``left`` seconds more for ``what`` (its turn, a session): when the node
    stops meanwhile (Scrapy's close waits for every download in progress, and the wait may last
    minutes), it is not fetched and its lease goes back to the queue (``reason``). Standalone
    (Scrapy's own scheduler: no lease), a wait of at most ``STANDALONE_STOP_WAIT`` runs its
    course and the request is fetched, as Scrapy fetches at a close what its downloader holds
    (no errback called); a longer one (a cooldown, a ``Retry-After``) is cut, the request's
    errback called with ``NotFetchedAtStop``."""
    if not engine_closing(crawler):
        return
    if leases_requests(crawler):
        raise NotFetchedAtStop(
            reason,
            f"not fetched: the node stops while the request waits {left:.0f}s more for {what} "
            "(its lease goes back to the queue)",
        )
    if left > STANDALONE_STOP_WAIT:
        raise NotFetchedAtStop(
            reason,
            f"not fetched: the spider closes while the request waits {left:.0f}s more for "
            f"{what} (more than the {STANDALONE_STOP_WAIT:.0f}s a stop waits)",
        )


@contextlib.contextmanager
def not_fetched_at_stop(reason: str, what: str) -> Iterator[None]:
    """A download step that needs Redis: when its guard gives up (the node stops while Redis
    does not answer), the request is not fetched and goes back to the queue (``reason``)."""
    try:
        yield
    except GaveUp as exc:
        raise NotFetchedAtStop(
            reason,
            f"not fetched: the node stops and {what} is in a Redis that does not answer (its "
            "lease goes back to the queue)",
        ) from exc


def failure_reason(exception: BaseException | None) -> str:
    """The failure reason of a request whose download ended with ``exception``."""
    if isinstance(exception, RefusedRequest):
        return exception.reason
    return f"download/{type(exception).__name__}"
