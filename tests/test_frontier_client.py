"""The frontier's Lua scripts against a real Redis: leases, completion, reclaim, release."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import pytest
import redis
from redis.asyncio import Redis

from crawler.frontier.client import Completion, Finish, FrontierClient, LeaseAsk, NewRequest
from crawler.frontier.dedup import DedupConfig, DedupMode
from crawler.frontier.keys import FrontierKeys
from tests.aio import run
from tests.frontier_state import fingerprint_of, queue_entries, queued

KEYS = FrontierKeys.for_spider("unit")


def client_for(url: str, node: str) -> FrontierClient:
    return FrontierClient(Redis.from_url(url), KEYS, node)


def new(name: str, priority: int = 0, fingerprint: str | None = None) -> NewRequest:
    return NewRequest(
        fingerprint=fingerprint_of(name) if fingerprint is None else fingerprint,
        score=-float(priority),
        body=f'{{"url":"{name}"}}'.encode(),
    )


def test_enqueue_dedups_and_leases_by_priority(redis_url: str, redis_client: redis.Redis) -> None:
    async def scenario() -> None:
        a = client_for(redis_url, "a")
        first = await a.complete(None, "done", [new("low", 0), new("high", 5), new("low", 0)])
        again = await a.complete(None, "done", [new("high", 5), new("free", 1, fingerprint="")])
        assert (first.added, first.dropped, again.added, again.dropped) == (2, (2,), 1, (0,))
        leases = await a.lease(2, 60_000)
        assert [lease.body for lease in leases] == [b'{"url":"high"}', b'{"url":"free"}']
        assert await a.pending() == 3
        await a.aclose()

    run(scenario())
    assert redis_client.zcard(KEYS.leases) == 2
    records = [
        value.decode() if isinstance(value, bytes) else value
        for value in redis_client.hvals(KEYS.inflight)
    ]
    assert [record.split("\t")[0] for record in records] == ["a", "a"]


def test_complete_enqueues_children_and_only_owner_completes(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> None:
        a, b = client_for(redis_url, "a"), client_for(redis_url, "b")
        await a.complete(None, "done", [new("root")])
        (lease,) = await a.lease(1, 60_000)
        stolen = await b.complete(lease.id, "done", [])
        assert stolen.status == "stolen"
        done = await a.complete(lease.id, "done", [new("child1"), new("child2"), new("root")])
        assert (done.status, done.added, done.duplicates) == ("done", 2, 1)
        assert (await a.complete(lease.id, "done", [])).status == "gone"
        await a.aclose()
        await b.aclose()

    run(scenario())
    assert redis_client.zcard(KEYS.leases) == redis_client.hlen(KEYS.inflight) == 0
    assert queue_entries(redis_client, KEYS) == [(0, b'{"url":"child1"}'), (0, b'{"url":"child2"}')]


def test_failed_and_requeued_outcomes(redis_url: str, redis_client: redis.Redis) -> None:
    async def scenario() -> None:
        a = client_for(redis_url, "a")
        await a.complete(None, "done", [new("x", 3), new("y", 1)])
        x, y = await a.lease(2, 60_000)
        assert (await a.complete(x.id, "failed", [], b'{"reason":"boom"}')).status == "failed"
        assert (await a.complete(y.id, "requeue", [])).status == "requeue"
        (again,) = await a.lease(5, 60_000)
        assert (again.body, again.id) == (y.body, "000000000003")  # a new lease, a new id
        await a.aclose()

    run(scenario())
    assert redis_client.hgetall(KEYS.failed) == {b"000000000001": b'{"reason":"boom"}'}
    assert queued(redis_client, KEYS) == 0


def test_heartbeat_extends_own_leases_and_reclaims_expired_ones(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> None:
        dead, live = client_for(redis_url, "dead"), client_for(redis_url, "live")
        await live.complete(None, "done", [new("p", 7), new("q", 2)])
        lost = await dead.lease(1, 200)  # "dead" never extends it
        kept = await live.lease(1, 200)
        await asyncio.sleep(0.3)
        beat = await live.heartbeat([kept[0].id, "nonexistent"], 5_000, 60_000, 100, epoch="")
        # live's own lease was extended before the reclaim, so only dead's comes back.
        assert (beat.extended, beat.reclaimed, beat.lost) == (1, 1, ("nonexistent",))
        assert beat.reclaimed_from == {"dead": 1}  # the WARNING names whose (an audit)
        (back,) = await live.lease(5, 60_000)
        assert back.body == lost[0].body
        await dead.aclose()
        await live.aclose()

    run(scenario())
    assert redis_client.zscore(KEYS.nodes, "live") is not None


def test_after_a_redis_outage_the_first_beat_takes_no_live_nodes_leases(
    redis_url: str,
) -> None:
    """Redis's clock runs on while no beat reaches it: past the lease timeout every lease looks
    expired, and the first node back returned the leases of nodes as alive as itself (their
    pages fetched twice, no node dead). A node that finds its own beat late reclaims nothing."""

    async def scenario() -> None:
        a, b = client_for(redis_url, "a"), client_for(redis_url, "b")
        await a.complete(None, "done", [new("p", 7), new("q", 2)])
        held_a, held_b = await a.lease(1, 300), await b.lease(1, 300)
        for client, held in ((a, held_a), (b, held_b)):  # alive, beating
            await client.heartbeat([held[0].id], 300, 300, 100, epoch="")
        await asyncio.sleep(0.5)  # the outage: no beat, leases and nodes past their time
        first = await a.heartbeat([held_a[0].id], 300, 300, 100, epoch="")
        assert (first.extended, first.reclaimed) == (1, 0)
        late = await b.heartbeat([held_b[0].id], 300, 300, 100, epoch="")
        assert (late.extended, late.lost) == (1, ())  # b's lease is still b's
        await a.aclose()
        await b.aclose()

    run(scenario())


def test_release_returns_leases_with_their_priority(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> None:
        a = client_for(redis_url, "a")
        await a.complete(None, "done", [new("hi", 9), new("lo", 1)])
        leases = await a.lease(2, 60_000)
        assert await a.release([lease.id for lease in leases] + ["other"]) == 2
        assert [lease.body for lease in await a.lease(2, 60_000)] == [
            b'{"url":"hi"}',
            b'{"url":"lo"}',
        ]
        await a.aclose()

    run(scenario())


@pytest.mark.parametrize("mode", list(DedupMode))
def test_a_forced_request_is_enqueued_even_if_seen_and_recorded(
    redis_url: str, mode: DedupMode
) -> None:
    """Seeds: fetched when pushed again, and the links back to them are dropped."""
    fingerprint = "ab" * 20  # compact and bloom take Scrapy's 20-byte fingerprints

    def seed(force: bool) -> NewRequest:
        return NewRequest(fingerprint=fingerprint, score=0.0, body=b'{"url":"seed"}', force=force)

    async def scenario() -> tuple[int, ...]:
        a = FrontierClient(
            Redis.from_url(redis_url), KEYS, "a", DedupConfig.parse(mode.value, 0, 1000, 0.001)
        )
        first = await a.complete(None, "done", [seed(True)])
        again = await a.complete(None, "done", [seed(True)])
        link = await a.complete(None, "done", [seed(False)])
        await a.aclose()
        return first.added, again.added, link.added, len(link.dropped)

    assert run(scenario()) == (1, 1, 0, 1)


def test_a_lease_call_sent_again_gets_the_same_leases(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A lease whose reply was lost (client timeout) and is sent again with its call id takes
    nothing more: before, the first call's leases were orphaned until they expired."""

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        a = client_for(redis_url, "a")
        await a.complete(None, "done", [new(f"r{i}") for i in range(5)])
        first = await a.lease(2, 60_000, call="c1")
        again = await a.lease(2, 60_000, call="c1")  # the retry of the same call
        other = await a.lease(2, 60_000, call="c2")
        await a.aclose()
        return [x.id for x in first], [x.id for x in again], [x.id for x in other]

    first, again, other = run(scenario())
    assert first == again
    assert len(other) == 2 and not set(other) & set(first)
    assert redis_client.zcard(KEYS.leases) == 4
    assert queued(redis_client, KEYS) == 1


