"""``FrontierInspector``: the queue, failed requests and leases of one spider, request by
request (``crawler queue``, ``crawler failed``, ``crawler leases``; no Scrapy).

Keys as in docs/redis-keys.md, each part's under its hash tag (``PartInspector``);
``FrontierInspector`` looks at every part of the spider's frontier.
Collections that can grow large are walked in steps of ``SCAN_COUNT`` (the queue's lists with
LRANGE, level by level in lease order; leases and failure records with ZSCAN/HSCAN), so memory
stays bounded by one step plus what is returned. ``retry`` moves a failure record back into
the queue with ``lua/retry_failed.lua``, one atomic step per record (counted in the crawl
ledger's ``retried``).
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from crawler.frontier import codec
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.partitions import part_of, spider_parts
from crawler.lua import data, frontier_script, text
from crawler.redis_connection import SyncRedis, server_time_ms
from crawler.scope import site_of

SCAN_COUNT = 1000  # entries asked for per scan step
URLS_SHOWN = 3  # URLs shown per node: those of its oldest leases
NO_DATA = "(no data)"  # URL and site of an entry whose request JSON cannot be read
RETRY_COUNT_META = "retry_times"  # Scrapy's RetryMiddleware count: a retried request starts over
# set on a failure record's request sent again, to its failure reason: a spider that counts its
# own retries in meta starts them over, and one that recorded something of the failure knows
FAILURE_RETRIED_META = "failure_retried"
# the reasons of the request's earlier failure records, oldest first, when it is retried again
FAILURES_BEFORE_META = "failure_retried_before"


@dataclass(frozen=True, slots=True)
class QueuedRequest:
    priority: int | float  # the negated queue score (Scrapy's request priority)
    url: str
    depth: int | None  # meta['depth'], None when the request has none
    site: str  # host[:port] of the URL (crawler.scope.site_of)


@dataclass(frozen=True, slots=True)
class SiteCounts:
    sites: dict[str, int]  # queued requests per site, most first
    scanned: int  # queue entries counted (fewer than queued when capped)
    queued: int  # the queue's length when the count started
    spilled: int = 0  # requests waiting in the Kafka backlog (FRONTIER_QUEUE_MAX), not in Redis


@dataclass(frozen=True, slots=True)
class FailedRecord:
    id: str
    stored: bytes  # the record as read: retry moves it only if it is still this
    fields: dict[str, Any]  # its JSON; empty when unreadable

    @property
    def reason(self) -> str:
        return str(self.fields.get("reason", "unreadable"))


@dataclass(slots=True)
class NodeLeases:
    node: str
    leases: int = 0
    expired: int = 0  # deadline passed: any node's heartbeat returns them to the queue
    oldest_age: float = 0.0  # seconds since its oldest lease was taken or extended (estimate)
    urls: list[str] = field(default_factory=list)  # of its oldest leases, URLS_SHOWN at most
    lease_timeout: float | None = None  # s, as its last heartbeat gave it (None: not recorded)


@dataclass(frozen=True, slots=True)
class NodeBeat:
    """A node's last heartbeat, as ``{<spider>}:beats`` records it (ms, Redis time)."""

    at_ms: float
    interval_ms: float  # 0: not recorded
    lease_ms: float | None  # None: not recorded (a node of a version before it)


def node_beat(value: bytes | str) -> NodeBeat:
    """Read a ``{<spider>}:beats`` value: ``<beat ms> <interval ms> <lease ms>``, its last
    fields missing in beats of older versions."""
    at, interval, lease, *_ = (*text(value).split(" "), "", "")
    return NodeBeat(float(at), float(interval or 0), float(lease) if lease else None)


def lease_body(record: bytes | str | None) -> bytes | None:
    """The request JSON of an inflight record ``<node>\t<score>\t<JSON>`` (None: none)."""
    if record is None:
        return None
    parts = data(record).split(b"\t", 2)
    return parts[2] if len(parts) == 3 else None


def _request(body: bytes | str | None) -> dict[str, Any]:
    if body is None:
        return {}
    try:
        decoded = orjson.loads(body if isinstance(body, str) else codec.plain(body))
    except ValueError:  # orjson.JSONDecodeError is one, as is a damaged compressed body
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _scored(reply: Any) -> list[tuple[str, float]]:
    """A WITHSCORES or ZSCAN reply as (member, score) pairs."""
    return [(text(member), float(score)) for member, score in reply]


def _queued(score: float, body: bytes | str) -> QueuedRequest:
    request = _request(body)
    meta = request.get("meta")
    depth = meta.get("depth") if isinstance(meta, dict) else None
    url = request.get("url")
    priority = -score
    return QueuedRequest(
        priority=int(priority) if priority.is_integer() else priority,
        url=url if isinstance(url, str) else NO_DATA,
        depth=depth if isinstance(depth, int) else None,
        site=site_of(url) if isinstance(url, str) else NO_DATA,
    )


