"""``FrontierAdmin``: what an operator sees and fixes in a spider's shared state (no Scrapy).

``snapshot()`` reads the frontier, seeds, nodes and politeness keys (layout in
docs/redis-keys.md) against the server time of the spider's Redis (on a Redis
Cluster: the master of its slot), in one pipelined round trip plus incremental
scans of the collections that can grow large (failed records, invalid seeds,
politeness keys), so it never blocks Redis. The scans visit every master of a
cluster. ``ledger()`` reads the
crawl ledger the nodes write (``crawler.frontier.ledger_view``).
``requeue_expired()`` returns expired leases to the queue (``lua/requeue.lua``), and
``requeue_seeds()`` the seeds held by nodes whose hold expired to the seed key
(``lua/seed_reclaim.lua``, as the nodes do).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, Literal, TypedDict

import orjson

from crawler.extensions.ledger_layout import LedgerKeys
from crawler.frontier.dedup_summary import dedup_summary
from crawler.frontier.inspect import SCAN_COUNT, node_beat
from crawler.frontier.keys import glob_escape
from crawler.frontier.ledger_view import LedgerView, read_ledger
from crawler.frontier.partitions import spider_parts
from crawler.frontier.seed_holds import SeedKeys, held_seeds, reclaim_call
from crawler.frontier.seed_queue import SEED_COUNT_COMMANDS
from crawler.lua import frontier_script, script_text, text
from crawler.redis_connection import SyncRedis, server_time_ms

INCIDENTS_SHOWN = 20  # latest incident records in a snapshot
REQUEUE_BATCH = 1000  # leases returned per script call


# late: two heartbeats missed; dead: silent past the lease timeout, still holding leases;
# gone: dead and its leases all reclaimed (status hides it unless --all)
NodeState = Literal["live", "late", "dead", "gone"]


class NodeInfo(TypedDict):
    node: str
    live: bool  # its heartbeats still count (state live or late)
    state: NodeState
    leases: int
    expires_in: float  # seconds until the node counts as dead (negative: silent that long)
    heartbeat_ago: float  # seconds since its last heartbeat (assuming the node ttl given)


class SiteInfo(TypedDict):
    site: str
    factor: float  # share of the configured rate, as last stored (recovers over time)
    cooldown_left: float  # seconds


class DedupInfo(TypedDict):
    mode: str  # exact | exact+ttl | compact | bloom
    entries: int
    bytes: int  # Redis MEMORY USAGE of the mode's keys
    fill: float | None  # bloom: share of the newest slice used
    fp_rate: float  # bloom: estimated false-positive rate (0 for exact modes)


class Snapshot(TypedDict):
    spider: str
    server_time: float  # Redis TIME, epoch seconds
    queued: int  # in Redis and, with FRONTIER_QUEUE_MAX, spilled to Kafka
    spilled: int  # of those, waiting in the Kafka backlog
    leased: int
    expired: int
    dedup: int  # URLs recorded by the dupefilter (every mode whose keys exist)
    dedup_modes: list[DedupInfo]
    failed: int
    failed_by_reason: dict[str, int]
    invalid_seeds: int
    invalid_by_reason: dict[str, int]
    seeds_key: str  # where the spider's seeds are pushed (its redis_key, else SEEDS_KEY)
    invalid_key: str  # where invalid seeds are moved
    seeds_waiting: int
    seeds_held: int  # taken by nodes, their requests not yet in the frontier
    seeds_held_expired: int  # of those, held by nodes whose hold expired (killed): requeue
    nodes: list[NodeInfo]
    politeness: list[SiteInfo]
    incidents: list[dict[str, Any]]  # frontier state found lost (crawler.frontier.epoch), last 20


def _reason(record: bytes | str) -> str:
    try:
        data = orjson.loads(record)
    except orjson.JSONDecodeError:
        return "unreadable"
    return str(data.get("reason", "unknown")) if isinstance(data, dict) else "unreadable"


def discover_spiders(client: SyncRedis) -> list[str]:
    """Spiders with a queue, nodes, dedup set or seed list in this Redis database."""
    found: set[str] = set()
    for suffix in ("queue:levels", "nodes", "dupefilter*"):
        for key in client.scan_iter(match=f"{{*}}:{suffix}", count=SCAN_COUNT):
            found.add(text(key)[1:].split("}:", 1)[0])
    for key in client.scan_iter(match="*:start_urls", count=SCAN_COUNT):
        found.add(text(key)[: -len(":start_urls")])
    return sorted(found)


def count_seeds(pipe: Any, key: str, redis_type: str) -> None:
    """Queue the count of the seeds waiting in ``key``, a list, set or sorted set (as
    ``SEEDS_TYPE`` makes them; ``redis_type`` is what Redis's ``TYPE`` says of it now)."""
    command = SEED_COUNT_COMMANDS.get(redis_type)
    if command is None:
        raise ValueError(
            f"the seed key {key} is a Redis {redis_type}, not a list, set or sorted set: "
            "no node can read seeds from it (see SEEDS_TYPE)"
        )
    pipe.execute_command(command, key)


def leases_per_node(inflight: Iterable[bytes | str]) -> Counter[str]:
    """Leases each node holds, from the values of the ``inflight`` hash
    (``<node>\\t<score>\\t<JSON>``)."""
    return Counter(text(record).split("\t", 1)[0] for record in inflight)


class FrontierAdmin:
    def __init__(
        self,
        client: SyncRedis,
        spider: str,
        *,
        seeds_key: str | None = None,
        invalid_key: str | None = None,
        politeness_key: str = "politeness:{%(site)s}",
        node_ttl: float = 60.0,
        heartbeat_interval: float = 5.0,
    ) -> None:
        self.redis = client
        self.spider = spider
        self.parts = spider_parts(client, spider)
        self.keys = self.parts[0]  # the spider's own keys: incidents, the server clock
        self.seeds_key = seeds_key or f"{spider}:start_urls"
        self.invalid_key = invalid_key or f"{self.seeds_key}:invalid"
        self.seed_keys = SeedKeys(self.seeds_key, self.invalid_key, self.parts)
        self.politeness_affixes = tuple(politeness_key.split("%(site)s", 1))
        self.node_ttl = node_ttl
        self.heartbeat_interval = heartbeat_interval
        self._requeue = client.register_script(frontier_script("queue", "requeue"))
        self._reclaim_seeds = client.register_script(
            script_text("crawler.frontier", "seed_reclaim")
        )

    def snapshot(self) -> Snapshot:
        """The spider's state now, summed over every part of its frontier."""
        k = self.keys
        now_ms = server_time_ms(self.redis, k.epoch)
        seeds_type = text(self.redis.type(self.seeds_key))
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.llen(self.invalid_key)
            count_seeds(pipe, self.seeds_key, seeds_type)
            pipe.lrange(k.incidents, -INCIDENTS_SHOWN, -1)
            for part in self.parts:
                pipe.get(part.queue_count)
                pipe.zrange(part.leases, 0, -1, withscores=True)
                pipe.hvals(part.inflight)
                pipe.hlen(part.failed)
                pipe.zrange(part.nodes, 0, -1, withscores=True)
                pipe.get(part.backlog)
                pipe.hgetall(part.beats)
            invalid, seeds, incidents, *counts = pipe.execute()
        spilled = sum(max(0, int(n or 0)) for n in counts[5::7])
        queued = sum(max(0, int(n or 0)) for n in counts[0::7]) + spilled
        leases = [lease for found in counts[1::7] for lease in found]
        per_node = leases_per_node(record for found in counts[2::7] for record in found)
        nodes: dict[str, float] = {}  # every node beats in every part: its latest beat counts
        for found in counts[4::7]:
            for node, alive_until in found:
                nodes[text(node)] = max(alive_until, nodes.get(text(node), alive_until))
        beats: dict[str, tuple[float, float]] = {}  # node -> (its last beat, its interval), ms
        for found in counts[6::7]:
            for node, value in found.items():
                beat = node_beat(value)
                if beat.at_ms > beats.get(text(node), (0.0, 0.0))[0]:
                    beats[text(node)] = (beat.at_ms, beat.interval_ms)
        holds = held_seeds(self.redis, self.seed_keys, now_ms)
        dedup = [
            DedupInfo(mode=d.mode, entries=d.entries, bytes=d.bytes, fill=d.fill, fp_rate=d.fp_rate)
            for d in dedup_summary(self.redis, self.parts)
        ]
        return Snapshot(
            spider=self.spider,
            server_time=now_ms / 1000,
            queued=queued,
            spilled=spilled,
            leased=len(leases),
            expired=sum(1 for _, deadline in leases if deadline <= now_ms),
            dedup=sum(mode["entries"] for mode in dedup),
            dedup_modes=dedup,
            failed=sum(int(n) for n in counts[3::7]),
            failed_by_reason=self._failed_reasons(),
            invalid_seeds=int(invalid),
            invalid_by_reason=self._invalid_reasons(),
            seeds_key=self.seeds_key,
            invalid_key=self.invalid_key,
            seeds_waiting=int(seeds),
            seeds_held=holds.held,
            seeds_held_expired=holds.expired,
            nodes=[
                self._node(node, alive_until, now_ms, per_node, beats.get(node))
                for node, alive_until in sorted(nodes.items())
            ],
            politeness=self._politeness(now_ms),
            incidents=[orjson.loads(record) for record in incidents],
        )

    def _node(
        self,
        node: str,
        alive_until: float,
        now_ms: int,
        leases: Counter[str],
        beat: tuple[float, float] | None,
    ) -> NodeInfo:
        """``beat``: the node's last beat and heartbeat interval (ms) as it recorded them; a
        node that did not (an older version) is read with this command's settings."""
        expires_in = (alive_until - now_ms) / 1000
        ago = self.node_ttl - expires_in
        interval = self.heartbeat_interval
        if beat is not None:
            ago = max(0.0, now_ms - beat[0]) / 1000
            interval = beat[1] / 1000 or interval
        held = leases.get(node, 0)
        state: NodeState = "late" if ago > 2 * interval else "live"
        if expires_in <= 0:
            state = "dead" if held else "gone"
        return NodeInfo(
            node=node,
            live=expires_in > 0,
            state=state,
            leases=held,
            expires_in=round(expires_in, 3),
            heartbeat_ago=round(ago, 3),
        )

    def _failed_reasons(self) -> dict[str, int]:
        reasons = Counter(
            _reason(record)
            for part in self.parts
            for _, record in self.redis.hscan_iter(part.failed, count=SCAN_COUNT)
        )
        return dict(reasons.most_common())

    def _invalid_records(self) -> Iterator[bytes | str]:
        start = 0
        while chunk := self.redis.lrange(self.invalid_key, start, start + SCAN_COUNT - 1):
            yield from chunk
            start += len(chunk)

    def _invalid_reasons(self) -> dict[str, int]:
        return dict(Counter(_reason(record) for record in self._invalid_records()).most_common())

    def _politeness(self, now_ms: int) -> list[SiteInfo]:
        prefix, suffix = self.politeness_affixes
        pattern = f"{glob_escape(prefix)}*{glob_escape(suffix)}"
        keys = sorted(text(key) for key in self.redis.scan_iter(match=pattern, count=SCAN_COUNT))
        if not keys:
            return []
        with self.redis.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.hmget(key, "factor", "cooldown")
            states: list[list[Any]] = pipe.execute()
        return [
            SiteInfo(
                site=key[len(prefix) : len(key) - len(suffix)],
                factor=float(factor or 1),
                cooldown_left=max(0.0, (float(cooldown or 0) - now_ms) / 1000),
            )
            for key, (factor, cooldown) in zip(keys, states, strict=True)
        ]

    def ledger(self, crawl_id: str, minutes: int = 5) -> LedgerView:
        """The crawl's totals and the sums of its last ``minutes`` per-minute buckets."""
        # every node beats in every part: part 0 says which are alive
        return read_ledger(self.redis, self.spider, self.parts[0].nodes, crawl_id, minutes)

    def requeue_expired(self, crawl_id: str | None = None) -> int:
        """Return every expired lease to the queue now (every part); count them in the
        crawl's ledger (in the same step in part 0, whose hash tag the ledger shares)."""
        ledger = LedgerKeys.for_crawl(self.spider, crawl_id).total if crawl_id is not None else None
        total = 0
        for part in self.parts:
            keys = [part.leases, part.inflight, part.queue_levels, part.queue_count]
            if ledger is not None and part.part == 0:
                keys.append(ledger)
            returned = self._requeue_part(keys)
            if ledger is not None and part.part and returned:
                self.redis.hincrby(ledger, "reclaimed", returned)
            total += returned
        return total

    def _requeue_part(self, keys: list[str]) -> int:
        total = 0
        while True:
            returned, examined = self._requeue(keys=keys, args=[REQUEUE_BATCH])
            total += int(returned)
            if int(examined) < REQUEUE_BATCH:
                return total

    def requeue_seeds(self, source: str) -> int:
        """Return the seeds held by nodes whose hold expired (killed before their requests
        were in the frontier) to the seed key, a ``source`` (``SEEDS_TYPE``: ``list``,
        ``set`` or ``zset``), as any node does (``lua/seed_reclaim.lua``); how many."""
        keys, args = reclaim_call(self.seed_keys, source)
        return int(self._reclaim_seeds(keys=keys, args=args))
