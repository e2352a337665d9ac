"""The scalable Bloom filter of dedup mode ``bloom``: its layout and estimates (no I/O).

A *blocked* Bloom filter (Putze, Sanders, Singler, "Cache-, Hash- and
Space-Efficient Bloom Filters", 2007): a fingerprint's bits all lie in one
512-bit block, so the script reads and writes 64 bytes (``GETRANGE``/``SETRANGE``)
instead of one bit per hash; it needs a few percent more bits than a classic
filter for the same rate, which the sizing below accounts for.

Slice ``i`` holds ``capacity * GROWTH**i`` fingerprints at the false-positive rate
``error_rate * (1 - TIGHTENING) * TIGHTENING**i``: however many slices are in use,
the filter's rate stays below ``error_rate`` (a geometric series; Almeida et al.,
"Scalable Bloom Filters", 2007). All slices live one after the other in one Redis
string (``lua/dedup_bloom.lua``), so the layout lists every slice that fits in
the 512 MB a string may hold; it is stored with the filter when the filter is created.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

GROWTH = 2  # each slice holds this many times the fingerprints of the one before
TIGHTENING = 0.25  # ... at this share of its rate: the first slice gets 3/4 of the budget
MAX_BITS = 2**32  # a Redis string holds at most 512 MB
BLOCK_BITS = 512  # bits of a block (64 bytes); lua/dedup_bloom.lua uses the same


@dataclass(frozen=True, slots=True)
class BloomSlice:
    size: int  # bytes
    hashes: int  # bits set per fingerprint
    capacity: int  # fingerprints it takes before the next slice is used

    @property
    def bits(self) -> int:
        return self.size * 8

    def false_positive_rate(self, entries: int) -> float:
        """Expected rate with ``entries`` fingerprints in the slice."""
        return blocked_false_positive_rate(entries, self.bits // BLOCK_BITS, self.hashes)


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


def fill_allocation(size: int) -> int:
    """The longest string that fits the allocation a string of ``size`` bytes gets.

    Redis's jemalloc rounds an allocation up to one of four size classes per power of two;
    a bitmap created at once (``SETRANGE`` on a new key) may as well use those bytes.
    """
    total = size + _sds_overhead(size)
    if total <= 64:
        return size
    spacing = 2 ** ((total - 1).bit_length() - 3)
    filled = -(-total // spacing) * spacing - _sds_overhead(size)
    return filled if _sds_overhead(filled) == _sds_overhead(size) else size


def slice_for(capacity: int, error_rate: float) -> BloomSlice:
    """The smallest slice that holds ``capacity`` fingerprints at ``error_rate``."""
    best: BloomSlice | None = None
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
        if best is None or low * BLOCK_BITS // 8 < best.size:
            best = BloomSlice(size=low * BLOCK_BITS // 8, hashes=hashes, capacity=capacity)
    assert best is not None
    return best


@functools.cache
def bloom_layout(capacity: int, error_rate: float) -> tuple[BloomSlice, ...]:
    """Every slice of a filter for ``capacity`` fingerprints first, at most ``error_rate``."""
    rate = error_rate * (1 - TIGHTENING)
    first = slice_for(capacity, rate)
    if first.bits > MAX_BITS:
        raise ValueError(
            f"a Bloom filter for {capacity} URLs needs {first.size} bytes, more than a Redis "
            "string holds (512 MB)"
        )
    block = BLOCK_BITS // 8
    size = min(fill_allocation(first.size), MAX_BITS // 8) // block * block
    slices = [BloomSlice(size, first.hashes, capacity)]
    total = slices[0].bits
    while True:
        capacity, rate = capacity * GROWTH, rate * TIGHTENING
        following = slice_for(capacity, rate)
        total += following.bits
        if total > MAX_BITS:
            return tuple(slices)
        slices.append(following)


def encode_layout(layout: tuple[BloomSlice, ...]) -> str:
    return ",".join(f"{s.size}:{s.hashes}:{s.capacity}" for s in layout)


def decode_layout(text: str) -> tuple[BloomSlice, ...]:
    return tuple(
        BloomSlice(*(int(number) for number in part.split(":"))) for part in text.split(",")
    )


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
    def false_positive_rate(self) -> float:
        """Expected chance that a new fingerprint is taken for a seen one."""
        miss = 1.0
        for piece, entries in zip(self.layout, self._entries(), strict=False):
            miss *= 1 - piece.false_positive_rate(entries)
        return 1 - miss
