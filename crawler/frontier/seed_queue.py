"""Async access to a spider's seed key in Redis (no Scrapy imports).

Seeds are pushed by users with ``LPUSH <spider>:start_urls``; nodes take them from
the right, so seeds are taken in the order they were pushed. With ``SEEDS_TYPE``
``zset`` (scrapy-redis's ``REDIS_START_URLS_AS_ZSET``) the highest scores leave
first; with ``set`` (``REDIS_START_URLS_AS_SET``) any member.

Seeds are *taken*, not popped: one Lua step (``lua/seed_take.lua``) moves a batch
from the seed key into this node's taken list ``{<seed key>}:taken:<node>`` and
sets the node's hold deadline in ``{<seed key>}:takers`` (Redis time). The node
trims the list once the batch's requests are in the frontier (:meth:`SeedQueue.done`)
and refreshes its hold meanwhile (:meth:`SeedQueue.keep_alive`). Any node returns
the seeds of a node whose hold expired (it died) to the seed key
(``lua/seed_reclaim.lua``, as ``crawler requeue`` does:
``crawler.frontier.seed_holds``), and a node stopping gracefully returns its own
(:meth:`SeedQueue.give_back`): no seed is lost at any instant. A list seed key
empty at a look is waited on with ``BLMOVE`` into the taken list (atomic too), so
an idle node sees a new seed as soon as it is pushed; sets and sorted sets are
looked at again after the wait. A key of another type raises ``WrongSeedKeyType``
naming it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from redis.exceptions import ResponseError

from crawler.frontier.pending import pending_requests
from crawler.frontier.seed_holds import SeedKeys, reclaim_call
from crawler.frontier.seed_settings import SeedSource
from crawler.lua import script_text, text
from crawler.redis_connection import AsyncRedis
from crawler.url_credentials import mask_secrets


class WrongSeedKeyType(Exception):
    """The seed key holds another Redis type than the spider reads."""

    def __init__(self, key: str, found: str, source: SeedSource) -> None:
        hint = {"set": "REDIS_START_URLS_AS_SET=True", "zset": "REDIS_START_URLS_AS_ZSET=True"}
        fix = hint.get(found, "SEEDS_TYPE=list (the default)" if found == "list" else "")
        remedy = f"set {fix} or push to another key" if fix else "delete it or choose another key"
        super().__init__(
            f"seed key {key!r} is a Redis {found}, but this spider reads a {source.value} "
            f"(SEEDS_TYPE): {remedy}"
        )
        self.key = key
        self.found = found


@dataclass(frozen=True, slots=True)
class LetGo:
    """The first ``count`` seeds of the held batch are in the frontier: they leave the taken
    list once, however often a call carrying this is sent (``call`` is recorded by
    ``lua/seed_take.lua``), never trimming the batch taken after them."""

    count: int
    call: str = field(default_factory=lambda: uuid.uuid4().hex)


NOTHING_LET_GO = LetGo(0, "")


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


class SeedQueue:
    def __init__(
        self,
        client: AsyncRedis,
        keys: SeedKeys,
        source: SeedSource = SeedSource.LIST,
        *,
        node_id: str,
        hold_ms: int,
    ) -> None:
        self._client = client
        self.keys = keys
        self.source = source
        self.node_id = node_id
        self.hold_ms = hold_ms
        self._take = client.register_script(script_text("crawler.frontier", "seed_take"))
        self._take_keys = [keys.seeds, keys.taken(node_id), keys.takers, keys.let_go]
        self._reclaim = client.register_script(script_text("crawler.frontier", "seed_reclaim"))

    async def take(self, count: int, timeout: float, let_go: LetGo = NOTHING_LET_GO) -> list[bytes]:
        """The batch this node holds, up to ``count`` seeds, waiting up to ``timeout``
        seconds for the first. Seeds held from before (not yet let go) come first; ``let_go``
        is applied first."""
        try:
            held = await self._take_now(count, let_go)
            if held:
                return held
            if self.source is SeedSource.LIST:
                moved = await self._client.blmove(  # Redis takes a fraction of a second
                    self.keys.seeds,
                    self.keys.taken(self.node_id),
                    timeout,  # type: ignore[arg-type]
                    "RIGHT",
                    "RIGHT",
                )
                return await self._take_now(count) if moved is not None else []
        except ResponseError as exc:
            if not str(exc).startswith("WRONGTYPE"):
                raise
            found = text(await self._client.type(self.keys.seeds))
            raise WrongSeedKeyType(self.keys.seeds, found, self.source) from exc
        await asyncio.sleep(timeout)
        return []

    async def _take_now(self, count: int, let_go: LetGo = NOTHING_LET_GO) -> list[bytes]:
        entries = await self._take(
            keys=self._take_keys,
            args=[count, self.node_id, self.hold_ms, self.source.value, let_go.count, let_go.call],
        )
        seeds = [_bytes(entry) for entry in entries]
        if self.source is SeedSource.ZSET:  # '<score> <member>'
            return [seed.split(b" ", 1)[1] for seed in seeds]
        return seeds

    async def done(self, let_go: LetGo) -> None:
        """Let go of seeds of the held batch whose requests are in the frontier (and refresh
        the hold)."""
        await self._take_now(0, let_go)

    async def keep_alive(self) -> int:
        """Refresh this node's hold; return the seeds of expired holders to the seed key.
        Returns how many seeds were returned."""
        await self._take_now(0)
        keys, args = reclaim_call(self.keys, self.source.value)
        return int(await self._reclaim(keys=keys, args=args))

    async def give_back(self) -> int:
        """Return every seed this node holds to the seed key (at a graceful stop)."""
        keys, args = reclaim_call(self.keys, self.source.value, self.node_id)
        return int(await self._reclaim(keys=keys, args=args))

    async def reject(self, raw: bytes, reason: str, error: str, node_id: str) -> None:
        """Record a seed that cannot be crawled in the invalid-seed list."""
        record = {
            "seed": mask_secrets(raw.decode("utf-8", "replace")[:4096]),
            "reason": reason,
            "error": mask_secrets(error),
            "node": node_id,
            "at": time.time(),
        }
        await self._client.lpush(self.keys.invalid, orjson.dumps(record))

    async def pending_requests(self) -> int:
        """Requests queued or leased by any node in the shared frontier."""
        return await pending_requests(self._client, self.keys.frontier)


# The command that counts a seed key's seeds, by what Redis's ``TYPE`` says of it (a key not
# there yet is a list to be: ``LLEN`` answers 0).
SEED_COUNT_COMMANDS = {"list": "LLEN", "none": "LLEN", "set": "SCARD", "zset": "ZCARD"}


async def seed_count(client: AsyncRedis, key: str) -> int:
    """The seeds waiting in ``key``, whatever its type (list, set or sorted set; 0 else)."""
    command = SEED_COUNT_COMMANDS.get(text(await client.type(key)))
    if command is None:
        return 0
    return int(await client.execute_command(command, key))
