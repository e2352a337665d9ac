"""Which node writes a plain spider's start requests, once per crawl (no Scrapy imports).

A spider that is not fed from ``<spider>:start_urls`` (``start_urls`` or its
own ``start()``) has start requests every node would produce. The first node
claims ``{<spider>}:start:<crawl id>`` and writes them into the frontier;
nodes that start later see ``done`` and only lease. The claim lives as long
as a lease and is refreshed while writing, so if its node dies another node
takes over and writes them again (at-least-once: the frontier's dedup drops
those already queued unless they are ``dont_filter``).
"""

from __future__ import annotations

import hashlib
from enum import StrEnum

from crawler.frontier.keys import FrontierKeys
from crawler.lua import script_text, text
from crawler.redis_connection import AsyncRedis


class ClaimOutcome(StrEnum):
    WON = "won"  # this node writes the start requests
    HELD = "held"  # another live node is writing them
    DONE = "done"  # they are in the frontier already


def start_key(keys: FrontierKeys, crawl_id: str) -> str:
    return f"{keys.start_prefix}{crawl_id}"


def start_urls_digest(start_urls: object) -> str:
    """A spider's ``start_urls`` as a claim records them: ``<count> <digest>`` ('' when it has
    none, or they are not a list of URLs)."""
    if not isinstance(start_urls, (list, tuple)) or not start_urls:
        return ""
    urls = [str(url) for url in start_urls]
    digest = hashlib.sha1("\n".join(sorted(urls)).encode(), usedforsecurity=False)
    return f"{len(urls)} {digest.hexdigest()[:16]}"


class StartClaim:
    def __init__(self, client: AsyncRedis, key: str, node_id: str, lifetime_ms: int) -> None:
        self.key = key
        self._client = client
        self._node_id = node_id
        self._lifetime_ms = lifetime_ms
        self._claim = client.register_script(script_text("crawler.frontier", "start_claim"))
        self._refresh = client.register_script(script_text("crawler.frontier", "start_refresh"))
        self._finish = client.register_script(script_text("crawler.frontier", "start_finish"))
        self._release = client.register_script(script_text("crawler.frontier", "start_release"))

    async def claim(self, arguments: str = "", start_urls: str = "") -> ClaimOutcome:
        """Claim the writing; ``arguments``: the spider's arguments as this node was given them,
        ``start_urls``: what its start_urls are (``start_urls_digest``); both text, recorded
        with a claim won ('' for none known)."""
        outcome = await self._claim(
            keys=[self.key], args=[self._node_id, self._lifetime_ms, arguments, start_urls]
        )
        return ClaimOutcome(outcome.decode() if isinstance(outcome, bytes) else str(outcome))

    async def arguments(self) -> str | None:
        """The spider arguments of the node that claimed the writing last (read only; None: not
        recorded)."""
        value = await self._client.hget(self.key, "arguments")
        return None if value is None else text(value)

    async def start_urls(self) -> str | None:
        """What the start_urls of the node that claimed the writing last were (read only;
        None: not recorded)."""
        value = await self._client.hget(self.key, "start_urls")
        return None if value is None else text(value)

    async def written(self) -> bool:
        """True once some node has marked the start requests written (read only)."""
        return await self._client.hget(self.key, "state") in (b"done", "done")

    async def refresh(self) -> bool:
        """Extend the claim; False when it is no longer this node's."""
        return bool(await self._refresh(keys=[self.key], args=[self._node_id, self._lifetime_ms]))

    async def finish(self, failed_after: int | None = None, set_up: str = "") -> bool:
        """Mark the start requests written (``failed_after``: start() raised after that many;
        ``set_up``: what it set up on its spider, which the other nodes say they lack); False
        when the claim had passed to another node."""
        failed = "" if failed_after is None else failed_after
        return bool(await self._finish(keys=[self.key], args=[self._node_id, failed, set_up]))

    async def set_up(self) -> str | None:
        """What the writer's start() set up on its spider ('' for nothing; None: the writer,
        of an earlier version, did not record it; read only)."""
        value = await self._client.hget(self.key, "set_up")
        return None if value is None else text(value)

    async def failed_after(self) -> int | None:
        """How many start requests start() gave before it raised, when it did (read only)."""
        value = await self._client.hget(self.key, "failed_after")
        return None if value is None else int(value)

    async def release(self) -> bool:
        """Give the claim up while writing (the node stops): another node takes it at once.
        False when it was no longer this node's."""
        return bool(await self._release(keys=[self.key], args=[self._node_id]))


async def running_writer(client: AsyncRedis, keys: FrontierKeys, crawl_id: str) -> str | None:
    """The node that wrote the crawl's start requests, when it runs now (its heartbeat is
    current): a node that finds the crawl over while it does started as the crawl ended, not
    on a crawl that ended a while ago. None: no writer recorded, or it does not run."""
    script = client.register_script(script_text("crawler.frontier", "start_writer_running"))
    writer = text(await script(keys=[start_key(keys, crawl_id), keys.nodes]))
    return writer or None
