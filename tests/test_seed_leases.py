"""Seeds are taken into a node's hold, not popped: no seed is lost when a node dies."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest
import redis
import redis.asyncio
from scrapy import Request
from scrapy.utils.request import fingerprint

from crawler.demo.nodes import start_node, stop_node
from crawler.demo.site import Site
from crawler.frontier.dedup import DIGEST_BYTES
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.seed_holds import SeedKeys
from crawler.frontier.seed_queue import LetGo, SeedQueue
from crawler.frontier.seed_settings import SeedSource
from crawler.lua import text
from crawler.redis_outage import OutageGuard
from tests.cluster import LOCAL_SITE_SETTINGS, logs, wait_for_log
from tests.faults import FAST_LEASES

KEYS = SeedKeys(
    "spider:start_urls", "spider:start_urls:invalid", (FrontierKeys.for_spider("spider"),)
)


def _fill(client: redis.Redis, source: SeedSource, seeds: list[str]) -> None:
    if source is SeedSource.LIST:
        client.lpush(KEYS.seeds, *seeds)
    elif source is SeedSource.SET:
        client.sadd(KEYS.seeds, *seeds)
    else:
        client.zadd(KEYS.seeds, {seed: index for index, seed in enumerate(seeds)})


@pytest.mark.parametrize("source", list(SeedSource))
def test_a_dead_nodes_seeds_go_back_and_are_taken_again(
    redis_url: str, redis_client: redis.Redis, source: SeedSource
) -> None:
    seeds = [f"http://e.com/{i}" for i in range(6)]
    _fill(redis_client, source, seeds)

    async def run() -> tuple[list[bytes], int, int, list[bytes]]:
        client = redis.asyncio.Redis.from_url(redis_url)
        dead = SeedQueue(client, KEYS, source, node_id="dead", hold_ms=300)
        live = SeedQueue(client, KEYS, source, node_id="live", hold_ms=60_000)
        try:
            taken = await dead.take(4, 0.1)  # and then the node dies: no done()
            early = await live.keep_alive()  # its hold has not expired yet
            await asyncio.sleep(0.4)
            returned = await live.keep_alive()
            assert await live.keep_alive() == 0  # and forgets the dead holder
            again = await live.take(10, 0.1)
            return taken, early, returned, again
        finally:
            await client.aclose()

    taken, early, returned, again = asyncio.run(run())
    assert len(taken) == 4
    assert (early, returned) == (0, 4)
    assert sorted(again) == sorted(s.encode() for s in seeds)
    if source is SeedSource.LIST:
        assert again[:4] == taken  # returned seeds are taken first, in their order
    if source is SeedSource.ZSET:
        assert again == [s.encode() for s in reversed(seeds)]  # scores kept
    assert not redis_client.exists(KEYS.taken("dead"))
    assert redis_client.hkeys(KEYS.takers) == [b"live"]


def test_a_graceful_stop_returns_what_is_not_done(
    redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.lpush(KEYS.seeds, *[f"http://e.com/{i}" for i in range(5)])

    async def run() -> int:
        client = redis.asyncio.Redis.from_url(redis_url)
        queue = SeedQueue(client, KEYS, node_id="n", hold_ms=60_000)
        try:
            await queue.take(4, 0.1)
            await queue.done(LetGo(1))  # one seed's requests are in the frontier
            return await queue.give_back()
        finally:
            await client.aclose()

    assert asyncio.run(run()) == 3
    assert redis_client.llen(KEYS.seeds) == 4
    assert redis_client.rpop(KEYS.seeds) == b"http://e.com/1"  # next in line again
    assert not redis_client.exists(KEYS.taken("n"))
    assert redis_client.hget(KEYS.takers, "n") == b"0"  # expired: the next look forgets it


def test_a_seed_key_with_a_hash_tag_keeps_its_slot() -> None:
    tagged = SeedKeys("{zhihu}:start_urls", "i", (FrontierKeys.for_spider("zhihu"),))
    assert tagged.takers == "{zhihu}:start_urls:takers"
    assert KEYS.taken("n1") == "{spider:start_urls}:taken:n1"


SEEDS = 100_000
KILLS = 4


@pytest.mark.slow
def test_nodes_killed_every_2s_lose_no_seed(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    """100,000 seeds; a node SIGKILLed after reading seeds for 2 s, four times (restarted under
    a new id), then every node stopped: each seed is still waiting or known to the frontier.
    Before, each kill lost the batch it had popped and not yet written (up to 16 seeds)."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {
        **LOCAL_SITE_SETTINGS,
        **FAST_LEASES,
        "CRAWLER_STANDALONE_FEED": str(tmp_path / "items-%(node_id)s.jsonl"),
    }
    with Site(SEEDS, delay=0.2) as site:
        # One page per seed (the scope matches no link): the frontier's seen set counts seeds.
        for start in range(0, SEEDS, 10_000):
            redis_client.lpush(
                "pages:start_urls",
                *(
                    orjson.dumps({"url": site.url(i), "meta": {"crawler_scope": "elsewhere:1"}})
                    for i in range(start, start + 10_000)
                ),
            )

        def node(name: str) -> subprocess.Popen[bytes]:
            return start_node(
                "pages", env=env, settings=settings, log_path=tmp_path / f"{name}.log", node_id=name
            )

        survivor, victim = node("node-a"), node("node-b")
        everyone = [survivor, victim]
        try:
            for kill in range(KILLS):
                log = tmp_path / f"{'node-b' if kill == 0 else f'node-b{kill}'}.log"
                assert wait_for_log(log, "Reading seeds from Redis", timeout=60), logs(tmp_path)
                time.sleep(2)  # reading seeds for 2 s
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                victim = node(f"node-b{kill + 1}")
                everyone.append(victim)
            assert wait_for_log(tmp_path / f"node-b{KILLS}.log", "Reading seeds", timeout=60)
            time.sleep(2)
        finally:
            codes = [stop_node(process) for process in everyone]

    def urls_in(key: str) -> set[str]:
        return {orjson.loads(seed)["url"] for seed in redis_client.lrange(key, 0, -1)}

    waiting = urls_in("pages:start_urls")
    held = {
        text(key).rsplit(":", 1)[-1]: urls_in(text(key))
        for key in redis_client.scan_iter("{pages:start_urls}:taken:*")
    }
    held_urls = set().union(*held.values())
    urls = [site.url(i) for i in range(SEEDS)]
    fingerprints = [fingerprint(Request(url))[:DIGEST_BYTES] for url in urls]  # as stored
    dupefilter = FrontierKeys.for_spider("pages").dupefilter
    known = {
        url
        for start in range(0, SEEDS, 10_000)
        for url, flag in zip(
            urls[start : start + 10_000],
            redis_client.smismember(dupefilter, fingerprints[start : start + 10_000]),
            strict=True,
        )
        if flag
    }
    present = waiting | known | held_urls
    lost = [url for url in urls if url not in present]
    # A seed both waiting and known: its node was killed after writing its request and before
    # marking it done (at-least-once: it is fetched again), never a loss. A node killed last
    # may still hold its batch (its hold had not expired when the others stopped): the next
    # node to run returns it.
    print(
        f"seeds={SEEDS} kills={KILLS} waiting={len(waiting)} in frontier={len(known)} "
        f"held={ {node: len(seeds) for node, seeds in held.items()} } "
        f"both={len(waiting & known)} lost={len(lost)}"
    )
    assert codes == [0, *[-signal.SIGKILL] * KILLS, 0], logs(tmp_path)
    assert len(known) > 1000  # the nodes did take seeds
    assert lost == []
    killed = {"node-b", *(f"node-b{kill}" for kill in range(1, KILLS))}
    assert set(held) <= killed  # the graceful stops returned what they held
    everything = "".join(path.read_text() for path in tmp_path.glob("node-*.log"))
    assert "held by stopped nodes" in everything  # a live node returned the dead ones' seeds


