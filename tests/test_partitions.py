"""A spider's frontier split into parts (``FRONTIER_PARTITIONS``), on a real Redis and on the
3-master Redis Cluster: routing by site, leasing from every part, links for other parts
written before their parent finishes, heartbeats and release in every part, the count kept."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import pytest
import redis
from redis.asyncio import Redis
from redis.crc import key_slot
from scrapy.settings import Settings

from crawler.frontier.client import Finish, FrontierClient, NewRequest
from crawler.frontier.epoch import recover
from crawler.frontier.keys import frontier_parts, part_tag
from crawler.frontier.lease_keeper import LeaseKeeper, Timing
from crawler.frontier.node_run import NodeRun
from crawler.frontier.partitioned import FULL_DEPTH, PartitionedFrontier
from crawler.frontier.partitions import PartitionsChanged, part_of, stored_partitions
from crawler.frontier.settings import FrontierSettings
from crawler.redis_connection import AsyncRedis, async_client, sync_client
from crawler.redis_outage import OutageGuard
from settings.resolve import resolve_settings
from tests.frontier_state import fingerprint_of, queued

T = TypeVar("T")
SPIDER = "parts"


def run(scenario: Callable[[AsyncRedis], Awaitable[T]], url: str) -> T:
    """``scenario`` with one client of ``url``, closed after it."""

    async def main() -> T:
        client = async_client(url, max_connections=8)
        try:
            return await scenario(client)
        finally:
            await client.aclose()

    return asyncio.run(main())


def frontier(
    client: AsyncRedis, node: str, count: int, spider: str = SPIDER
) -> PartitionedFrontier:
    parts = [FrontierClient(client, keys, node) for keys in frontier_parts(spider, count)]
    return PartitionedFrontier(spider, parts)


def page(site: str, path: str = "/", priority: int = 0) -> NewRequest:
    url = f"http://{site}{path}"
    body = f'{{"url":"{url}"}}'.encode()
    return NewRequest(fingerprint_of(url), -float(priority), body, site=site)


def sites_by_part(count: int, per_part: int) -> list[list[str]]:
    """``per_part`` site names for each part of a frontier of ``count`` parts."""
    found: list[list[str]] = [[] for _ in range(count)]
    n = 0
    while min(len(sites) for sites in found) < per_part:
        site = f"s{n}.test:8080"
        if len(found[part_of(site, count)]) < per_part:
            found[part_of(site, count)].append(site)
        n += 1
    return found


def test_the_parts_hash_slots_are_evenly_spread() -> None:
    for count in (2, 3, 12, 64):
        tags = [keys.tag for keys in frontier_parts("pages", count)]
        assert tags[0] == "{pages}" and len(set(tags)) == count
        ranges = sorted(key_slot(tag[1:-1].encode()) * count // 16384 for tag in tags)
        assert ranges == list(range(count))  # one part in each 1/count of the slots
    assert frontier_parts("pages", 1)[0].queue_count == "{pages}:queue:count"  # no part tag


def test_a_sites_part_is_stable_and_parts_are_balanced() -> None:
    assert part_of("example.com:443", 1) == 0
    assert part_of("example.com", 7) == part_of("example.com", 7)  # crc32: alike on every node
    counts = Counter(part_of(f"site{n}.test", 4) for n in range(4000))
    assert sorted(counts) == [0, 1, 2, 3]
    assert max(counts.values()) / min(counts.values()) < 1.2


def test_requests_go_to_their_sites_part_and_leases_come_from_every_part(
    redis_url: str, redis_client: redis.Redis
) -> None:
    sites = sites_by_part(3, 4)

    async def scenario(r: AsyncRedis) -> list[str]:
        node = frontier(r, "a", 3)
        added = await node.complete_turn([page(s) for part in sites for s in part], [])
        assert added.added == 12
        ids: list[str] = []
        while leases := await node.lease(5, 60_000, call=f"c{len(ids)}"):
            ids += [lease.id for lease in leases]
        done = await node.complete_turn([], [(Finish(i, "done"), []) for i in ids])
        assert set(done.statuses) == {"done"}
        assert await node.pending() == 0
        return ids

    for part, keys in enumerate(frontier_parts(SPIDER, 3)):
        assert keys.queue_levels == f"{part_tag(SPIDER, part, 3)}:queue:levels"
    ids = run(scenario, redis_url)
    assert sorted(Counter(lease_id.split("/")[0] for lease_id in ids).items()) == [
        ("0", 4),
        ("1", 4),
        ("2", 4),
    ]
    for part, keys in enumerate(frontier_parts(SPIDER, 3)):
        assert redis_client.scard(keys.dupefilter) == 4, part  # each part dedups its own sites
    assert stored_partitions(redis_client, SPIDER) == 3


def test_links_for_other_parts_are_in_redis_before_their_parent_finishes(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A crash between the two steps of a turn only re-crawls the parent."""
    (home, *_), (away, *_) = sites_by_part(2, 1)

    async def scenario(r: AsyncRedis) -> None:
        node = frontier(r, "a", 2)
        await node.complete_turn([page(home)], [])
        (parent,) = await node.lease(1, 300, call="one")
        real = node.parts[0].complete_many

        async def crash_when_finishing(
            finishes: list[Finish], children: list[Any], known: Any = None, **kwargs: Any
        ) -> Any:
            if finishes:
                raise ConnectionError("the node died here")
            return await real(finishes, children, known, **kwargs)

        node.parts[0].complete_many = crash_when_finishing  # type: ignore[method-assign]
        turn = [(Finish(parent.id, "done"), [page(home, "/same"), page(away, "/other")])]
        with pytest.raises(ConnectionError):
            await node.complete_turn([], turn)
        await asyncio.sleep(0.4)
        other = frontier(r, "b", 2)
        beat = await other.heartbeat([], 60_000, 60_000, 10, await other.open_epoch())
        assert beat.reclaimed == 1  # the parent is queued again: its page is crawled again
        assert await other.pending() == 2

    run(scenario, redis_url)
    home_keys, away_keys = frontier_parts(SPIDER, 2)
    assert queued(redis_client, away_keys) == 1  # the link to the other part is kept
    assert queued(redis_client, home_keys) == 1  # the parent, back; "/same" comes with it


