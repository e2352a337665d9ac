"""One running process per node id (no Scrapy imports).

``CRAWLER_NODE_ID`` names a node in every shared record: its leases, its seed holds, its start
claim. Two live processes of one id (a unit file copied to two machines with the id in it) took
each other's seeds (16 seeds lost when one was killed, a batch written twice when not), both
won a plain spider's start claim (every start request twice), and were shown as one node. So
the run of a node id holds ``{<spider>}:run:<node>`` (``lua/node_run.lua``), refreshed at each
heartbeat and expiring three heartbeat intervals after its last: a process that finds it held
waits for it to expire (the run before it was killed: a pod restarted in place keeps its name)
and is refused (``NodeIdInUse``) if its holder refreshes it meanwhile (a live process). A node
that takes its id over from a killed run returns that run's leases to the queue at once (they
expire now, and the next heartbeat's reclaim returns them), not after ``FRONTIER_LEASE_TIMEOUT``;
it leases nothing before (``FrontierAdmission.admitted``). A graceful stop lets go of
the key, so a node restarted after one starts at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence

from crawler.frontier.keys import FrontierKeys
from crawler.frontier.refusal import FrontierRefused
from crawler.lua import script_text, text
from crawler.redis_connection import AsyncRedis

logger = logging.getLogger(__name__)

RUN_BEATS = 3  # heartbeats the run key outlives its last refresh by
CLAIM_POLL = 0.5  # seconds between looks at another run's key
TAKE_BATCH = 500  # inflight records read, and leases expired, per call


class NodeIdInUse(FrontierRefused):
    """Another live process runs with this node's id."""

    stat = "node_id"
    finish_reason = "node_id_in_use"

    def __init__(self, node_id: str, holder: str) -> None:
        super().__init__(
            f"CRAWLER_NODE_ID={node_id} is in use by another running process (its run "
            f"{holder.split(' ', 1)[0]} beats in Redis): two processes of one id take each "
            "other's seeds and leases. Give each process its own CRAWLER_NODE_ID (or leave it "
            "empty: <hostname>-<pid>)"
        )


class NodeRun:
    def __init__(
        self, redis: AsyncRedis, part0: FrontierKeys, node_id: str, heartbeat_interval: float
    ) -> None:
        self.node_id = node_id
        self.token = uuid.uuid4().hex[:12]
        self._key = part0.node_run(node_id)
        self._ttl_ms = int(RUN_BEATS * heartbeat_interval * 1000)
        self._script = redis.register_script(script_text("crawler.frontier", "node_run"))
        self._redis = redis
        self.claimed = False  # this run holds the id (beats refresh it from then on)

    async def _call(self, mode: str) -> list[str]:
        reply = await self._script(keys=[self._key], args=[self.token, self._ttl_ms, mode])
        return [text(part) for part in reply]

    async def claim(self) -> bool:
        """Hold the node id; True when a killed run held it until now. Raises ``NodeIdInUse``
        when a live process holds it."""
        seen: str | None = None
        deadline = 0.0
        while True:
            outcome, *held = await self._call("claim")
            if outcome == "ours":
                self.claimed = True
                return seen is not None
            holder, lives_ms = held[0], int(held[1])
            if seen is None:  # it expires as its own heartbeat interval says
                seen, deadline = holder, time.monotonic() + lives_ms / 1000 + 2
                logger.info(
                    "Node id %s is held by run %s (killed?): waiting up to %.0fs for it to expire",
                    self.node_id,
                    holder.split(" ", 1)[0],
                    lives_ms / 1000,
                )
            elif holder != seen or time.monotonic() > deadline:  # refreshed: it beats
                raise NodeIdInUse(self.node_id, holder)
            await asyncio.sleep(CLAIM_POLL)

    async def beat(self) -> str | None:
        """Refresh the hold once claimed; the holder's run when another process took the id
        meanwhile (this one was kept from Redis for longer than the key lives)."""
        if not self.claimed:
            return None
        outcome, *held = await self._call("beat")
        return held[0] if outcome == "held" else None

    async def end(self) -> None:
        """Let go of the id (a graceful stop: a node restarted with it starts at once)."""
        if self.claimed:
            await self._call("end")
            self.claimed = False

    async def take_back(self, parts: Sequence[FrontierKeys]) -> int:
        """Expire now the leases of this node id that an earlier run left, in every part, so
        the next heartbeat's reclaim returns them (read with ``HSCAN``: Redis is not held up
        by a large ``inflight``). Only before this run leases: it holds the id, so every lease
        recorded under it is a killed run's."""
        prefix = f"{self.node_id}\t".encode()
        expired = 0
        for part in parts:
            records = self._redis.hscan_iter(part.inflight, count=TAKE_BATCH)
            ids = [lease_id async for lease_id, record in records if record.startswith(prefix)]
            for start in range(0, len(ids), TAKE_BATCH):
                chunk = dict.fromkeys(ids[start : start + TAKE_BATCH], 0)
                changed = await self._redis.zadd(part.leases, chunk, xx=True, ch=True)
                expired += int(changed or 0)
        return expired
