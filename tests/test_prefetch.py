"""The node's buffer of leased requests (crawler.frontier.prefetch.Prefetch)."""

from __future__ import annotations

import asyncio
from typing import Any

from crawler.frontier.client import Lease
from crawler.frontier.prefetch import PICK_SCAN, Prefetch


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


def test_the_request_of_the_site_with_the_fewest_in_the_downloader_goes_first() -> None:
    """As Scrapy's DownloaderAwarePriorityQueue: leased requests of a site the downloader
    holds many of wait while another site's can go (an audit: a node's leases crowded a few
    of 100 sites, each request waiting for its site's DOWNLOAD_DELAY turn); the first leased
    among equals."""
    in_downloader = {"a": 2, "b": 1, "c": 0}
    owner: Any = Owner()
    prefetch: Prefetch[str] = Prefetch(
        owner,
        prefetch=8,
        lease_ms=60_000,
        idle_poll=1.0,
        load=lambda request: in_downloader[request[0]],
    )
    bodies = ["a1", "a2", "b1", "c1", "b2", "c2"]
    prefetch._filled([Lease(f"0/{n}", body.encode()) for n, body in enumerate(bodies)], 0)

    async def take_all() -> list[str]:  # a buffer down to half asks for a refill: a loop
        taken = []
        while (entry := prefetch.take()) is not None:
            taken.append(entry[1])
            in_downloader[entry[1][0]] += 1
        return taken

    assert asyncio.run(take_all()) == ["c1", "b1", "c2", "a1", "b2", "a2"]


def test_without_a_load_leases_go_in_order_and_with_one_only_the_first_are_weighed() -> None:
    """Strict priority order (ScrapyPriorityQueue): in the order leased. With a load, only the
    first PICK_SCAN leases are weighed (a review: 8.8 ms a take with 5,000 prefetched)."""
    owner: Any = Owner()
    weighed: list[str] = []

    def load(request: str) -> int:
        weighed.append(request)
        return 0

    in_order: Prefetch[str] = Prefetch(owner, prefetch=8, lease_ms=60_000, idle_poll=1.0)
    many: Prefetch[str] = Prefetch(owner, 500, 60_000, 1.0, load=load)
    leases = [Lease(f"0/{n}", f"r{n}".encode()) for n in range(200)]
    in_order._filled(leases[:3], 0)
    many._filled(leases, 0)

    async def take() -> tuple[list[str], str]:
        taken = [entry[1] for _ in range(3) if (entry := in_order.take()) is not None]
        first = many.take()
        assert first is not None
        return taken, first[1]

    assert asyncio.run(take()) == (["r0", "r1", "r2"], "r0")
    assert len(weighed) == PICK_SCAN
