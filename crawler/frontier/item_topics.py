"""Every item of a crawl goes to the topics of one ``KAFKA_TOPIC_TEMPLATE`` (no Scrapy imports).

Nodes of one crawl given different templates split its items over topics without a word: a
consumer of the crawl's topic missed 42% of it (an audit). So the crawl's first node records
its template (``{<spider>}:ledger:<crawl id>:item_topics``; each node its own in
``...:item_topics:nodes``) as its frontier opens, and a node given another is refused while a
live node (its run key, ``crawler.frontier.node_run``, held) sends to the recorded one
(``frontier/refused/item_topics``, finish reason ``item_topics_changed``). With none live (a
later run of the crawl with a new template) this node's becomes the crawl's, said in a
WARNING. Each node's record and check are one step (``lua/item_topics.lua``): of nodes that
start together with different templates, the first to record wins. A template is compared with
``{spider}`` filled in. A node that sends no item to Kafka (``KAFKA_BOOTSTRAP_SERVERS`` empty,
or ``KafkaPipeline`` off: its items go only to its own pipelines and feeds) records
``NO_KAFKA`` the same way: a crawl's items go to Kafka or not, never some of them (a node whose
environment forgot Kafka crawled its share into its feed, and the crawl's consumers missed it).
"""

from __future__ import annotations

import logging

from crawler.extensions.ledger_layout import LedgerKeys
from crawler.frontier.keys import FrontierKeys
from crawler.frontier.refusal import ItemTopicsChanged, item_output
from crawler.lua import frontier_script, text
from crawler.redis_connection import AsyncRedis

logger = logging.getLogger(__name__)

NO_KAFKA = ""  # the template a node that sends no item to Kafka records


class ItemTopics:
    def __init__(self, redis: AsyncRedis, part0: FrontierKeys, spider: str, crawl_id: str) -> None:
        self.part0 = part0
        self.spider = spider
        self.crawl_id = crawl_id
        self.keys = LedgerKeys.for_crawl(spider, crawl_id)
        self._script = redis.register_script(frontier_script("running_nodes", "item_topics"))

    async def claim(self, node_id: str, template: str) -> None:
        """Record ``node_id``'s template (its ``{spider}`` filled in: the same topics are the
        same template); ``ItemTopicsChanged`` when live nodes send the crawl's items to
        another's."""
        given = template.replace("{spider}", self.spider)
        outcome, *rest = [
            text(value)
            for value in await self._script(
                keys=[self.keys.item_topics, self.keys.node_topics],
                args=[node_id, given, self.part0.node_run("")],
            )
        ]
        if outcome == "refused":
            recorded, *senders = rest
            raise ItemTopicsChanged(self.spider, self.crawl_id, recorded, given, sorted(senders))
        if outcome == "taken":
            logger.warning(
                "Crawl %r of %r: no node that sends its items where they went until now runs "
                "(%s); from now on they go where this node sends them (%s), and consumers of "
                "the earlier do not get them",
                self.crawl_id,
                self.spider,
                item_output(rest[0]),
                item_output(given),
            )
