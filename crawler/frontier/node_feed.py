"""``NodeSeenFeed``: a node's end of the seen feed (``FRONTIER_SEEN_FEED``).

It shares the fingerprints the node's writes record and takes those of the other nodes into
its seen-cache, in the frontier's epoch as the node knows it; at a stop, after the last write,
it hands what is left to Kafka within the close deadline. The feed itself is
``crawler.frontier.seen_feed.SeenFeed`` (Kafka only); this is its Scrapy-side wiring.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from crawler.frontier.seen_feed import SeenFeed, Stats
from crawler.frontier.settings import FrontierSettings
from crawler.kafka.topics import topic_from_template
from crawler.node_context import NodeContext

logger = logging.getLogger(__name__)


class NodeSeenFeed:
    def __init__(self, feed: SeenFeed, loop: asyncio.Task[None], context: NodeContext) -> None:
        self.feed = feed
        self.loop = loop
        self.context = context

    @classmethod
    def open(
        cls,
        context: NodeContext,
        settings: FrontierSettings,
        spider: str,
        stats: Stats,
        *,
        epoch: Callable[[], str],
        learn: Callable[[str, float], bool],
    ) -> NodeSeenFeed:
        given = settings.seen_feed
        topic = topic_from_template("FRONTIER_SEEN_TOPIC", given.topic, spider)
        found_too = not settings.dedup.ttl
        feed = SeenFeed(replace(given, topic=topic), context.node_id, stats, found_too=found_too)
        loop = context.supervise("seen_feed", lambda: feed.run(epoch, learn))
        return cls(feed, loop, context)

    def publish(self, epoch: str, recorded: Sequence[str], found: Sequence[str]) -> None:
        self.feed.publish(epoch, recorded, found)

    async def close(self) -> None:
        self.loop.cancel()
        left = self.context.close_deadline() - time.monotonic()
        try:
            await asyncio.wait_for(self.feed.close(), max(0.1, left))
        except TimeoutError:
            logger.warning("The seen feed did not close in time (Kafka away?)")
