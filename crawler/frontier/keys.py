"""Redis key names of one spider's frontier (layout in docs/redis-keys.md).

Every frontier key carries the hash tag of its part so the Lua scripts, which
touch several keys at once, also run on a Redis Cluster: ``{<spider>}`` for part 0
(the whole frontier of an unpartitioned spider), ``{<spider>#<n>}`` (or
``{<spider>#<n>.<k>}``) for part n of a spider split into ``FRONTIER_PARTITIONS``
parts. The tags are chosen so that the parts' hash slots fall in evenly spaced
ranges of the 16384 slots (:func:`part_tag`): a cluster whose masters hold equal
ranges of slots, as ``redis-cli --cluster create`` makes them, gets equal shares of
the parts. ``{<spider>}:partitions`` holds the count a crawl started with.
The seed list keeps the plain name ``<spider>:start_urls`` users already push to.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

from redis.crc import REDIS_CLUSTER_HASH_SLOTS as SLOTS
from redis.crc import key_slot

from crawler.frontier.dedup_bloom import MAX_CHUNKS


@dataclass(frozen=True, slots=True)
class FrontierKeys:
    queue_levels: str  # zset of the priority levels with queued requests (lua/queue.lua)
    queue_count: str  # string: requests queued in the part (in every level's list)
    dupefilter: str
    dupefilter_ttl: str
    dupefilter_compact: str
    bloom_meta: str
    bloom_chunks: tuple[str, ...]
    seq: str
    leases: str
    inflight: str
    nodes: str
    beats: str  # hash: node -> '<last beat ms> <heartbeat interval ms> <lease ms>' (Redis time)
    failed: str
    waiting: str  # zset: nodes waiting for work (found the part empty) -> until (ms, Redis time)
    epoch: str  # the frontier's identity: a wiped or replaced Redis has another or none
    incidents: str  # list of JSON records: frontier state found lost, by whom, what was redone
    start_prefix: str  # + crawl id: which node writes a plain spider's start requests
    partitions: str  # the number of parts the crawl started with (read in part 0)
    dedup_mode: str  # the dedup the crawl started with (read in part 0: dedup_claim)
    fingerprinter: str  # the REQUEST_FINGERPRINTER_CLASS it started with (part 0: dedup_claim)
    backlog: str  # requests of this part spilled to Kafka (FRONTIER_QUEUE_MAX), a counter
    backlog_topic: str  # the Kafka topic the crawl spills to (read in part 0)
    backlog_read: str  # hash: backlog topic -> the part's next offset to read back
    backlog_written: str  # hash: backlog topic -> the part's next offset written (acknowledged)
    # hash: message key ('<spill id>:<lease id>') -> 1, of spilled requests put back in the queue
    # while Kafka may have written their messages all the same (timed out or purged after they
    # were sent): skipped if read back
    backlog_unsure: str
    backlog_bounds: str  # hash: node -> its FRONTIER_QUEUE_MAX, while it runs (read in part 0)
    node_crawls: str  # hash: node -> the CRAWLER_CRAWL_ID it started with (read in part 0)
    legacy_queue: str  # the queue before the lists per level (a sorted set of ids): migrated
    legacy_data: str  # ... and the request JSON by id (crawler.frontier.layout)
    legacy_dupefilter: str  # the exact dedup's set of hex fingerprints before the binary one
    tag: str  # the part's hash tag, braces included
    part: int = 0

    @classmethod
    def for_spider(cls, spider: str, part: int = 0, count: int = 1) -> FrontierKeys:
        tag = part_tag(spider, part, count)
        return cls(
            queue_levels=f"{tag}:queue:levels",
            queue_count=f"{tag}:queue:count",
            dupefilter=f"{tag}:dupefilter:exact",
            dupefilter_ttl=f"{tag}:dupefilter:ttl",
            dupefilter_compact=f"{tag}:dupefilter:compact",
            bloom_meta=f"{tag}:dupefilter:bloom:meta",
            bloom_chunks=tuple(f"{tag}:dupefilter:bloom:{i}" for i in range(MAX_CHUNKS)),
            seq=f"{tag}:seq",
            leases=f"{tag}:leases",
            inflight=f"{tag}:inflight",
            nodes=f"{tag}:nodes",
            beats=f"{tag}:beats",
            failed=f"{tag}:failed",
            waiting=f"{tag}:waiting",
            epoch=f"{tag}:epoch",
            incidents=f"{tag}:incidents",
            start_prefix=f"{tag}:start:",
            partitions=f"{tag}:partitions",
            dedup_mode=f"{tag}:dedup_mode",
            fingerprinter=f"{tag}:fingerprinter",
            backlog=f"{tag}:backlog",
            backlog_topic=f"{tag}:backlog:topic",
            backlog_read=f"{tag}:backlog:read",
            backlog_written=f"{tag}:backlog:written",
            backlog_unsure=f"{tag}:backlog:unsure",
            backlog_bounds=f"{tag}:backlog:bounds",
            node_crawls=f"{tag}:node_crawls",
            legacy_queue=f"{tag}:queue",
            legacy_data=f"{tag}:data",
            legacy_dupefilter=f"{tag}:dupefilter",
            tag=tag,
            part=part,
        )

    def queue_list(self, score: str) -> str:
        """The list of the queue's priority level ``score`` (-priority, an integer's text)."""
        return f"{self.tag}:queue:{score}"

    def lease_fence(self, node_id: str) -> str:
        """The last lease call of a node (``turn.lua``): a call sent again is answered alike."""
        return f"{self.tag}:fence:{node_id}"

    def write_mark(self, node_id: str) -> str:
        """The highest token of a node's calls of ``turn.lua`` (a day after its last call):
        lower than one the node knew applied, Redis lost its writes (``RollbackWatch``)."""
        return f"{self.tag}:fence:{node_id}:mark"

    def spill_fence(self, spill_id: str) -> str:
        """The leases a spill dropped (``spill_done.lua``): a call again finds them (``#``
        is in no node id, so no node's fence is named so)."""
        return f"{self.tag}:fence:#spill:{spill_id}"

    def node_run(self, node_id: str) -> str:
        """The run of a node id now (``node_run.lua``; expires three heartbeats after its
        last)."""
        return f"{self.tag}:run:{node_id}"

    def node_epoch(self, node_id: str) -> str:
        """The epoch a node last beat in (``heartbeat.lua``; expires with the node)."""
        return f"{self.epoch}:{node_id}"

    def dedup_keys(self) -> tuple[str, ...]:
        """The keys of every dedup mode (crawler.frontier.dedup)."""
        return (
            self.dupefilter,
            self.dupefilter_ttl,
            self.dupefilter_compact,
            self.bloom_meta,
            *self.bloom_chunks,
        )

    def all(self) -> tuple[str, ...]:
        """Every key of the part but the lists of the queue's levels (``queue_pattern``) and the
        per-node ones (fences, epochs)."""
        return (
            self.queue_levels,
            self.queue_count,
            *self.dedup_keys(),
            self.seq,
            self.leases,
            self.inflight,
            self.nodes,
            self.beats,
            self.failed,
            self.waiting,
            self.epoch,
            self.incidents,
            self.partitions,
            self.dedup_mode,
            self.fingerprinter,
            self.backlog,
            self.backlog_topic,
            self.backlog_read,
            self.backlog_written,
            self.backlog_unsure,
            self.backlog_bounds,
            self.node_crawls,
            self.legacy_queue,
            self.legacy_data,
            self.legacy_dupefilter,
        )


def braced_name(spider: str, where: str) -> str | None:
    """Why ``spider``'s name cannot carry its frontier's keys ``where`` (a Redis Cluster, or
    a frontier in parts), or None: ``{`` and ``}`` end the hash tag each key holds it in."""
    if "{" not in spider and "}" not in spider:
        return None
    return (
        f"spider {spider!r} has a brace ({{ or }}), which ends the Redis hash tag every key of "
        f"its frontier carries its name in ({{<spider>}}:queue): {where}; rename the spider"
    )


def _slot_range(tag: str, count: int) -> int:
    """Which of ``count`` equal ranges of the hash slots ``tag`` (braces included) is in."""
    return key_slot(tag[1:-1].encode()) * count // SLOTS


@functools.cache
def part_tag(spider: str, part: int = 0, count: int = 1) -> str:
    """The hash tag of part ``part`` of ``count``: part 0's is ``{<spider>}``; part n's is
    the first of ``{<spider>#<n>}``, ``{<spider>#<n>.1}``, ... in the n-th slot range after
    part 0's, so the parts' slots are evenly spread (the same on every node)."""
    if part == 0:
        return f"{{{spider}}}"
    if problem := braced_name(spider, f"FRONTIER_PARTITIONS={count} could not spread its parts"):
        raise ValueError(problem)  # the tags' slots would not spread: searched for ever
    target = (_slot_range(f"{{{spider}}}", count) + part) % count
    candidates = (f"{{{spider}#{part}{f'.{k}' if k else ''}}}" for k in itertools.count())
    return next(tag for tag in candidates if _slot_range(tag, count) == target)


def frontier_parts(spider: str, count: int) -> tuple[FrontierKeys, ...]:
    """The keys of every part of a spider's frontier split into ``count`` parts."""
    return tuple(FrontierKeys.for_spider(spider, part, count) for part in range(count))


def glob_escape(text: str) -> str:
    """``text`` matched literally in a SCAN/KEYS pattern."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def queue_pattern(keys: FrontierKeys) -> str:
    """SCAN pattern of the queue's keys in a part: every level's list, the levels, the count."""
    return f"{glob_escape(keys.tag)}:queue:*"


def fence_pattern(keys: FrontierKeys) -> str:
    """SCAN pattern of the lease fences and write marks of every node in a part of a spider's
    frontier."""
    return f"{glob_escape(keys.tag)}:fence:*"


def node_epoch_pattern(keys: FrontierKeys) -> str:
    """SCAN pattern of the epochs the nodes of a spider last beat in, in one part."""
    return f"{glob_escape(keys.tag)}:epoch:*"


def start_pattern(spider: str) -> str:
    """SCAN pattern of the start-request claims of every crawl of a spider."""
    return f"{{{glob_escape(spider)}}}:start:*"
