"""The shared state of a spider's cluster, read from Redis at scrape time (no Scrapy).

One Lua call per part of the spider's frontier (each part's keys share its hash tag)
counts the queue (with the requests spilled to the Kafka backlog, as ``crawler status`` does),
the leases, the expired ones and the live nodes on Redis server time
(every node beats in every part: part 0 counts the nodes); a spider with a
``session_platform`` adds a census of its accounts by health. The metrics server calls
this from its own thread with a synchronous client and short timeouts, so a scrape never
touches the reactor and a Redis outage costs a scrape at most a timeout.
"""

from __future__ import annotations

from dataclasses import dataclass

from crawler.frontier.keys import frontier_parts
from crawler.redis_connection import SyncRedis
from crawler.redis_outage import REDIS_FAILURES
from crawler.sessions.census import count_sessions
from crawler.sessions.keys import SessionKeys
from crawler.sessions.models import Health

CLUSTER_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {
  tonumber(redis.call('GET', KEYS[1]) or '0'),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCOUNT', KEYS[2], '-inf', '(' .. now),
  redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf'),
  math.max(0, tonumber(redis.call('GET', KEYS[4]) or '0')),
}
"""


@dataclass(frozen=True, slots=True)
class ClusterState:
    queue: int  # requests waiting in every part: in Redis's queue, or spilled to the backlog
    leases: int  # requests leased by any node
    expired_leases: int  # leases past their deadline, not reclaimed yet
    live_nodes: int  # nodes whose heartbeat has not run out
    sessions: dict[str, int]  # accounts by health, every ``Health`` (empty: no platform)
    backlog: int = 0  # of ``queue``, those waiting in the Kafka backlog (FRONTIER_QUEUE_MAX)


class ClusterReader:
    def __init__(
        self, client: SyncRedis, spider: str, sessions: SessionKeys | None, partitions: int = 1
    ) -> None:
        """``sessions``: the keys of the spider's session platform (None: it has none)."""
        self._client = client
        self._parts = [
            [keys.queue_count, keys.leases, keys.nodes, keys.backlog]
            for keys in frontier_parts(spider, partitions)
        ]
        self._script = client.register_script(CLUSTER_SCRIPT)
        self._sessions = sessions

    def read(self) -> ClusterState | None:
        """The state now; None when Redis does not answer."""
        try:
            counts = [self._script(keys=keys) for keys in self._parts]
            queued, leases, expired = (sum(int(c[i]) for c in counts) for i in range(3))
            live = counts[0][3]
            backlog = sum(int(c[4]) for c in counts)
            census = count_sessions(self._client, self._sessions) if self._sessions else None
        except (*REDIS_FAILURES, OSError):
            return None
        sessions = (
            {health.value: census["by_health"].get(health.value, 0) for health in Health}
            if census is not None
            else {}
        )
        return ClusterState(queued + backlog, leases, expired, int(live), sessions, backlog=backlog)

    def ping(self) -> bool:
        try:
            return bool(self._client.ping())
        except (*REDIS_FAILURES, OSError):
            return False

    def close(self) -> None:
        self._client.close()
