"""Where a fingerprint's bits lie in a Bloom filter of dedup mode ``bloom``, computed on the
node, and the read-only check over them (no Scrapy imports, no I/O of its own).

The positions are those ``crawler.frontier.dedup_bloom`` lays out: of a 12-byte digest,
bytes 1..6 (h1) choose the block of each slice, h1 modulo the slice's blocks counted
through its chunks; bytes 7..12 (h2) choose the bits in the block, ``hashes`` draws of the
Park-Miller generator (``s = s * 16807 mod 2^31 - 1``, bit ``s mod 2048`` of the block, the
lowest bit of a byte first) seeded with ``h2 mod (2^31 - 2) + 1``; every slice takes the
first draws of the same sequence. A filter stored by any node reads alike.

``BloomCheck`` is the link check of the mode: one pipeline of the filter's meta and one
``GETRANGE`` of a 256-byte block per fingerprint and slice in use, the bits compared here.
A fingerprint is seen when its bits are all set in some slice. The layout and slices come
from the meta the previous check read; when the meta read with the blocks says otherwise,
the check is made again with it. The same view gives the write its positions (``pack``,
``view``): ``lua/dedup_bloom.lua`` reads and writes the blocks the node names when the view is
the filter's, and tells the node the filter's state when it is not (``learn``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crawler.frontier.dedup_bloom import (
    BLOCK_BITS,
    BLOCK_BYTES,
    BloomSlice,
    BloomState,
    decode_layout,
    encode_layout,
)
from crawler.frontier.keys import FrontierKeys

MODULUS = 2**31 - 1  # the Park-Miller generator's
MULTIPLIER = 16807

Command = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class SliceGeometry:
    chunks: tuple[tuple[int, int], ...]  # (chunk key index, blocks in it), in order
    blocks: int
    hashes: int


@functools.cache
def geometry(layout: tuple[BloomSlice, ...]) -> tuple[SliceGeometry, ...]:
    """Each slice's chunks (numbered through the whole filter) and blocks."""
    found, key = [], 0
    for piece in layout:
        chunks = []
        for size in piece.chunks:
            chunks.append((key, max(1, size // BLOCK_BYTES)))
            key += 1
        found.append(SliceGeometry(tuple(chunks), sum(n for _, n in chunks), piece.hashes))
    return tuple(found)


def split_digest(digest: bytes) -> tuple[int, int]:
    """h1 (which block) and the bit generator's seed of a 12-byte digest."""
    h1 = int.from_bytes(digest[:6], "big")
    h2 = int.from_bytes(digest[6:12], "big")
    return h1, h2 % (MODULUS - 1) + 1


def draws(seed: int, count: int) -> list[int]:
    """The first ``count`` bits (0..2047) a seed chooses in a block."""
    bits = []
    for _ in range(count):
        seed = seed * MULTIPLIER % MODULUS
        bits.append(seed % BLOCK_BITS)
    return bits


def locate(piece: SliceGeometry, h1: int) -> tuple[int, int]:
    """The chunk key index and byte offset of h1's block in a slice."""
    index = h1 % piece.blocks
    for key, blocks in piece.chunks:
        if index < blocks:
            return key, index * BLOCK_BYTES
        index -= blocks
    raise AssertionError("h1 % blocks lies in the slice")


def touched(bits: Sequence[int]) -> list[tuple[int, int]]:
    """The bytes of a block that ``bits`` lie in, ascending, each with its bits' mask."""
    masks: dict[int, int] = {}
    for bit in bits:
        masks[bit >> 3] = masks.get(bit >> 3, 0) | 1 << (bit & 7)
    return sorted(masks.items())


def all_set(block: bytes, bits: Sequence[int]) -> bool:
    """Whether every bit is set in a block (a short block, a chunk deleted by hand: none is)."""
    if len(block) < BLOCK_BYTES:
        return False
    return all(block[bit >> 3] >> (bit & 7) & 1 for bit in bits)


@dataclass(frozen=True, slots=True)
class Probe:
    """The commands of one check: the meta, then a block per digest and slice in use, as the
    ``state`` they were chosen by says."""

    state: BloomState
    digests: tuple[bytes, ...]
    commands: tuple[Command, ...]


class BloomCheck:
    """The read-only check of one part's filter, remembering the meta it last read."""

    def __init__(self, keys: FrontierKeys) -> None:
        self.keys = keys
        self.state = BloomState(layout=(), slices=0, count=0)

    def probe(self, digests: Sequence[bytes]) -> Probe:
        state = self.state
        commands: list[Command] = [("HMGET", self.keys.bloom_meta, *BloomState.META_FIELDS)]
        pieces = geometry(state.layout)[: state.slices]
        for digest in digests:
            h1, _ = split_digest(digest)
            for piece in pieces:
                key, start = locate(piece, h1)
                chunk = self.keys.bloom_chunks[key]
                commands.append(("GETRANGE", chunk, start, start + BLOCK_BYTES - 1))
        return Probe(state, tuple(digests), tuple(commands))

    def evaluate(self, probe: Probe, replies: Sequence[Any]) -> list[bool] | None:
        """Whether each digest is in the filter; None when the meta read with the blocks is
        not the state they were chosen by (the state is updated: probe again)."""
        meta = BloomState.from_meta(*replies[0])
        self.state = meta
        if (meta.layout, meta.slices) != (probe.state.layout, probe.state.slices):
            return None
        pieces = geometry(meta.layout)[: meta.slices]
        blocks = iter(replies[1:])
        found = []
        for digest in probe.digests:
            _, seed = split_digest(digest)
            bits = draws(seed, max((piece.hashes for piece in pieces), default=0))
            seen = False
            for piece in pieces:
                block = next(blocks)
                seen = seen or all_set(block, bits[: piece.hashes])
            found.append(seen)
        return found

    def view(self) -> str:
        """The filter as the positions of ``pack`` see it (``lua/dedup_bloom.lua``'s ARGV[6]):
        slices in use, the newest one's capacity, whether it is the layout's last, the layout."""
        state = self.state
        if not state.slices:
            return ""
        newest = state.layout[state.slices - 1]
        last = int(state.slices == len(state.layout))
        return f"{state.slices} {newest.capacity} {last} {encode_layout(state.layout)}"

    def pack(self, digest: bytes) -> bytes:
        """The digest, then per slice in use its block (chunk key, first byte) and the bytes its
        bits touch there: the positions the write uses when ``view`` is the filter's."""
        pieces = geometry(self.state.layout)[: self.state.slices]
        if not pieces:
            return digest
        h1, seed = split_digest(digest)
        bits = draws(seed, max(piece.hashes for piece in pieces))
        packed = bytearray(digest)
        for piece in pieces:
            key, start = locate(piece, h1)
            places = touched(bits[: piece.hashes])
            packed += bytes((key, *start.to_bytes(4, "big"), len(places)))
            for place, mask in places:
                packed += bytes((place, mask))
        return bytes(packed)

    def learn(self, feedback: str) -> None:
        """The filter's state a write that did not use this node's positions reported
        (``<slices> <count> <layout>``; "": none)."""
        if feedback:
            slices, count, layout = feedback.split(" ", 2)
            self.state = BloomState(decode_layout(layout), int(slices), int(count))
