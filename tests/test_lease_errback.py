"""The errback a leased request gets while it is downloaded: how its failure ends the lease."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from scrapy.exceptions import IgnoreRequest
from twisted.python.failure import Failure

from crawler.frontier.acks import AckTracker, LeaseState
from crawler.frontier.request_store import failure_record
from crawler.middlewares.lease_failures import LeaseErrback
from crawler.middlewares.refused import not_fetched_at_stop
from crawler.redis_outage import GaveUp


def ended_with(exception: Exception, errback: Callable[[Failure], Any] | None = None) -> LeaseState:
    ended: list[LeaseState] = []
    tracker = AckTracker(ended.append, lambda lease_id, children: None)
    tracker.start("l1", b"{}")
    LeaseErrback(errback, tracker, "l1")(Failure(exception))  # type: ignore[no-untyped-call]
    (state,) = ended
    return state


def stopped() -> IgnoreRequest:
    with (
        pytest.raises(IgnoreRequest) as raised,
        not_fetched_at_stop("politeness/stopped", "the rate limit of h"),
    ):
        raise GaveUp("politeness: Redis still unavailable")
    return raised.value


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


def test_a_request_given_up_at_a_stop_is_not_handed_to_the_spider_s_errback() -> None:
    """The request goes back to the queue and is fetched later: an errback that yields a
    failure item (a common pattern) had 18 items for pages fetched fine after the restart
    delivered to Kafka (an audit); standalone Scrapy calls no errback at a stop."""
    called: list[Failure] = []
    state = ended_with(stopped(), called.append)
    assert (state.outcome, state.requeue_reason) == ("requeue", "politeness/stopped")
    assert called == []


def test_any_other_download_failure_fails_the_lease() -> None:
    state = ended_with(IgnoreRequest("offsite"))
    assert (state.outcome, state.failure) == ("failed", "download/IgnoreRequest")


def test_a_failure_record_counts_the_failures_of_its_reason_after_the_first() -> None:
    """A page whose eight requests could not be stored got one record naming the first
    request's error alone (an audit); its detail now says how many more there were."""
    ended: list[LeaseState] = []
    tracker = AckTracker(ended.append, lambda lease_id, children: None)
    tracker.start("l1", b'{"url": "http://h/p/0"}')
    for n in range(8):
        tracker.fail("l1", "frontier/unserializable", f"request 'http://h/p/{n}' cannot be stored")
    tracker.fail("l1", "download/IgnoreRequest", "another reason")
    tracker.callback_done("l1")
    (state,) = ended
    record = orjson.loads(failure_record(state, "n1"))
    assert record["reason"] == "frontier/unserializable"
    assert record["error"] == (
        "request 'http://h/p/0' cannot be stored (and 7 more of the same reason: see the "
        "node's log)"
    )
