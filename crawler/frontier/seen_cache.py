"""``SeenCache``: fingerprints this node already handed to the shared dupefilter, and those
other nodes recorded (``crawler.frontier.seen_feed``) (no I/O).

A link-dense site yields mostly links the crawl already knows. Every request
whose fingerprint is here is a certain duplicate (the shared dupefilter never
forgets within a fingerprint's lifetime), so the node skips serialising it and
sending it to Redis. Memory is bounded: two generations of at most
``size / 2`` fingerprints each; when the newer one is full (or older than
half the dedup TTL, so an entry never outlives the TTL) it becomes the older
one and the oldest generation is dropped. A fingerprint evicted here is still
deduplicated by Redis: the cache only saves work, it never decides alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class SeenCache:
    def __init__(
        self, size: int, ttl: float = 0.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if size < 0:
            raise ValueError(f"size={size} must be >= 0")
        if ttl < 0:
            raise ValueError(f"ttl={ttl} must be >= 0")
        self._half = size // 2
        self._ttl = ttl
        self._clock = clock
        self._newer: set[str] = set()
        self._older: set[str] = set()
        self._newer_since = self._older_since = clock()

    def __len__(self) -> int:
        return len(self._newer) + len(self._older)

    def __contains__(self, fingerprint: str) -> bool:
        if self._ttl:
            self._expire()
        return fingerprint in self._newer or fingerprint in self._older

    def add(self, fingerprint: str, age: float = 0.0) -> bool:
        """Remember ``fingerprint``, recorded by the dupefilter ``age`` seconds ago (another
        node's, from the seen feed): with a TTL it goes to a generation at least that old, or
        nowhere, so it never stays longer than the TTL after it was recorded. Whether it was
        kept."""
        if not self._half:
            return False
        if self._ttl:
            self._expire()
        if len(self._newer) >= self._half:
            self._rotate()
        if self._ttl and age > 0:
            now = self._clock()
            if now - self._newer_since < age:
                if now - self._older_since >= age and len(self._older) < self._half:
                    self._older.add(fingerprint)
                    return True
                return False
        self._newer.add(fingerprint)
        return True

    def clear(self) -> None:
        """Forget everything (the cluster's dedup state was lost)."""
        self._newer, self._older = set(), set()
        self._newer_since = self._older_since = self._clock()

    def _rotate(self) -> None:
        self._older, self._older_since = self._newer, self._newer_since
        self._newer, self._newer_since = set(), self._clock()

    def _expire(self) -> None:
        """Keep every entry younger than the TTL: a generation lives at most one TTL."""
        now = self._clock()
        if now - self._newer_since >= self._ttl / 2:
            self._rotate()
        if now - self._older_since >= self._ttl:
            self._older = set()