def test_a_turn_looks_its_links_up_once_per_part(redis_url: str, redis_client: redis.Redis) -> None:
    """Links found for a part both by its own parents and by other parts' (written in two
    steps) are looked up in one lookup per part, sent at once: not one per step."""
    (home, *_), (away, *_) = sites_by_part(2, 1)
    links = {site: [page(site, f"/link{n}") for n in range(3)] for site in (home, away)}

    async def scenario(r: AsyncRedis) -> tuple[int, tuple[int, ...]]:
        node = frontier(r, "a", 2)
        await node.complete_turn([page(home), page(away)], [])
        parents = await node.lease(2, 60_000, call="both")
        await node.complete_turn(links[home] + links[away], [])  # seen before the turn
        by_part = {node.split_lease_id(lease.id)[0]: lease for lease in parents}
        turn = [
            (Finish(by_part[0].id, "done"), links[home] + links[away]),  # both parts' links
            (Finish(by_part[1].id, "done"), links[away] + links[home]),
        ]
        redis_client.config_resetstat()
        done = await node.complete_turn([], turn)
        lookups = redis_client.info("commandstats")["cmdstat_smismember"]["calls"]
        return lookups, done.dropped

    lookups, dropped = run(scenario, redis_url)
    assert dropped == tuple(range(12))  # every link was seen before
    assert lookups == 2


def test_heartbeats_reclaim_and_release_in_every_part(
    redis_url: str, redis_client: redis.Redis
) -> None:
    sites = sites_by_part(3, 2)

    async def scenario(r: AsyncRedis) -> None:
        dead = frontier(r, "dead", 3)
        live = frontier(r, "live", 3)
        await dead.complete_turn([page(s) for part in sites for s in part], [])
        epoch = await live.open_epoch()
        assert len(await dead.lease(6, 200, call="x")) == 6
        await asyncio.sleep(0.3)
        beat = await live.heartbeat([], 60_000, 60_000, 10, epoch)
        assert (beat.reclaimed, beat.epoch, beat.reclaimed_from) == (6, epoch, {"dead": 6})
        held = await live.lease(6, 60_000, call="y")
        beat = await live.heartbeat([lease.id for lease in held], 60_000, 60_000, 10, epoch)
        assert (beat.extended, beat.lost) == (6, ())
        assert await live.release([lease.id for lease in held]) == 6

    run(scenario, redis_url)
    for keys in frontier_parts(SPIDER, 3):
        assert queued(redis_client, keys) == 2
        assert redis_client.zcard(keys.nodes) == 0  # live left every registry (dead never beat)


