"""Which leased requests are finished, and with what outcome (pure logic, no I/O).

A leased request is finished when its callback has returned all its output,
every request it yielded has reached the scheduler and is durable in Redis,
and every item it yielded is settled: through the pipelines and, when a
pipeline defers (Kafka), acknowledged by the broker. Each open piece of work
is a *hold* on the lease; the lease completes when its holds reach zero.

Outcomes: ``done``; ``failed`` (recorded with a reason, not retried); or
``requeue`` (the request goes back to the queue, e.g. its items could not be
delivered). New requests the callback yielded are enqueued in the same atomic
step that completes the lease when nothing else is pending; otherwise they are
handed over as soon as the callback has ended (``on_progress``, which holds the
lease until they are written), so a slow or unreachable broker never starves
the frontier. A node killed in between only makes the request run again: its
new requests are deduplicated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeGuard

from crawler.frontier.client import NewRequest, Outcome


@dataclass
class LeaseState:
    lease_id: str
    body: bytes
    holds: int = 1  # the callback's own hold
    request_holds: int = 0  # yielded requests not yet at the scheduler (part of holds)
    callback_done: bool = False
    children: list[NewRequest] = field(default_factory=list)
    failure: str | None = None
    error: str | None = None  # the failure's detail, for its record
    repeats: int = 0  # failures of the same reason after the first
    cause: BaseException | None = None  # the last exception recorded (each counts once)
    requeue_reason: str | None = None
    void: bool = False  # the frontier was purged under it: its output is not written
    answered: bool = False  # its response or failure reached the spider (``answer``)

    @property
    def detail(self) -> str | None:
        """The failure's detail, with how many more of its reason there were."""
        if not self.repeats:
            return self.error
        more = f"and {self.repeats} more of the same reason: see the node's log"
        return more if self.error is None else f"{self.error} ({more})"

    @property
    def outcome(self) -> Outcome:
        if self.requeue_reason is not None:
            return "requeue"
        return "failed" if self.failure is not None else "done"


OnComplete = Callable[[LeaseState], None]
OnProgress = Callable[[str, list[NewRequest]], None]


class AckTracker:
    def __init__(self, on_complete: OnComplete, on_progress: OnProgress) -> None:
        self._on_complete = on_complete
        self._on_progress = on_progress
        self._leases: dict[str, LeaseState] = {}

    def __len__(self) -> int:
        return len(self._leases)

    def tracks(self, lease_id: object) -> TypeGuard[str]:
        return isinstance(lease_id, str) and lease_id in self._leases

    def held(self) -> list[str]:
        return list(self._leases)

    def states(self) -> list[LeaseState]:
        return list(self._leases.values())

    def void_all(self) -> int:
        """The frontier was purged: what the leases held now yield is not written."""
        for state in self._leases.values():
            state.void = True
            state.children.clear()
        return len(self._leases)

    def start(self, lease_id: str, body: bytes) -> None:
        self._leases[lease_id] = LeaseState(lease_id, body)

    def hold_request(self, lease_id: str) -> None:
        """The callback yielded a request; it is on its way to the scheduler."""
        state = self._leases[lease_id]
        state.holds += 1
        state.request_holds += 1

    def add_child(self, lease_id: str, request: NewRequest | None) -> None:
        """A yielded request reached the scheduler (``None``: it could not be stored)."""
        state = self._leases[lease_id]
        if request is not None and not state.void:
            state.children.append(request)
        state.request_holds -= 1
        self._release(state)

    def replace(self, lease_id: str, request: NewRequest | None) -> None:
        """A request that carries the lease's meta reached the scheduler. Before the download
        was answered, it answers it (a redirect, a retry): it is enqueued and the lease ends
        with it. After, the spider's code made it from the leased request (a copy handed to
        ``engine.crawl()``, outside the callback's output): it is a child of the lease. None:
        it could not be stored (the lease was failed with why), and the lease ends alike."""
        state = self._leases[lease_id]
        if request is not None and not state.void:
            state.children.append(request)
        if not state.answered:
            self.callback_done(lease_id)

    def answer(self, lease_id: str) -> None:
        """The lease's response (or download failure) reached the spider."""
        state = self._leases.get(lease_id)
        if state is not None:
            state.answered = True

    def fail(
        self,
        lease_id: str,
        reason: str,
        error: str | None = None,
        cause: BaseException | None = None,
    ) -> None:
        """Record why the request failed; the first reason wins, and its detail counts the
        failures of the same reason after it (a page's eight requests not stored). An
        exception (``cause``) recorded again, as a callback's reaches the lease by the
        output, ``process_spider_exception`` and ``spider_error``, counts once."""
        state = self._leases.get(lease_id)
        if state is None or (cause is not None and cause is state.cause):
            return
        state.cause = cause or state.cause
        if state.failure is None:
            state.failure = reason
            state.error = error
        elif state.failure == reason:
            state.repeats += 1

    def requeue(self, lease_id: str, reason: str) -> None:
        state = self._leases.get(lease_id)
        if state is not None and state.requeue_reason is None:
            state.requeue_reason = reason

    def callback_done(self, lease_id: str) -> None:
        """Release the callback's hold; safe to call more than once."""
        state = self._leases.get(lease_id)
        if state is None or state.callback_done:
            return
        state.callback_done = True
        self._release(state)

    def hold(self, lease_id: str) -> None:
        """One more piece of work of this lease is open (an item entering the pipelines:
        released by the item's ``item_scraped``/``item_dropped``/``item_error`` signal,
        which names the response, so pipelines may return any object)."""
        self._leases[lease_id].holds += 1

    def release(self, lease_id: str) -> None:
        state = self._leases.get(lease_id)
        if state is not None:
            self._release(state)

    def _release(self, state: LeaseState) -> None:
        state.holds -= 1
        if state.holds <= 0:
            del self._leases[state.lease_id]
            self._on_complete(state)
        elif state.callback_done and state.children:
            children, state.children = state.children, []
            state.holds += 1  # released by the caller once the children are written
            self._on_progress(state.lease_id, children)

    def finish_stragglers(self) -> list[str]:
        """Release callback and request holds no signal released (a yielded request
        dropped before the scheduler). Call only when nothing is in flight."""
        stragglers = [
            s.lease_id for s in self._leases.values() if not s.callback_done or s.request_holds
        ]
        for lease_id in stragglers:
            state = self._leases[lease_id]
            leaked, state.request_holds = state.request_holds, 0
            if state.callback_done:  # only leaked request holds keep it: release them
                state.holds -= leaked - 1
                self._release(state)
            else:
                state.holds -= leaked
                self.callback_done(lease_id)
        return stragglers

    def drain(self) -> list[LeaseState]:
        """Forget every lease (node stopping); the caller returns them to the queue."""
        states = list(self._leases.values())
        self._leases.clear()
        return states
