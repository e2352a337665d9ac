"""Redis key names of one spider's frontier (layout in docs/redis-keys.md).

Every frontier key carries the hash tag ``{<spider>}`` so the Lua scripts, which
touch several keys at once, also run on a Redis Cluster. The seed list keeps
the plain name ``<spider>:start_urls`` users already push to.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawler.frontier.dedup_bloom import MAX_CHUNKS


@dataclass(frozen=True, slots=True)
class FrontierKeys:
    queue: str
    data: str
    dupefilter: str
    dupefilter_ttl: str
    dupefilter_compact: str
    bloom_meta: str
    bloom_chunks: tuple[str, ...]
    seq: str
    leases: str
    inflight: str
    nodes: str
    failed: str
    epoch: str  # the frontier's identity: a wiped or replaced Redis has another or none
    incidents: str  # list of JSON records: frontier state found lost, by whom, what was redone
    start_prefix: str  # + crawl id: which node writes a plain spider's start requests

    @classmethod
    def for_spider(cls, spider: str) -> FrontierKeys:
        tag = f"{{{spider}}}"
        return cls(
            queue=f"{tag}:queue",
            data=f"{tag}:data",
            dupefilter=f"{tag}:dupefilter",
            dupefilter_ttl=f"{tag}:dupefilter:ttl",
            dupefilter_compact=f"{tag}:dupefilter:compact",
            bloom_meta=f"{tag}:dupefilter:bloom:meta",
            bloom_chunks=tuple(f"{tag}:dupefilter:bloom:{i}" for i in range(MAX_CHUNKS)),
            seq=f"{tag}:seq",
            leases=f"{tag}:leases",
            inflight=f"{tag}:inflight",
            nodes=f"{tag}:nodes",
            failed=f"{tag}:failed",
            epoch=f"{tag}:epoch",
            incidents=f"{tag}:incidents",
            start_prefix=f"{tag}:start:",
        )

    def lease_fence(self, node_id: str) -> str:
        """The last lease call of a node (``lease.lua``): a call sent again is answered alike."""
        return f"{self.queue.removesuffix(':queue')}:fence:{node_id}"

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
        return (
            self.queue,
            self.data,
            *self.dedup_keys(),
            self.seq,
            self.leases,
            self.inflight,
            self.nodes,
            self.failed,
            self.epoch,
            self.incidents,
        )


def glob_escape(text: str) -> str:
    """``text`` matched literally in a SCAN/KEYS pattern."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def fence_pattern(spider: str) -> str:
    """SCAN pattern of the lease fences of every node of a spider."""
    return f"{{{glob_escape(spider)}}}:fence:*"


def node_epoch_pattern(spider: str) -> str:
    """SCAN pattern of the epochs the nodes of a spider last beat in."""
    return f"{{{glob_escape(spider)}}}:epoch:*"


def start_pattern(spider: str) -> str:
    """SCAN pattern of the start-request claims of every crawl of a spider."""
    return f"{{{glob_escape(spider)}}}:start:*"