def test_a_heartbeat_names_the_leases_another_node_took_over_in_every_part(
    redis_url: str,
) -> None:
    """A node whose heartbeats did not reach Redis for the lease timeout learns which of its
    leases are another node's now (it drops those it has not started: no second fetch)."""
    sites = sites_by_part(3, 1)

    async def scenario(r: AsyncRedis) -> None:
        slow = frontier(r, "slow", 3)
        other = frontier(r, "other", 3)
        await slow.complete_turn([page(s) for part in sites for s in part], [])
        epoch = await slow.open_epoch()
        held = await slow.lease(3, 200, call="x")
        await asyncio.sleep(0.3)
        assert (await other.heartbeat([], 60_000, 60_000, 10, epoch)).reclaimed == 3
        assert len(await other.lease(3, 60_000, call="y")) == 3
        beat = await slow.heartbeat([lease.id for lease in held], 60_000, 60_000, 10, epoch)
        assert sorted(beat.lost) == sorted(lease.id for lease in held)  # "<part>/<id>"
        assert beat.extended == 0

    run(scenario, redis_url)


def test_lease_calls_start_at_a_part_weighted_by_its_depth() -> None:
    node = frontier(Redis.from_url("redis://127.0.0.1:1"), "a", 3)  # never connects
    for part, depth in zip(node.parts, (60, 20, 0), strict=True):
        part.queued = depth
    firsts = Counter(node._lease_order(f"call-{n}")[0] for n in range(4000))
    assert 0.65 < firsts[0] / 4000 < 0.77  # 61/83
    assert 0.19 < firsts[1] / 4000 < 0.31  # 21/83
    assert firsts[2] > 0  # an empty part is still asked, first now and then
    assert node._lease_order("again") == node._lease_order("again")  # a call sent again
    assert sorted(node._lease_order("any")) == [0, 1, 2]  # and every part after the first


def test_deep_parts_and_parts_not_heard_from_are_asked_alike() -> None:
    """Past FULL_DEPTH a part's depth no longer weighs (its own links would make the deepest
    part grow fastest); a part that has not reported a depth yet counts as full, not empty."""
    node = frontier(Redis.from_url("redis://127.0.0.1:1"), "a", 3)  # never connects
    for part, depth in zip(node.parts, (50 * FULL_DEPTH, FULL_DEPTH, None), strict=True):
        part.queued = depth
    firsts = Counter(node._lease_order(f"call-{n}")[0] for n in range(6000))
    for index in range(3):
        assert 0.29 < firsts[index] / 6000 < 0.38


def test_the_heartbeat_refreshes_the_depth_of_parts_the_node_does_not_lease_from(
    redis_url: str,
) -> None:
    """A part this node seldom leases from would keep the depth it saw last, however its
    queue grew since (other nodes' links): a stale weight that starves it."""
    home, away = sites_by_part(2, 1)

    async def scenario(r: AsyncRedis) -> tuple[int | None, int | None]:
        node, other = frontier(r, "node", 2), frontier(r, "other", 2)
        epoch = await node.open_epoch()
        await other.complete_turn([page(home[0], "/0")], [])
        assert len(await node.lease(1, 60_000, call="first")) == 1  # its part says 0 left
        await other.complete_turn([page(away[0], f"/{n}") for n in range(40)], [])
        await node.heartbeat([], 60_000, 60_000, 10, epoch)
        return node.parts[0].queued, node.parts[1].queued

    assert run(scenario, redis_url) == (0, 40)


