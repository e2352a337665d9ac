"""Where nodes hold the seeds they took, and how those holds are read and returned (no Scrapy).

A node takes seeds from the seed key into its taken list ``{<seed key>}:taken:<node>`` and
keeps a hold deadline in ``{<seed key>}:takers`` (``lua/seed_take.lua``); the seeds stay
there until their requests are in the frontier. ``lua/seed_reclaim.lua`` returns the seeds
of holders whose hold expired (a killed node) to the seed key: run by every node
(``crawler.frontier.seed_queue``) and by ``crawler requeue`` (``FrontierAdmin``), with the
keys and arguments :func:`reclaim_call` gives. :func:`held_seeds` counts the held seeds for
``crawler status``; :func:`seed_readers` names the nodes reading a seed key (``crawler
seed``). Layout in docs/redis-keys.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crawler.frontier.keys import FrontierKeys, glob_escape
from crawler.lua import text
from crawler.redis_connection import SyncRedis

RECLAIM_EXPIRED = ""  # reclaim_call's node: every holder whose hold expired


def slot_tag(key: str) -> str:
    """``key`` with a Redis Cluster hash tag that puts keys built on it in ``key``'s slot."""
    start = key.find("{")
    if start != -1 and key.find("}", start + 2) != -1:
        return key  # it has a tag already: keys that start with it share that tag
    return f"{{{key}}}"


@dataclass(frozen=True, slots=True)
class SeedKeys:
    seeds: str
    invalid: str
    frontier: tuple[FrontierKeys, ...]  # every part of the spider's frontier

    @property
    def takers(self) -> str:
        return f"{slot_tag(self.seeds)}:takers"

    @property
    def let_go(self) -> str:
        """Hash: node -> the id of its last let-go of seeds (``lua/seed_take.lua``)."""
        return f"{slot_tag(self.seeds)}:taken_let_go"

    @property
    def taken_prefix(self) -> str:
        return f"{slot_tag(self.seeds)}:taken:"

    def taken(self, node_id: str) -> str:
        return self.taken_prefix + node_id

    @property
    def holds_pattern(self) -> str:
        """SCAN pattern of the takers hash, the let-go hash and every node's taken list."""
        return glob_escape(slot_tag(self.seeds)) + ":ta[kr]*"


@dataclass(frozen=True, slots=True)
class HeldSeeds:
    held: int  # seeds in the taken lists of every holder
    expired: int  # of those, held by holders whose hold expired (killed nodes)


def reclaim_call(
    keys: SeedKeys, source: str, node_id: str = RECLAIM_EXPIRED
) -> tuple[list[str], list[str]]:
    """KEYS and ARGV of ``lua/seed_reclaim.lua``: return the seeds ``node_id`` holds (by
    default those of every holder whose hold expired) to the seed key, a ``source``
    (``list``, ``set`` or ``zset``, as ``SEEDS_TYPE`` says)."""
    return [keys.seeds, keys.takers, keys.let_go], [keys.taken_prefix, source, node_id]


def seed_readers(client: SyncRedis, keys: SeedKeys, now_ms: float) -> list[str]:
    """The nodes reading seeds from ``keys.seeds`` now: their hold deadline is after
    ``now_ms`` (Redis time; every reading node refreshes it, holding seeds or not)."""
    takers: dict[Any, Any] = client.hgetall(keys.takers)
    return sorted(text(node) for node, deadline in takers.items() if float(deadline) > now_ms)


def held_seeds(client: SyncRedis, keys: SeedKeys, now_ms: float) -> HeldSeeds:
    """The seeds held by nodes now (``now_ms``: Redis time), as ``seed_reclaim.lua`` sees
    them: a holder whose deadline is not after ``now_ms`` has expired."""
    takers: dict[Any, Any] = client.hgetall(keys.takers)
    if not takers:
        return HeldSeeds(0, 0)
    holders = [(text(node), float(deadline)) for node, deadline in takers.items()]
    with client.pipeline(transaction=False) as pipe:
        for node, _ in holders:
            pipe.llen(keys.taken(node))
        counts: list[int] = pipe.execute()
    return HeldSeeds(
        held=sum(counts),
        expired=sum(
            count
            for (_, deadline), count in zip(holders, counts, strict=True)
            if deadline <= now_ms
        ),
    )
