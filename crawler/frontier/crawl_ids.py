"""Nodes of one spider running other crawls on its frontier are said (no Scrapy imports).

``CRAWLER_CRAWL_ID`` names a crawl: its start requests (``start()`` runs once a crawl) and its
ledger. Nodes of one spider started with different ids share its frontier all the same (its
queue and dedup: a page is fetched once for all of them), and each crawl's ledger counts only
its own nodes' work, so ``enqueued + retried == done + failed`` holds for the crawls together,
not for each. That is how a new crawl id takes over from a crawl that still runs, so it is
said, not refused: each node records its crawl id (``{<spider>}:node_crawls``) as its frontier
opens, and again every ``LOOK_SECONDS`` at a heartbeat, and says in a WARNING which live nodes
(their run key held, ``crawler.frontier.node_run``) run others, at the first look and whenever
another crawl id appears (``frontier/other_crawls``): a node of the earlier crawl is told too;
records of nodes that do not run are dropped in the same step.
"""

from __future__ import annotations

import logging
import time

from crawler.frontier.keys import FrontierKeys
from crawler.lua import frontier_script, text
from crawler.redis_connection import AsyncRedis

logger = logging.getLogger(__name__)

LOOK_SECONDS = 30.0  # between a running node's looks at the other nodes' crawl ids


def say_other_crawls(spider: str, crawl_id: str, others: dict[str, list[str]]) -> None:
    logger.warning(
        "Live nodes of %r run other crawls on its frontier (%s) than this node's %r "
        "(CRAWLER_CRAWL_ID): the crawls share its queue and dedup (a page is fetched once for "
        "all of them), and each crawl's ledger counts only its own nodes' work. Give every "
        "node of a crawl the same CRAWLER_CRAWL_ID (frontier/other_crawls)",
        spider,
        "; ".join(f"{crawl!r}: {', '.join(nodes)}" for crawl, nodes in others.items()),
        crawl_id,
    )


class CrawlIdsLook:
    """A node's looks at the crawl ids of the other running nodes of its spider."""

    def __init__(
        self, redis: AsyncRedis, part0: FrontierKeys, spider: str, node_id: str, crawl_id: str
    ) -> None:
        self.part0 = part0
        self.spider = spider
        self.node_id = node_id
        self.crawl_id = crawl_id
        self._script = redis.register_script(frontier_script("running_nodes", "crawl_ids"))
        self._said: set[str] = set()  # the other crawl ids said so far
        self._looked = 0.0

    async def look(self, *, now: bool = False) -> bool:
        """Record this node's crawl id (``now``, or ``LOOK_SECONDS`` after the last look);
        True when running nodes run a crawl id not said before (said in a WARNING)."""
        if not now and time.monotonic() - self._looked < LOOK_SECONDS:
            return False
        self._looked = time.monotonic()
        others = await self.others()
        if set(others) <= self._said:
            return False
        self._said |= set(others)
        say_other_crawls(self.spider, self.crawl_id, others)
        return True

    async def others(self) -> dict[str, list[str]]:
        """Record this node's crawl; the other crawls running nodes run (crawl id -> nodes),
        in one step (``lua/crawl_ids.lua``)."""
        flat = await self._script(
            keys=[self.part0.node_crawls],
            args=[self.node_id, self.crawl_id, self.part0.node_run("")],
        )
        others: dict[str, list[str]] = {}
        for node, crawl in zip(map(text, flat[::2]), map(text, flat[1::2]), strict=True):
            if crawl != self.crawl_id:
                others.setdefault(crawl, []).append(node)
        return {crawl: sorted(nodes) for crawl, nodes in sorted(others.items())}
