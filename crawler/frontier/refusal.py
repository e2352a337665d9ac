"""Why a node may not use its spider's frontier (no Scrapy imports).

The first frontier step of a node (``crawler.frontier.admission``) checks the crawl's
partition count, dedup mode, storage layout, Kafka backlog, the topics of the crawl's items
and a scrapy-redis queue left in Redis; a node that does not fit is refused before it reads a
seed or writes a request: ``frontier/refused/<stat>``, an ERROR log saying what to do, and
the spider closes with ``finish_reason``. A running node is stopped the same way when its
backlog topic is no longer the crawl's (``BacklogTopicTaken``) or a frontier write fails for
good (``WriteFailed``).
"""

from __future__ import annotations


def topics(named: str) -> str:
    """``topic A`` or ``topics A and B`` (Kafka topic names hold no spaces)."""
    return f"topics {named}" if " and " in named else f"topic {named}"


class FrontierRefused(Exception):
    """This node may not read or write its spider's frontier."""

    stat = "refused"  # the stat frontier/refused/<stat>
    finish_reason = "frontier_refused"  # the spider's finish reason


class CrawlSettingChanged(FrontierRefused):
    """A node's setting is not the one its spider's crawl started with (its first node recorded
    it): ``the frontier of <spider> <crawl_has>, but this node has <node_has>: ...``."""

    def __init__(self, spider: str, crawl_has: str, node_has: str, start_with: str) -> None:
        super().__init__(
            f"the frontier of {spider!r} {crawl_has}, but this node has {node_has}: start it "
            f"with {start_with}, or end the crawl with `crawler purge {spider}` to start a new "
            "one with this node's"
        )


class BacklogUnread(FrontierRefused):
    """Requests of the crawl wait in the Kafka backlog, and this node would not read them."""

    stat = "backlog"
    finish_reason = "frontier_backlog_unread"

    def __init__(self, spider: str, spilled: int) -> None:
        super().__init__(
            f"{spilled} requests of {spider!r} wait in the Kafka backlog (spilled under "
            "FRONTIER_QUEUE_MAX), and a node without FRONTIER_QUEUE_MAX does not read them "
            "back: the crawl would never finish. Start the nodes with -s FRONTIER_QUEUE_MAX=<n> "
            f"(any bound), or end the crawl with `crawler purge {spider}`"
        )


class BacklogTopicChanged(FrontierRefused):
    """Requests of the crawl wait in another Kafka backlog topic than this node reads."""

    stat = "backlog_topic"
    finish_reason = "frontier_backlog_topic"

    def __init__(self, spider: str, spilled: int, recorded: str, given: str) -> None:
        super().__init__(
            f"{spilled} requests of {spider!r} wait in the Kafka backlog {topics(recorded)}, "
            f"and this node's FRONTIER_BACKLOG_TOPIC gives {given}, which it would read instead: "
            "they would never be crawled. Give the nodes "
            + (
                "the FRONTIER_BACKLOG_TOPIC of one of them (their nodes read it back), then "
                "the other's"
                if " and " in recorded
                else "the FRONTIER_BACKLOG_TOPIC the crawl started with"
            )
            + f", or end the crawl with `crawler purge {spider}`"
        )


class BacklogTopicTaken(FrontierRefused):
    """A node given another ``FRONTIER_BACKLOG_TOPIC`` started while nothing waited in the
    crawl's, and recorded its own: this node stops before it spills to its topic again."""

    stat = "backlog_topic"
    finish_reason = "frontier_backlog_topic"

    def __init__(self, recorded: str, given: str, waiting: int) -> None:
        left = (
            f"; {waiting} requests wait in {given}, read back only by a node spilling to it"
            if waiting
            else ""
        )
        super().__init__(
            f"the crawl now spills to the Kafka backlog topic {recorded} (a node started with "
            f"that FRONTIER_BACKLOG_TOPIC while no request waited), and this node spills to "
            f"{given}: it stops. Give every node the same FRONTIER_BACKLOG_TOPIC{left}"
        )


class ScrapyRedisQueueLeft(FrontierRefused):
    """A scrapy-redis crawl of the spider stopped under way: its queue is still in Redis."""

    stat = "scrapy_redis_queue"
    finish_reason = "frontier_scrapy_redis_queue"

    def __init__(self, spider: str, queue: str, count: int, dupefilter: str) -> None:
        super().__init__(
            f"{count} requests of a scrapy-redis crawl of {spider!r} wait in {queue} "
            "(scrapy-redis's queue, its requests pickled, which this project never reads): "
            "they would never be crawled. Finish that crawl with scrapy-redis, or delete its "
            f"keys (`redis-cli del {queue}`, then `redis-cli del {dupefilter}`; `redis-cli -c` "
            "on a Redis Cluster, where they may live on two masters) to crawl from the seeds here"
        )


class WriteFailed(FrontierRefused):
    """A frontier write raised what is neither an outage (the guard waits those out) nor a
    refusal: its requests and settled leases cannot be written, and its node would hold their
    leases for ever. It stops instead; the leases expire and go back to the queue."""

    stat = "write_failed"
    finish_reason = "frontier_write_failed"

    def __init__(self, exc: Exception) -> None:
        super().__init__(
            f"a frontier write failed ({type(exc).__name__}: {exc}): the node stops; the "
            "requests it holds go back to the queue once their leases expire "
            "(FRONTIER_LEASE_TIMEOUT)"
        )


class ItemTopicsChanged(FrontierRefused):
    """The crawl's items go to the topics of another ``KAFKA_TOPIC_TEMPLATE`` than this node's
    (or to Kafka, and this node sends none there, or the other way round), and live nodes send
    them there."""

    stat = "item_topics"
    finish_reason = "item_topics_changed"

    def __init__(
        self, spider: str, crawl_id: str, recorded: str, given: str, senders: list[str]
    ) -> None:
        if not given:
            instead = (
                "this node sends none to Kafka (KAFKA_BOOTSTRAP_SERVERS empty, or KafkaPipeline "
                "off): its items would go only to its own pipelines and feeds, which the crawl's "
                "consumers do not read. Start it with KAFKA_BOOTSTRAP_SERVERS set, KafkaPipeline "
                f"on and KAFKA_TOPIC_TEMPLATE={recorded!r}"
            )
        elif not recorded:
            instead = (
                f"this node sends them to the topics of KAFKA_TOPIC_TEMPLATE={given!r}, not "
                "where the crawl's other items are. Start it without KAFKA_BOOTSTRAP_SERVERS (or "
                "with KafkaPipeline off)"
            )
        else:
            instead = (
                f"this node's is {given!r}: its items would go to topics the crawl's consumers "
                f"do not read. Start it with -s KAFKA_TOPIC_TEMPLATE={recorded!r}"
            )
        super().__init__(
            f"crawl {crawl_id!r} of {spider!r} sends its items to {item_output(recorded)} (live "
            f"nodes: {', '.join(senders)}), and {instead}, or once those nodes have stopped, or "
            "with another CRAWLER_CRAWL_ID"
        )


def item_output(template: str) -> str:
    """Where a crawl of ``template`` (its record, ``crawler.frontier.item_topics``) sends its
    items: ``''`` is a crawl whose nodes send none to Kafka."""
    if not template:
        return "no Kafka topic, only each node's own pipelines and feeds"
    return f"the topics of KAFKA_TOPIC_TEMPLATE={template!r}"
