"""Every node of a crawl should keep the same ``FRONTIER_QUEUE_MAX`` (no Scrapy imports).

Each node spills a part above its own bound and reads the part back below half of its own, so
with different bounds requests go back and forth through Kafka: nothing is lost or crawled
twice, but the work is wasted (about 3 trips a request for bounds of 5 and 300 in an audit). A
rolling change of the bound passes through such a mix, so it is said, not refused: at each of
its looks at the backlog topic a node records its bound (``{<spider>}:backlog:bounds``,
``lua/backlog_bounds.lua``) and says in a WARNING when live nodes keep others, once for each
set of other bounds. A node without the bound runs no backlog and records none (it is refused
while requests wait in the backlog: ``crawler.frontier.admission``).
"""

from __future__ import annotations

import logging

from crawler.frontier.keys import FrontierKeys
from crawler.lua import frontier_script, text
from crawler.redis_connection import AsyncRedis

logger = logging.getLogger(__name__)


class BoundsLook:
    def __init__(self, redis: AsyncRedis, keys: FrontierKeys, node_id: str, bound: int) -> None:
        self.keys = keys  # part 0's
        self.node_id = node_id
        self.bound = bound
        self._script = redis.register_script(frontier_script("backlog_bounds"))
        self._said: tuple[int, ...] = ()  # the other bounds said last

    async def look(self) -> bool:
        """Record this node's bound; True when live nodes keep other bounds than it, the first
        time that set of bounds is seen (said in a WARNING)."""
        flat = await self._script(
            keys=[self.keys.backlog_bounds, self.keys.nodes], args=[self.node_id, self.bound]
        )
        others = {
            text(node): int(bound)
            for node, bound in zip(flat[::2], flat[1::2], strict=True)
            if int(bound) != self.bound
        }
        bounds = tuple(sorted(set(others.values())))
        said, self._said = self._said, bounds
        if not bounds or bounds == said:
            return False
        nodes = sorted(others)
        logger.warning(
            "Nodes of this crawl keep FRONTIER_QUEUE_MAX=%s (%s%s) where this node keeps %d: each "
            "spills above its own bound and reads back below half of its own, so requests go "
            "back and forth through Kafka (nothing lost or crawled twice, but wasted work); give "
            "every node the same bound (frontier/backlog_bounds_differ)",
            ", ".join(map(str, bounds)),
            ", ".join(nodes[:3]),
            f" and {len(nodes) - 3} more" if len(nodes) > 3 else "",
            self.bound,
        )
        return True