def test_a_crawl_keeps_the_partition_count_it_started_with(redis_url: str) -> None:
    async def scenario(r: AsyncRedis) -> str:
        await frontier(r, "a", 3).open_epoch()
        with pytest.raises(PartitionsChanged) as refused:
            await frontier(r, "b", 2).lease(1, 1000, call="c")
        return str(refused.value)

    message = run(scenario, redis_url)
    assert "split into 3 parts" in message
    assert "FRONTIER_PARTITIONS=2" in message
    assert "-s FRONTIER_PARTITIONS=3" in message
    assert f"crawler purge {SPIDER}" in message


def test_a_partitioned_spider_spreads_over_the_cluster_masters(redis_cluster_url: str) -> None:
    spider = "spread"
    cluster = sync_client(redis_cluster_url)
    assert isinstance(cluster, redis.RedisCluster)
    masters = Counter(
        cluster.get_node_from_key(keys.queue_levels).name  # type: ignore[no-untyped-call]
        for keys in frontier_parts(spider, 6)
    )
    cluster.close()
    assert sorted(masters.values()) == [2, 2, 2]  # the parts' slots are evenly spread
    sites = sites_by_part(6, 3)

    async def scenario(r: AsyncRedis) -> None:
        node = frontier(r, "n", 6, spider)
        await node.complete_turn([page(s) for part in sites for s in part], [])
        taken = 0
        while leases := await node.lease(4, 60_000, call=f"c{taken}"):
            taken += len(leases)
            # each parent links to a page of every site: most go to other parts (other masters)
            links = [page(s, "/next") for part in sites for s in part]
            done = await node.complete_turn([], [(Finish(leases[0].id, "done"), links)])
            assert done.statuses == ("done",)
            rest: list[tuple[Finish, list[NewRequest]]] = [
                (Finish(lease.id, "done"), []) for lease in leases[1:]
            ]
            await node.complete_turn([], rest)
        assert taken == 36  # 18 roots, then 18 links found once each (the dedup dropped the rest)
        assert await node.pending() == 0

    run(scenario, redis_cluster_url)


@pytest.mark.parametrize(
    ("given", "refusal"),
    [
        ({"FRONTIER_PARTITIONS": "0"}, "FRONTIER_PARTITIONS=0 must be between 1 and 1024"),
        ({"FRONTIER_PARTITIONS": "2000"}, "FRONTIER_PARTITIONS=2000 must be between 1 and 1024"),
        ({"FRONTIER_QUEUE_MAX": "-1"}, r"FRONTIER_QUEUE_MAX=-1 must be >= 0"),
        (
            {"FRONTIER_QUEUE_MAX": "1000", "KAFKA_BOOTSTRAP_SERVERS": ""},
            "FRONTIER_QUEUE_MAX=1000 spills to Kafka, but KAFKA_BOOTSTRAP_SERVERS is empty",
        ),
        (
            {
                "FRONTIER_QUEUE_MAX": "10",
                "KAFKA_BOOTSTRAP_SERVERS": "k:9092",
                "FRONTIER_SPILL_BATCH": "0",
            },
            "FRONTIER_SPILL_BATCH=0 must be >= 1",
        ),
        (
            {
                "FRONTIER_QUEUE_MAX": "10",
                "KAFKA_BOOTSTRAP_SERVERS": "k:9092",
                "FRONTIER_SPILL_BATCH": "200000",
            },
            r"FRONTIER_SPILL_BATCH=200000 must be <= 100000 \(the Kafka producer's local queue",
        ),
    ],
)
def test_wrong_partition_and_bound_settings_are_refused_at_start(
    given: dict[str, str], refusal: str
) -> None:
    settings = Settings({**resolve_settings({}), "REDIS_URL": "redis://127.0.0.1:6379", **given})
    with pytest.raises(ValueError, match=refusal):
        FrontierSettings.from_settings(settings)


