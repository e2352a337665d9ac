"""The node's buffer of leased requests (crawler.frontier.prefetch.Prefetch)."""

from __future__ import annotations

from typing import Any

from crawler.frontier.client import Lease
from crawler.frontier.prefetch import Prefetch


class Owner:
    """Just what filling the buffer asks of its owner."""

    def __init__(self) -> None:
        self.leased_count = 0

    def decode(self, lease: Lease) -> str:
        return lease.body.decode()

    def leased(self, count: int) -> None:
        self.leased_count += count

    def wake(self) -> None:
        pass

    def may_lease(self) -> bool:
        return False  # no refill in these tests


def test_leases_another_node_took_over_are_dropped_before_they_start() -> None:
    owner: Any = Owner()
    prefetch: Prefetch[str] = Prefetch(owner, prefetch=8, lease_ms=60_000, idle_poll=1.0)
    prefetch._filled([Lease(f"0/{n}", f"request {n}".encode()) for n in range(4)], 0)
    assert prefetch.drop({"0/1", "0/3", "2/9"}) == 2
    assert [lease.id for lease in prefetch.leases()] == ["0/0", "0/2"]
