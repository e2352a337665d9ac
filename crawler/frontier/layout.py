"""The frontier's storage layout, and moving a frontier stored by an older version (no Scrapy).

Since the queue's lists (``lua/queue.lua``), a queued request is an entry of the list of its
priority level, and a lease's record holds its request; the exact dedup keeps 12 binary
bytes of each fingerprint (``{<tag>}:dupefilter:exact``). Before, the queue was a sorted set
of request ids (``{<tag>}:queue``), the requests a hash by id (``{<tag>}:data``), a lease's
record ``<node>\\t<score>``, and the exact dedup a set of hex fingerprints
(``{<tag>}:dupefilter``). A node that finds any old key refuses the frontier
(:class:`OldLayout`, before it reads a seed), because its requests would be invisible to it
and its URLs crawled again: ``crawler migrate <spider>``, with the crawl's nodes stopped,
moves them (``migrate_layout``, ``lua/migrate.lua``): queued requests to the tail of their
levels in queue order, the records of leases rewritten in place (their nodes are gone: the
leases expire and return to the queue as any other), JSON no queued or leased request
refers to dropped, and the hex fingerprints added to the binary set.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from crawler.frontier.dedup import DIGEST_BYTES
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.refusal import FrontierRefused
from crawler.lua import frontier_script, text
from crawler.redis_connection import AsyncRedis, SyncRedis

MIGRATE_STEP = 1000  # requests or lease records moved per script call


class OldLayout(FrontierRefused):
    """The spider's frontier holds requests stored by a version before the queue's lists."""

    stat = "layout"
    finish_reason = "frontier_layout_old"

    def __init__(self, spider: str, keys: Sequence[str]) -> None:
        super().__init__(
            f"the frontier of {spider!r} holds requests stored by an older version of the "
            f"crawler ({', '.join(keys)}): stop every node of {spider!r} and run "
            f"`crawler migrate {spider}` once, then start the nodes again"
        )


def _old_keys(parts: Sequence[FrontierKeys]) -> list[str]:
    return [
        key
        for part in parts
        for key in (part.legacy_queue, part.legacy_data, part.legacy_dupefilter)
    ]


async def check_layout(client: AsyncRedis, spider: str, parts: Sequence[FrontierKeys]) -> None:
    """Raise ``OldLayout`` when any part still holds keys of the layout before."""
    keys = _old_keys(parts)
    async with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.exists(key)
        found = await pipe.execute()
    old = [key for key, present in zip(keys, found, strict=True) if present]
    if old:
        raise OldLayout(spider, old)


def old_layout_keys(client: SyncRedis, parts: Sequence[FrontierKeys]) -> list[str]:
    """The keys of the layout before that exist (operator tools)."""
    keys = _old_keys(parts)
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.exists(key)
        found = pipe.execute()
    return [key for key, present in zip(keys, found, strict=True) if present]


@dataclass(frozen=True, slots=True)
class Migrated:
    queued: int  # requests moved to the queue's lists
    leases: int  # lease records rewritten
    dropped: int  # ids without JSON, and JSON of no queued or leased request
    fingerprints: int  # of the exact dedup, moved to the binary set


def migrate_layout(client: SyncRedis, parts: Sequence[FrontierKeys]) -> Migrated:
    """Move every part's requests from the layout before (the nodes are stopped)."""
    script = client.register_script(frontier_script("queue", "migrate"))
    queued = leases = dropped = fingerprints = 0
    for part in parts:
        keys = [
            part.legacy_queue,
            part.legacy_data,
            part.inflight,
            part.queue_levels,
            part.queue_count,
            part.leases,
        ]
        while True:
            moved, missing = script(keys=keys, args=["queue", MIGRATE_STEP])
            queued, dropped = queued + int(moved), dropped + int(missing)
            if not moved and not missing:
                break
        ids = [field for field, _ in client.hscan_iter(part.inflight, count=MIGRATE_STEP)]
        for start in range(0, len(ids), MIGRATE_STEP):
            chunk = ids[start : start + MIGRATE_STEP]
            moved, missing = script(keys=keys, args=["leases", *chunk])
            leases, dropped = leases + int(moved), dropped + int(missing)
        _, orphans = script(keys=keys, args=["orphans"])
        dropped += int(orphans)
        fingerprints += _binary_fingerprints(client, part)
    return Migrated(queued, leases, dropped, fingerprints)


def _binary_fingerprints(client: SyncRedis, part: FrontierKeys) -> int:
    """Add the hex fingerprints of the old exact set to the binary one, then delete it."""
    moved = 0
    members = client.sscan_iter(part.legacy_dupefilter, count=MIGRATE_STEP)
    while chunk := list(itertools.islice(members, MIGRATE_STEP)):
        hexes = [text(member) for member in chunk]
        client.sadd(part.dupefilter, *(bytes.fromhex(h[: 2 * DIGEST_BYTES]) for h in hexes))
        moved += len(chunk)
    client.delete(part.legacy_dupefilter)
    return moved