def test_a_node_recovering_from_lost_data_leaves_no_lease_of_its_own_behind(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """Redis came back empty; before the node's heartbeat noticed, a write leased requests in
    the new data. Recovery queues every request the node held once and finishes those leases:
    none waits out the lease timeout to be reclaimed and fetched a second time."""
    sites = sites_by_part(2, 2)

    async def scenario(r: AsyncRedis) -> None:
        node = frontier(r, "n", 2)
        old_bodies = [page(site, "/old").body for site in sites[0]]  # leased before the loss
        await node.complete_turn([page(s) for part in sites for s in part], [])
        taken = await node.lease(4, 60_000, call="after-the-loss")
        held = old_bodies + [lease.body for lease in taken]
        held_ids = ["0/000000000001", "1/000000000002"] + [lease.id for lease in taken]
        by_url = Holdings([], []).fingerprint  # pages the write leased are recorded already
        await recover(node, "the lost epoch", "", held, held_ids, fingerprint=by_url)
        assert await node.pending() == 6  # each held request queued once, nothing leased

    run(scenario, redis_url)
    for keys in frontier_parts(SPIDER, 2):
        assert redis_client.zcard(keys.leases) == redis_client.hlen(keys.inflight) == 0


class Counts:
    def __init__(self, counter: Counter[str]) -> None:
        self.counter = counter

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self.counter[key] += count


class Holdings:
    """What a node holds, as its lease keeper sees it (crawler.frontier.holdings)."""

    def __init__(self, ids: list[str], bodies: list[bytes]) -> None:
        self.ids, self.bodies, self.dropped = ids, bodies, False

    def held_leases(self) -> list[str]:
        return self.ids

    def held_bodies(self) -> list[bytes]:
        return [] if self.dropped else self.bodies

    def fingerprint(self, body: bytes) -> str:
        return fingerprint_of(orjson.loads(body)["url"])

    def drop_buffered(self) -> None:
        self.dropped = True

    def forget_seen(self) -> None:
        pass

    def work_arrived(self) -> None:
        pass


async def node_holding_two(
    r: AsyncRedis,
) -> tuple[PartitionedFrontier, list[NewRequest], Holdings, LeaseKeeper]:
    """Node "n" of a 2-part frontier that leased both of its two pages, its lease keeper knowing
    a lost epoch."""
    node = frontier(r, "n", 2)
    pages = [page(s) for part in sites_by_part(2, 1) for s in part]
    await node.complete_turn(pages, [])
    taken = await node.lease(2, 60_000, call="held")
    holdings = Holdings([lease.id for lease in taken], [lease.body for lease in taken])
    timing = Timing(lease_timeout=60, heartbeat_interval=5, reclaim_batch=10)
    holder: Any = holdings  # just what recovering asks of the Holder protocol
    guard = OutageGuard("t", lambda _: None)
    run = NodeRun(r, node.keys, "n", 5)  # unclaimed: it beats nothing
    keeper = LeaseKeeper(node, holder, guard, Counts(Counter()), timing, node_run=run)
    keeper.epoch = "the lost epoch"
    return node, pages, holdings, keeper


def test_recovery_cut_short_by_an_outage_is_done_again_with_everything_held(
    redis_url: str,
) -> None:
    """Redis fails again while the node re-enqueues what it held: nothing is dropped before
    it is queued, so the heartbeat's next try queues it all (before, the buffered requests were
    gone by then, their leases in the new data finished: lost)."""

    async def scenario(r: AsyncRedis) -> None:
        node, _, holdings, keeper = await node_holding_two(r)
        real = node.complete_turn
        calls = 0

        async def failing_once(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise redis.exceptions.ConnectionError("Redis went away again")
            return await real(*args, **kwargs)

        node.complete_turn = failing_once  # type: ignore[method-assign]
        with pytest.raises(redis.exceptions.ConnectionError):
            await keeper._frontier_lost("")
        assert not holdings.dropped and not keeper.recovering
        await keeper._frontier_lost("")  # the next heartbeat
        assert holdings.dropped
        assert await node.pending() == 2  # both requests queued again, none leased

    run(scenario, redis_url)


def test_requests_queued_again_after_a_loss_are_recorded_by_the_new_dedup(
    redis_url: str,
) -> None:
    """A node re-enqueued what it held without fingerprints: the new dedup never learned them,
    so a link found later queued each once more (an audit: 33 of 95 pages fetched three times
    after a Redis restart without persistence)."""

    async def scenario(r: AsyncRedis) -> None:
        node, pages, _, keeper = await node_holding_two(r)
        await r.flushdb()  # Redis lost its data
        await keeper._frontier_lost("")
        assert await node.pending() == 2
        await node.complete_turn(pages, [])  # linked again
        assert await node.pending() == 2  # not queued a second time

    run(scenario, redis_url)