class PartInspector:
    """One part of a spider's frontier (the whole frontier of an unpartitioned spider)."""

    def __init__(self, client: SyncRedis, keys: FrontierKeys) -> None:
        self.redis = client
        self.keys = keys
        self._retry = client.register_script(frontier_script("queue", "retry_failed"))

    def walk(self, limit: int = 0, step: int = SCAN_COUNT) -> Iterator[QueuedRequest]:
        """Queued requests in lease order (level by level, each list from its head),
        ``limit`` at most (0: all), read ``step`` at a time."""
        walked = 0
        levels = self.redis.zrange(self.keys.queue_levels, 0, -1, withscores=True)
        for level, score in _scored(levels):
            start = 0
            while not limit or walked < limit:
                size = step if not limit else min(step, limit - walked)
                chunk = self.redis.lrange(self.keys.queue_list(level), start, start + size - 1)
                for body in chunk:
                    yield _queued(score, body)
                walked, start = walked + len(chunk), start + len(chunk)
                if len(chunk) < size:
                    break

    def queue_head(self, top: int, site: str | None = None, limit: int = 0) -> list[QueuedRequest]:
        """The first ``top`` requests nodes will lease, of ``site`` only if given (then the
        queue is walked in lease order, ``limit`` entries at most; 0: no limit)."""
        if site is None:
            return list(itertools.islice(self.walk(top, min(top, SCAN_COUNT)), top))
        matching = (request for request in self.walk(limit) if request.site == site)
        return list(itertools.islice(matching, top))

    def site_counts(self, limit: int = 0) -> SiteCounts:
        """Queued requests per site, counted over ``limit`` queue entries at most (0: all)."""
        queued, spilled = self.redis.mget(self.keys.queue_count, self.keys.backlog)
        counts = Counter(request.site for request in self.walk(limit))
        return SiteCounts(
            dict(counts.most_common()),
            sum(counts.values()),
            int(queued or 0),
            max(0, int(spilled or 0)),
        )

    def failed(self, reason_prefix: str = "") -> Iterator[FailedRecord]:
        """The failure records whose reason starts with ``reason_prefix`` (HSCAN order)."""
        for failed_id, stored in self.redis.hscan_iter(self.keys.failed, count=SCAN_COUNT):
            record = FailedRecord(text(failed_id), bytes(stored), _request(stored))
            if record.reason.startswith(reason_prefix):
                yield record

    def retry(self, record: FailedRecord, compress: bool = True, ledger: str | None = None) -> bool:
        """Enqueue the record's request again (at the tail of its priority's level; compressed
        or not, as ``FRONTIER_COMPRESS`` says) and remove the record; the request gets its full
        download retries again (meta ``retry_times`` removed), and meta ``failure_retried``, the
        record's reason (an earlier one's moves to the list ``failure_retried_before``). Counted
        as ``retried`` in the crawl ledger ``ledger`` when given (in the same step in part 0,
        whose hash tag the ledger shares). Raises ``ValueError`` when the record holds no
        request that can be queued; returns False when the record is gone or changed since it
        was read."""
        request = record.fields.get("request")
        if not isinstance(request, dict) or not isinstance(request.get("url"), str):
            raise ValueError("the record holds no readable request")
        priority = request.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise ValueError(f"the request's priority {priority!r} is not an integer")
        meta = request.get("meta")
        kept = meta.items() if isinstance(meta, dict) else ()
        meta = {key: value for key, value in kept if key != RETRY_COUNT_META}
        if isinstance(earlier := meta.get(FAILURE_RETRIED_META), str):
            before = meta.get(FAILURES_BEFORE_META)
            meta[FAILURES_BEFORE_META] = [*(before if isinstance(before, list) else []), earlier]
        request = {**request, "meta": {**meta, FAILURE_RETRIED_META: record.reason}}
        k = self.keys
        body = codec.stored(orjson.dumps(request), compress)
        keys = [k.failed, k.queue_levels, k.queue_count]
        if ledger is not None and k.part == 0:
            keys.append(ledger)
        queued = bool(self._retry(keys=keys, args=[record.id, record.stored, str(-priority), body]))
        if ledger is not None and k.part and queued:
            self.redis.hincrby(ledger, "retried", 1)
        return queued

    def drop(self, ids: Sequence[str]) -> int:
        """Delete these failure records; how many there were."""
        dropped = 0
        for start in range(0, len(ids), SCAN_COUNT):
            dropped += int(self.redis.hdel(self.keys.failed, *ids[start : start + SCAN_COUNT]))
        return dropped

    def leases(self, lease_ms: int) -> list[NodeLeases]:
        """Leases per node; a lease's age is estimated as now - (deadline - the node's lease
        time), as its last heartbeat recorded it, else ``lease_ms``. The URLs are those of the
        node's oldest leases, with their deadlines first."""
        k = self.keys
        now_ms = server_time_ms(self.redis, k.leases)
        beats = {text(node): node_beat(beat) for node, beat in self.redis.hgetall(k.beats).items()}
        nodes: dict[str, NodeLeases] = {}
        oldest: dict[str, list[tuple[float, str]]] = {}  # node -> max-heap (-deadline, id)
        cursor = 0
        while True:
            cursor, chunk = self.redis.zscan(k.leases, cursor, count=SCAN_COUNT)
            entries = _scored(chunk)
            ids = [lease_id for lease_id, _ in entries]
            records = self.redis.hmget(k.inflight, ids) if ids else []
            for (lease_id, deadline), record in zip(entries, records, strict=True):
                if record is None:  # finished between the two reads
                    continue
                node = text(record).split("\t", 1)[0]
                held = nodes.setdefault(node, NodeLeases(node))
                held.leases += 1
                held.expired += deadline <= now_ms
                heap = oldest.setdefault(node, [])
                if len(heap) < URLS_SHOWN:
                    heapq.heappush(heap, (-deadline, lease_id))
                elif -heap[0][0] > deadline:
                    heapq.heapreplace(heap, (-deadline, lease_id))
            if cursor == 0:
                break
        for node, heap in oldest.items():
            by_age = sorted(heap, key=lambda entry: (-entry[0], entry[1]))  # oldest first
            records = self.redis.hmget(k.inflight, [lease_id for _, lease_id in by_age])
            nodes[node].urls = [
                str(_request(lease_body(record)).get("url", NO_DATA)) for record in records
            ]
            beat = beats.get(node)
            node_lease_ms = beat.lease_ms if beat is not None else None
            taken_ms = -by_age[0][0] - (lease_ms if node_lease_ms is None else node_lease_ms)
            nodes[node].oldest_age = round(max(0.0, now_ms - taken_ms) / 1000, 3)
            if node_lease_ms is not None:
                nodes[node].lease_timeout = node_lease_ms / 1000
        return sorted(nodes.values(), key=lambda held: held.node)


