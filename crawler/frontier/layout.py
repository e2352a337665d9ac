"""The frontier's storage layout, and moving a frontier stored by an older version (no Scrapy).

Since the queue's lists (``lua/queue.lua``), a queued request is an entry of the list of its
priority level, and a lease's record holds its request. Before, the queue was a sorted set
of request ids (``{<tag>}:queue``), the requests a hash by id (``{<tag>}:data``) and a
lease's record ``<node>\\t<score>``. A node that finds either old key refuses the frontier
(:class:`OldLayout`, before it reads a seed), because its requests would be invisible to it:
``crawler migrate <spider>``, with the crawl's nodes stopped, moves them (``migrate_layout``,
``lua/migrate.lua``): queued requests to the tail of their levels in queue order, the
records of leases rewritten in place (their nodes are gone: the leases expire and return to
the queue as any other), and JSON no queued or leased request refers to dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crawler.frontier.keys import FrontierKeys
from crawler.frontier.refusal import FrontierRefused
from crawler.lua import frontier_script
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
    return [key for part in parts for key in (part.legacy_queue, part.legacy_data)]


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


def migrate_layout(client: SyncRedis, parts: Sequence[FrontierKeys]) -> Migrated:
    """Move every part's requests from the layout before (the nodes are stopped)."""
    script = client.register_script(frontier_script("queue", "migrate"))
    queued = leases = dropped = 0
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
    return Migrated(queued, leases, dropped)