@pytest.mark.parametrize("mode", list(DedupMode))
def test_only_unseen_links_travel_with_their_bodies(redis_url: str, mode: DedupMode) -> None:
    """With the link check, the complete script gets the bodies of the unseen links only,
    and the outcome is the one without it: same additions, same positions dropped."""
    config = DedupConfig.parse(mode.value, 0, 1000, 0.001)

    def links(names: list[str]) -> list[NewRequest]:
        return [new(name, fingerprint=hashlib.sha1(name.encode()).hexdigest()) for name in names]

    async def scenario(link_check: bool, prefix: str) -> tuple[list[int], list[tuple[int, ...]]]:
        client = FrontierClient(
            Redis.from_url(redis_url),
            FrontierKeys.for_spider(prefix),
            "a",
            config,
            link_check=link_check,
        )
        script, bodies = client._turn, []

        async def counting(keys: list[str], args: list[Any]) -> object:
            bodies.append((len(args) - 7 - len(client.dedup.args)) // 3)
            return await script(keys=keys, args=args)

        client._turn = counting  # type: ignore[assignment]
        first = await client.complete(None, "done", links(["a1", "a2", "a3"]))
        again = await client.complete(None, "done", links(["a2", "b1", "a1", "b2", "b1"]))
        await client.aclose()
        return bodies, [first.dropped, again.dropped, (first.added, again.added)]

    checked_bodies, checked = run(scenario(True, "checked"))
    plain_bodies, plain = run(scenario(False, "plain"))
    assert checked == plain == [(), (0, 2, 4), (3, 2)]
    assert plain_bodies == [3, 5]
    assert checked_bodies == [3, 3]  # a2 and a1 were looked up and not sent; b1 twice is sent


def test_one_call_finishes_many_leases_each_as_told(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> Completion:
        a, b = client_for(redis_url, "a"), client_for(redis_url, "b")
        await a.complete(None, "done", [new(f"r{i}") for i in range(4)])
        done, failed, requeued = await a.lease(3, 60_000)
        (theirs,) = await b.lease(1, 60_000)
        result = await a.complete_many(
            [
                Finish(done.id, "done"),
                Finish(failed.id, "failed", b'{"reason":"boom"}'),
                Finish(requeued.id, "requeue"),
                Finish(theirs.id, "done"),  # b holds it: not a's to finish
                Finish("ffffffffffff", "done"),  # no such lease
            ],
            [new("child"), new("r0")],
        )
        await a.aclose()
        await b.aclose()
        return result

    result = run(scenario())
    assert result.statuses == ("done", "failed", "requeue", "stolen", "gone")
    assert result.status == "done"
    assert (result.added, result.dropped) == (1, (1,))
    assert redis_client.hlen(KEYS.failed) == 1
    assert redis_client.zcard(KEYS.leases) == 1  # b's
    assert [body for _, body in queue_entries(redis_client, KEYS)] == [
        b'{"url":"r2"}',  # requeued: back at the head of its level
        b'{"url":"child"}',
    ]


def test_the_queue_is_fifo_within_a_priority_and_returned_leases_go_first(
    redis_url: str, redis_client: redis.Redis
) -> None:
    async def scenario() -> list[list[bytes]]:
        a = client_for(redis_url, "a")
        await a.complete(None, "done", [new(f"p{i}", 0) for i in range(4)] + [new("hi", 2)])
        first = await a.lease(3, 60_000)  # hi, p0, p1
        await a.release([first[2].id, first[1].id])  # back in their order: p0, p1
        second = await a.lease(3, 60_000)
        await a.complete(None, "done", [new("p4", 0)])
        rest = await a.lease(10, 60_000)
        await a.aclose()
        return [[lease.body for lease in found] for found in (first, second, rest)]

    first, second, rest = run(scenario())
    assert first == [b'{"url":"hi"}', b'{"url":"p0"}', b'{"url":"p1"}']
    assert second == [b'{"url":"p0"}', b'{"url":"p1"}', b'{"url":"p2"}']
    assert rest == [b'{"url":"p3"}', b'{"url":"p4"}']
    assert queued(redis_client, KEYS) == 0
    assert redis_client.exists(KEYS.queue_levels) == 0  # emptied levels are taken off


def test_one_write_finishes_enqueues_and_leases_more(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """The write of a turn takes the node's next leases too (one call instead of two); its
    lease part is fenced by its call id like a lease call."""

    async def scenario() -> tuple[Completion, Completion]:
        a = client_for(redis_url, "a")
        (root,) = (await a.complete_many([], [new("root")], lease=LeaseAsk(1, 60_000, "c0"))).leases
        ask = LeaseAsk(5, 60_000, "c1")
        write = await a.complete_many([Finish(root.id, "done")], [new("x"), new("y")], lease=ask)
        again = await a.complete_many([], [], set(), lease=ask)  # the same call, sent again
        await a.aclose()
        return write, again

    write, again = run(scenario())
    assert (write.statuses, write.added) == (("done",), 2)
    assert [lease.body for lease in write.leases] == [b'{"url":"x"}', b'{"url":"y"}']
    assert again.leases == write.leases
    assert queued(redis_client, KEYS) == 0
    assert redis_client.zcard(KEYS.leases) == 2
