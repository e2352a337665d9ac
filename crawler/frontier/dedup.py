"""Dedup modes of the frontier (``FRONTIER_DUPEFILTER``) and the complete script of each.

The check-and-record of a request's fingerprint happens in the same atomic step
that enqueues it: ``lua/turn.lua``, preceded by the queue's snippets and the mode's snippet
``lua/dedup_<name>.lua`` (layout in docs/redis-keys.md):

- ``exact``: a set of fingerprints, their first 12 bytes (binary: a third of the hex text's
  bytes to send, hash and compare); with a TTL, a sorted set hex fingerprint -> second
  recorded (``dedup_zset.lua``).
- ``compact``: exact in about 14 bytes per URL: a hash of buckets of fixed-width binary
  entries (``dedup_compact.lua``); takes a TTL.
- ``bloom``: a scalable Bloom filter in a few bitmaps, about 1.9 bytes per URL at 0.1% false
  positives (``dedup_bloom.lua``, ``crawler.frontier.dedup_bloom``); cannot forget, so no TTL.

No Scrapy imports: the scheduler, the bench and the operator tools share this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from crawler.frontier.dedup_bloom import bloom_layout, encode_layout
from crawler.frontier.keys import FrontierKeys
from crawler.lua import frontier_script

BUCKET_ENTRIES = 64  # compact: entries per bucket at FRONTIER_DEDUP_CAPACITY
DIGEST_BYTES = 12  # compact, bloom: fingerprint bytes the scripts use (Scrapy's have 20)


class DedupMode(StrEnum):
    EXACT = "exact"
    COMPACT = "compact"
    BLOOM = "bloom"


@dataclass(frozen=True, slots=True)
class DedupConfig:
    mode: DedupMode = DedupMode.EXACT
    ttl: int = 0  # seconds a fingerprint is remembered; 0 = forever
    capacity: int = 1_000_000  # expected URLs: compact's bucket count, bloom's first slice
    error_rate: float = 0.001  # bloom: false-positive rate of the whole filter

    @classmethod
    def parse(cls, mode: str, ttl: int, capacity: int, error_rate: float) -> DedupConfig:
        """From setting values; raises ValueError naming the setting."""
        try:
            parsed = DedupMode(mode)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in DedupMode)
            raise ValueError(f"FRONTIER_DUPEFILTER={mode!r} is not one of {choices}") from None
        config = cls(parsed, ttl, capacity, error_rate)
        config.validate()
        return config

    def validate(self) -> None:
        if self.ttl < 0:
            raise ValueError(f"FRONTIER_DEDUP_TTL={self.ttl} must be >= 0 (0 = forever)")
        if self.ttl >= 2**31:
            raise ValueError(f"FRONTIER_DEDUP_TTL={self.ttl} must be < 2**31 seconds")
        if self.capacity < 1:
            raise ValueError(f"FRONTIER_DEDUP_CAPACITY={self.capacity} must be >= 1")
        if not 0 < self.error_rate < 1:
            raise ValueError(f"FRONTIER_BLOOM_ERROR_RATE={self.error_rate} must be in (0, 1)")
        if self.mode is DedupMode.BLOOM:
            if self.ttl:
                raise ValueError(
                    f"FRONTIER_DEDUP_TTL={self.ttl} needs FRONTIER_DUPEFILTER='exact' or "
                    "'compact': a Bloom filter cannot forget a URL "
                    f"(FRONTIER_DUPEFILTER={self.mode.value!r})"
                )
            try:
                bloom_layout(self.capacity, self.error_rate)
            except ValueError as exc:
                raise ValueError(
                    f"FRONTIER_DEDUP_CAPACITY={self.capacity} with FRONTIER_BLOOM_ERROR_RATE="
                    f"{self.error_rate}: {exc}"
                ) from None


@dataclass(frozen=True, slots=True)
class DedupStep:
    """What ``turn.lua`` needs from a mode: its snippet, keys, arguments, encoding."""

    snippet: str  # lua/<snippet>.lua
    key_fields: tuple[str, ...]  # FrontierKeys fields of its keys (or key tuples), in KEYS order
    args: tuple[str | int, ...]
    binary: bool  # fingerprints go to the script as DIGEST_BYTES bytes, not hex

    @classmethod
    def for_config(cls, config: DedupConfig) -> DedupStep:
        if config.mode is DedupMode.BLOOM:
            layout = encode_layout(bloom_layout(config.capacity, config.error_rate))
            # and the node's view of the filter, which FrontierClient fills in per call ("": none)
            return cls("dedup_bloom", ("bloom_meta", "bloom_chunks"), (layout, ""), binary=True)
        if config.mode is DedupMode.COMPACT:
            buckets = math.ceil(config.capacity / BUCKET_ENTRIES)
            return cls("dedup_compact", ("dupefilter_compact",), (config.ttl, buckets), binary=True)
        if config.ttl:
            return cls("dedup_zset", ("dupefilter_ttl",), (config.ttl,), binary=False)
        return cls("dedup_set", ("dupefilter",), (), binary=True)

    def keys(self, keys: FrontierKeys) -> list[str]:
        found: list[str] = []
        for name in self.key_fields:
            value: str | tuple[str, ...] = getattr(keys, name)
            found.extend((value,) if isinstance(value, str) else value)
        return found

    def other_keys(self, keys: FrontierKeys) -> list[str]:
        """Dedup keys of the other modes (a crawl that changed mode does not read them)."""
        mine = self.keys(keys)
        return [key for key in keys.dedup_keys() if key not in mine]

    def script(self, body: Literal["turn", "seen"] = "turn") -> str:
        """A script of this mode: ``lua/turn.lua`` (finishes leases, records and enqueues,
        leases) after the queue's snippets and this mode's, or ``lua/seen.lua`` (only reads)
        after this mode's."""
        if body == "turn":
            return frontier_script("queue", "lease", self.snippet, "turn")
        return frontier_script(self.snippet, "seen")

    def script_keys(self, keys: FrontierKeys) -> list[str]:
        """The KEYS of both scripts: the frontier's six, then the mode's (``turn.lua`` takes
        the node's lease fence after them)."""
        frontier = [
            keys.queue_levels,
            keys.queue_count,
            keys.seq,
            keys.leases,
            keys.inflight,
            keys.failed,
        ]
        return frontier + self.keys(keys)

    def seen_args(self, fingerprints: list[str]) -> list[str | int | bytes]:
        """The ARGV of ``seen.lua`` for hex ``fingerprints``."""
        return ["", "", "", "", *self.args, *(self.encode(f) for f in fingerprints)]

    def encode(self, fingerprint: str) -> str | bytes:
        """The fingerprint as the script takes it ('' stays '': never deduplicated)."""
        if not self.binary or not fingerprint:
            return fingerprint
        return self.digest(fingerprint)

    @staticmethod
    def digest(fingerprint: str) -> bytes:
        """The ``DIGEST_BYTES`` first bytes of a hex fingerprint."""
        digest = bytes.fromhex(fingerprint[: 2 * DIGEST_BYTES])
        if len(digest) < DIGEST_BYTES:
            raise ValueError(
                f"fingerprint {fingerprint!r} is shorter than {DIGEST_BYTES} bytes: the "
                "frontier's fingerprints are 20-byte SHA-1 digests (crawler.frontier.request_store)"
            )
        return digest
