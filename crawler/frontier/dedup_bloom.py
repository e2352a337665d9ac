"""The scalable Bloom filter of dedup mode ``bloom``: its layout and estimates (no I/O).

A *blocked* Bloom filter (Putze, Sanders, Singler, "Cache-, Hash- and
Space-Efficient Bloom Filters", 2007): a fingerprint's bits all lie in one
2048-bit block, so the script reads and writes 256 bytes (``GETRANGE``/``SETRANGE``)
instead of one bit per hash; it needs a few percent more bits than a classic
filter for the same rate, which the sizing below accounts for.

Slice ``i`` holds ``capacity * GROWTH**i`` fingerprints at the false-positive rate
``error_rate * (1 - TIGHTENING) * TIGHTENING**i``: however many slices are in use,
the filter's rate stays below ``error_rate`` (a geometric series; Almeida et al.,
"Scalable Bloom Filters", 2007). Each slice is sized for ``MARGIN`` of its rate, so
that measured rates, which scatter around the estimate, stay below it too.

A slice is stored in Redis strings ("chunks", whole blocks each), each as long as fits
exactly in one of the allocation sizes of Redis's jemalloc (four per power of two): one
string would be rounded up by as much as 25%, a few chunks sized one after the other
waste under 2%. A slice up to three of the longest chunks takes at most
``CHUNKS_PER_SLICE``; a larger one takes as many of the longest as it needs (a string
holds at most ``MAX_CHUNK_BYTES``), then at most three more. The chunks of all slices are
numbered in order, ``MAX_CHUNKS`` at most (the keys ``lua/dedup_bloom.lua`` is given);
the layout lists every slice that fits in them and in ``MAX_BYTES``, and is stored with
the filter when the filter is created. From the default capacity (1M URLs at 0.1%) a
part's filter grows to ten slices: 6 GB for about 1e9 URLs.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

GROWTH = 2  # each slice holds this many times the fingerprints of the one before
TIGHTENING = 0.2  # ... at this share of its rate: the first slice gets 4/5 of the budget
MARGIN = 0.9  # share of its rate a slice is sized for
BLOCK_BITS = 2048  # bits of a block (256 bytes); lua/dedup_bloom.lua uses the same
BLOCK_BYTES = BLOCK_BITS // 8
CHUNKS_PER_SLICE = 3
MAX_CHUNKS = 48  # chunk keys of a filter (crawler.frontier.keys)
MAX_CHUNK_BYTES = 2**29  # what a Redis string holds (proto-max-bulk-len's default): 512 MB
MAX_BYTES = 2**34  # all slices of a filter (a part's) together: 16 GB


@dataclass(frozen=True, slots=True)
class BloomSlice:
    chunks: tuple[int, ...]  # bytes of each of its strings, whole blocks
    hashes: int  # bits set per fingerprint
    capacity: int  # fingerprints it takes before the next slice is used

    @property
    def size(self) -> int:
        return sum(self.chunks)

    @property
    def bits(self) -> int:
        return self.size * 8

    def false_positive_rate(self, entries: int) -> float:
        """Expected rate with ``entries`` fingerprints in the slice."""
        blocks = max(1, self.size // BLOCK_BYTES)  # as the script counts a too short chunk
        return blocked_false_positive_rate(entries, blocks, self.hashes)


def blocked_false_positive_rate(entries: int, blocks: int, hashes: int) -> float:
    """Chance that a new fingerprint finds its bits set: blocks hold Poisson-many entries."""
    load = entries / blocks
    if load == 0:
        return 0.0
    spread = 10 * math.sqrt(load) + 10
    rate = 0.0
    for held in range(max(0, int(load - spread)), int(load + spread) + 1):
        weight = math.exp(held * math.log(load) - load - math.lgamma(held + 1))
        rate += weight * (1 - (1 - 1 / BLOCK_BITS) ** (hashes * held)) ** hashes
    return rate


def _sds_overhead(size: int) -> int:
    """Bytes Redis adds to a string of ``size`` bytes: its sds header and a NUL."""
    return 1 + (3 if size < 2**8 else 5 if size < 2**16 else 9)


@functools.cache
def chunk_lengths() -> tuple[int, ...]:
    """Every chunk length, ascending: the most whole blocks a jemalloc size class holds.

    Above 64 bytes the classes are 2**k * (1 + j/4) for j = 1..4; a string created at
    once (``SETRANGE`` on a new key) gets exactly its length plus ``_sds_overhead``.
    """
    lengths = set()
    for power in range(6, MAX_CHUNK_BYTES.bit_length()):
        for quarter in range(1, 5):
            allocation = 2**power + quarter * 2 ** (power - 2)
            length = (allocation - _sds_overhead(allocation)) // BLOCK_BYTES * BLOCK_BYTES
            if 0 < length <= MAX_CHUNK_BYTES:
                lengths.add(length)
    return tuple(sorted(lengths))


def split_in_chunks(size: int) -> tuple[int, ...]:
    """Chunks holding at least ``size`` bytes: the longest chunks (whole strings) while more
    than ``CHUNKS_PER_SLICE`` of them are left; then at most ``CHUNKS_PER_SLICE``, each the
    longest that fits in what is left, the last one the shortest that holds the rest."""
    lengths = chunk_lengths()
    left, whole = size, 0
    while left > CHUNKS_PER_SLICE * lengths[-1]:
        whole, left = whole + 1, left - lengths[-1]
    tail: list[int] = []
    while left > 0:
        below = bisect.bisect_right(lengths, left) - 1
        if below >= 0 and len(tail) < CHUNKS_PER_SLICE - 1:
            tail.append(lengths[below])
        else:
            tail.append(lengths[bisect.bisect_left(lengths, left)])
        left -= tail[-1]
    return (lengths[-1],) * whole + tuple(tail)


def slice_for(capacity: int, error_rate: float) -> BloomSlice | None:
    """The smallest slice that holds ``capacity`` fingerprints at ``error_rate``, in
    whole chunks (None: larger than ``MAX_BYTES``)."""
    best: tuple[int, int] | None = None  # blocks, hashes
    classic = math.ceil(-math.log2(error_rate))  # hashes of a classic filter
    for hashes in range(max(1, classic - 3), classic + 1):
        # A classic filter's size is a lower bound; twice that is always enough.
        classic_bits = capacity * hashes / -math.log(1 - error_rate ** (1 / hashes))
        low = math.ceil(classic_bits / BLOCK_BITS)
        high = 2 * low
        while low < high:
            middle = (low + high) // 2
            if blocked_false_positive_rate(capacity, middle, hashes) <= error_rate:
                high = middle
            else:
                low = middle + 1
        if best is None or low < best[0]:
            best = (low, hashes)
    assert best is not None
    blocks, hashes = best
    if blocks * BLOCK_BYTES > MAX_BYTES:
        return None
    return BloomSlice(split_in_chunks(blocks * BLOCK_BYTES), hashes, capacity)


@functools.cache
def bloom_layout(capacity: int, error_rate: float) -> tuple[BloomSlice, ...]:
    """Every slice of a filter for ``capacity`` fingerprints first, at most ``error_rate``."""
    rate = error_rate * (1 - TIGHTENING)
    first = slice_for(capacity, rate * MARGIN)
    if first is None:
        raise ValueError(f"a Bloom filter for {capacity} URLs needs more than 16 GB")
    slices = [first]
    while True:
        capacity, rate = capacity * GROWTH, rate * TIGHTENING
        following = slice_for(capacity, rate * MARGIN)
        if (
            following is None
            or sum(s.size for s in slices) + following.size > MAX_BYTES
            or sum(len(s.chunks) for s in slices) + len(following.chunks) > MAX_CHUNKS
        ):
            return tuple(slices)
        slices.append(following)


def encode_layout(layout: tuple[BloomSlice, ...]) -> str:
    """``bytes+bytes+...:hashes:capacity`` of each slice, comma-separated."""
    return ",".join(f"{'+'.join(map(str, s.chunks))}:{s.hashes}:{s.capacity}" for s in layout)


def decode_layout(text: str) -> tuple[BloomSlice, ...]:
    slices = []
    for part in text.split(","):
        chunks, hashes, capacity = part.split(":")
        slices.append(
            BloomSlice(tuple(int(c) for c in chunks.split("+")), int(hashes), int(capacity))
        )
    return tuple(slices)


@dataclass(frozen=True, slots=True)
class BloomState:
    """A filter as stored: its layout, the slices in use and the newest slice's entries."""

    layout: tuple[BloomSlice, ...]
    slices: int
    count: int

    META_FIELDS = ("layout", "slices", "count")  # read with HMGET, in from_meta's order

    @classmethod
    def from_meta(
        cls, layout: bytes | str | None, slices: bytes | str | None, count: bytes | str | None
    ) -> BloomState:
        """From the meta hash's ``layout``, ``slices`` and ``count`` (None: no filter yet)."""
        if not layout:
            return cls(layout=(), slices=0, count=0)
        text = layout.decode() if isinstance(layout, bytes) else layout
        return cls(decode_layout(text), int(slices or 0), int(count or 0))

    def _entries(self) -> list[int]:
        in_use = self.layout[: self.slices]
        return [s.capacity for s in in_use[:-1]] + [self.count] if in_use else []

    @property
    def entries(self) -> int:
        return sum(self._entries())

    @property
    def bits(self) -> int:
        return sum(s.bits for s in self.layout[: self.slices])

    @property
    def fill(self) -> float:
        """Share of the newest slice's capacity used (a new slice follows at 1.0)."""
        return self.count / self.layout[self.slices - 1].capacity if self.slices else 0.0

    @property
    def designed_rate(self) -> float:
        """The rate with every slice in use full: what the filter was sized for so far (by
        the ``FRONTIER_BLOOM_ERROR_RATE`` of the node that made it)."""
        miss = 1.0
        for piece in self.layout[: self.slices]:
            miss *= 1 - piece.false_positive_rate(piece.capacity)
        return 1 - miss

    @property
    def false_positive_rate(self) -> float:
        """Expected chance that a new fingerprint is taken for a seen one."""
        miss = 1.0
        for piece, entries in zip(self.layout, self._entries(), strict=False):
            miss *= 1 - piece.false_positive_rate(entries)
        return 1 - miss