def test_the_seed_reader_survives_a_crashing_take(
    redis_url: str, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in a take is logged with its traceback and the reader reads on; before, the
    start iterator ended and the node never read a seed again."""
    from scrapy.utils.project import get_project_settings
    from scrapy.utils.test import get_crawler

    from crawler import node_context
    from crawler.frontier.seed_settings import SeedSettings
    from crawler.node_context import NodeContext
    from crawler.spiders import seed_reader

    monkeypatch.setattr(seed_reader, "LOOP_RESTART_DELAY", 0.01)
    monkeypatch.setattr(node_context, "LOOP_RESTART_DELAY", 0.01)
    project = get_project_settings().copy_to_dict()
    wanted = ("SEEDS_", "FRONTIER_", "REDIS_", "MAX_IDLE_TIME_BEFORE_CLOSE")
    settings = {k: v for k, v in project.items() if k.startswith(wanted)}  # the reader's own
    settings["REDIS_URL"] = redis_url
    crawler = get_crawler(settings_dict=settings)
    context = NodeContext(crawler)
    monkeypatch.setattr(crawler, "get_extension", lambda cls: context)
    reader = seed_reader.SeedReader(crawler, SeedSettings.from_settings(crawler.settings, "pages"))
    real_take = reader.queue.take
    calls: list[int] = []

    async def flaky_take(count: int, timeout: float, let_go: LetGo) -> list[bytes]:
        calls.append(count)
        if len(calls) == 1:
            raise KeyError("a bug")
        return await real_take(count, timeout, let_go)

    monkeypatch.setattr(reader.queue, "take", flaky_take)
    redis_client.lpush("pages:start_urls", "http://h/1")

    async def first_batch() -> list[bytes]:
        try:
            return await reader._take(LetGo(0))
        finally:
            await context.redis.aclose()

    assert asyncio.run(first_batch()) == [b"http://h/1"]
    assert len(calls) == 2
    assert crawler.stats is not None
    assert crawler.stats.get_value("node/loop_crashed/seed_reader") == 1


class _LostReplies(redis.asyncio.Redis):
    """A client whose next ``lost`` script calls run on Redis and lose their reply (as a
    reply that takes longer than the socket timeout does): the caller sees a timeout."""

    lost = 0

    async def evalsha(self, sha: str, numkeys: int, *keys_and_args: str) -> object:  # type: ignore[override]
        reply = await super().evalsha(sha, numkeys, *keys_and_args)
        if self.lost:
            self.lost -= 1
            raise redis.TimeoutError("Timeout reading from socket")
        return reply


def test_a_take_sent_again_after_its_reply_was_lost_lets_go_of_the_last_batch_once(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A review: the take that lets the last batch go (``LTRIM`` of its count) ran, its reply
    was lost, and the outage guard sent it again: the retry trimmed the new batch too, seeds
    never crawled and held nowhere. The same at a graceful stop's let-go."""
    redis_client.lpush(KEYS.seeds, *[f"http://e.com/{i}" for i in range(10)])

    async def run() -> tuple[list[bytes], list[bytes], int]:
        client = _LostReplies.from_url(redis_url)
        assert isinstance(client, _LostReplies)
        guard = OutageGuard("t", lambda _: None, max_delay=0.01)
        queue = SeedQueue(client, KEYS, node_id="n", hold_ms=60_000)
        try:
            first = await guard.run(lambda: queue.take(5, 0.1))
            client.lost = 1  # the batch is in the frontier: the next take lets it go
            let_go = LetGo(5)
            second = await guard.run(lambda: queue.take(5, 0.1, let_go))
            client.lost = 1  # two of them are in the frontier, then a graceful stop
            let_go = LetGo(2)
            await guard.run(lambda: queue.done(let_go))
            return first, second, await queue.give_back()
        finally:
            await client.aclose()

    first, second, returned = asyncio.run(run())
    assert first == [f"http://e.com/{i}".encode() for i in range(5)]
    assert second == [f"http://e.com/{i}".encode() for i in range(5, 10)]
    assert returned == 3  # e.com/7-9 go back to the seed key
    assert redis_client.lrange(KEYS.seeds, 0, -1) == [
        f"http://e.com/{i}".encode() for i in (9, 8, 7)
    ]


def test_seeds_held_under_another_seed_key_type_go_back_without_an_error(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A review: seeds a killed node took from a list, the key then made a sorted set (the
    spider's SEEDS_TYPE changed): every node's look at expired holds raised (a Lua error on
    the missing score), and the seeds stayed held for ever. They go back with score 0."""
    # "nan x" reads as a score and a member, and ZADD refuses a score of nan (a second review)
    redis_client.lpush(KEYS.seeds, "http://e.com/1", "http://e.com/2", "nan x")

    async def run() -> tuple[int, int]:
        client = redis.asyncio.Redis.from_url(redis_url)
        dead = SeedQueue(client, KEYS, node_id="dead", hold_ms=100)
        live = SeedQueue(client, KEYS, SeedSource.ZSET, node_id="live", hold_ms=60_000)
        try:
            assert len(await dead.take(3, 0.1)) == 3  # and then it is killed
            await client.zadd(KEYS.seeds, {"http://e.com/3": 5})  # the key, a sorted set now
            await asyncio.sleep(0.2)
            return await live.keep_alive(), await live.keep_alive()
        finally:
            await client.aclose()

    assert asyncio.run(run()) == (3, 0)
    assert redis_client.zrange(KEYS.seeds, 0, -1, withscores=True) == [
        (b"http://e.com/1", 0.0),
        (b"http://e.com/2", 0.0),
        (b"nan x", 0.0),
        (b"http://e.com/3", 5.0),
    ]
