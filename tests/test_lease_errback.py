"""The errback a leased request gets while it is downloaded: how its failure ends the lease."""

from __future__ import annotations

import pytest
from scrapy.exceptions import IgnoreRequest
from twisted.python.failure import Failure

from crawler.frontier.acks import AckTracker, LeaseState
from crawler.middlewares.lease_failures import LeaseErrback
from crawler.middlewares.refused import not_fetched_at_stop
from crawler.redis_outage import GaveUp


def ended_with(exception: Exception) -> LeaseState:
    ended: list[LeaseState] = []
    tracker = AckTracker(ended.append, lambda lease_id, children: None)
    tracker.start("l1", b"{}")
    LeaseErrback(None, tracker, "l1")(Failure(exception))  # type: ignore[no-untyped-call]
    (state,) = ended
    return state


def test_a_request_given_up_at_a_stop_goes_back_to_the_queue() -> None:
    """Not failed for good: the node stopped while Redis did not answer, nothing is wrong with
    the request."""
    with (
        pytest.raises(IgnoreRequest) as raised,  # Scrapy ignores it like any IgnoreRequest
        not_fetched_at_stop("politeness/stopped", "the rate limit of h"),
    ):
        raise GaveUp("politeness: Redis still unavailable")
    state = ended_with(raised.value)
    assert (state.outcome, state.requeue_reason) == ("requeue", "politeness/stopped")


def test_any_other_download_failure_fails_the_lease() -> None:
    state = ended_with(IgnoreRequest("offsite"))
    assert (state.outcome, state.failure) == ("failed", "download/IgnoreRequest")