class FrontierInspector:
    """Every part of a spider's frontier, as one: heads merged in lease order, counts summed.
    With more than one part, a failure record's id is ``<part>/<id>``."""

    def __init__(self, client: SyncRedis, spider: str) -> None:
        self.spider = spider
        self.parts = [PartInspector(client, keys) for keys in spider_parts(client, spider)]
        queue = self.parts[0].keys.queue_levels.removesuffix(":levels")
        self.queue_key = queue + ("" if len(self.parts) == 1 else " (and parts)")

    def _record_id(self, part: int, record_id: str) -> str:
        return record_id if len(self.parts) == 1 else f"{part}/{record_id}"

    def _part(self, record_id: str) -> tuple[int, str]:
        """The part of a record id given by ``failed``, and the id in that part."""
        if len(self.parts) == 1:
            return 0, record_id
        part, _, raw = record_id.partition("/")
        return int(part), raw

    def queue_head(self, top: int, site: str | None = None, limit: int = 0) -> list[QueuedRequest]:
        """The first ``top`` requests nodes will lease: each part's head, merged by priority
        and, among equal priorities, by place in their part's queue (nodes lease from every
        part); of ``site`` only if given, in the one part that holds it."""
        parts = self.parts if site is None else [self.parts[part_of(site, len(self.parts))]]
        ranked = [
            (-request.priority, place, index, request)
            for index, part in enumerate(parts)
            for place, request in enumerate(part.queue_head(top, site, limit))
        ]
        return [entry[3] for entry in heapq.nsmallest(top, ranked, key=lambda e: e[:3])]

    def site_counts(self, limit: int = 0) -> SiteCounts:
        """Queued requests per site over every part (``limit`` entries at most per part)."""
        counts: Counter[str] = Counter()
        scanned = queued = spilled = 0
        for part in self.parts:
            found = part.site_counts(limit)
            counts.update(found.sites)
            scanned += found.scanned
            queued += found.queued
            spilled += found.spilled
        return SiteCounts(dict(counts.most_common()), scanned, queued, spilled)

    def failed(self, reason_prefix: str = "") -> Iterator[FailedRecord]:
        for index, part in enumerate(self.parts):
            for record in part.failed(reason_prefix):
                yield FailedRecord(self._record_id(index, record.id), record.stored, record.fields)

    def retry(self, record: FailedRecord, compress: bool = True, ledger: str | None = None) -> bool:
        part, raw = self._part(record.id)
        found = FailedRecord(raw, record.stored, record.fields)
        return self.parts[part].retry(found, compress, ledger)

    def drop(self, ids: Sequence[str]) -> int:
        by_part: dict[int, list[str]] = {}
        for record_id in ids:
            part, raw = self._part(record_id)
            by_part.setdefault(part, []).append(raw)
        return sum(self.parts[index].drop(raw) for index, raw in by_part.items())

    def leases(self, lease_ms: int) -> list[NodeLeases]:
        nodes: dict[str, NodeLeases] = {}
        for part in self.parts:
            for found in part.leases(lease_ms):
                held = nodes.setdefault(found.node, NodeLeases(found.node))
                if found.oldest_age > held.oldest_age:
                    held.urls = found.urls
                held.leases += found.leases
                held.expired += found.expired
                held.oldest_age = max(held.oldest_age, found.oldest_age)
                held.lease_timeout = held.lease_timeout or found.lease_timeout
        return sorted(nodes.values(), key=lambda held: held.node)
