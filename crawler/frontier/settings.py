"""Frontier (leasing scheduler) settings, read once and validated."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from crawler.frontier.backlog_settings import BacklogSettings
from crawler.frontier.dedup import DedupConfig
from crawler.frontier.keys import braced_name
from crawler.frontier.partitions import check_partitions
from crawler.frontier.seen_feed import SeenFeedSettings
from crawler.kafka.config import security_setting
from crawler.kafka.topics import topic_from_template
from crawler.redis_url import RedisConfig, Topology
from crawler.settings_values import get_bool, get_float, get_int


def _link_check(settings: BaseSettings) -> bool | None:
    """``FRONTIER_LINK_CHECK``; unset (None): where it pays (``FrontierClient.to_look_up``),
    which is nowhere with ``FRONTIER_SEEN_FEED``: the nodes' caches drop the links the cluster
    recorded, and what they let through is mostly new."""
    if settings.get("FRONTIER_LINK_CHECK") is None:
        return False if get_bool(settings, "FRONTIER_SEEN_FEED") else None
    return get_bool(settings, "FRONTIER_LINK_CHECK")


@dataclass(frozen=True, slots=True)
class FrontierSettings:
    redis_url: str
    lease_timeout: float
    heartbeat_interval: float
    prefetch: int
    reclaim_batch: int
    idle_poll: float
    write_interval: float
    close_timeout: float
    compress: bool  # request bodies stored compressed (the codec reads both forms)
    seen_cache: int
    seen_feed: SeenFeedSettings  # its topic still holds {spider}
    link_check: bool | None  # None: where it pays (never with the seen feed on)
    partitions: int
    dedup: DedupConfig
    backlog: BacklogSettings  # its topic still holds {spider}

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> FrontierSettings:
        security = security_setting(settings)  # the backlog's and the seen feed's clients
        values = cls(
            redis_url=settings.get("REDIS_URL") or "",
            lease_timeout=get_float(settings, "FRONTIER_LEASE_TIMEOUT"),
            heartbeat_interval=get_float(settings, "FRONTIER_HEARTBEAT_INTERVAL"),
            prefetch=get_int(settings, "FRONTIER_PREFETCH"),
            reclaim_batch=get_int(settings, "FRONTIER_RECLAIM_BATCH"),
            idle_poll=get_float(settings, "FRONTIER_IDLE_POLL"),
            write_interval=get_float(settings, "FRONTIER_WRITE_INTERVAL"),
            close_timeout=get_float(settings, "FRONTIER_CLOSE_TIMEOUT"),
            compress=get_bool(settings, "FRONTIER_COMPRESS"),
            seen_cache=get_int(settings, "FRONTIER_SEEN_CACHE"),
            seen_feed=SeenFeedSettings(
                enabled=get_bool(settings, "FRONTIER_SEEN_FEED"),
                topic=settings.get("FRONTIER_SEEN_TOPIC") or "",
                bootstrap=settings.get("KAFKA_BOOTSTRAP_SERVERS") or "",
                replication=get_int(settings, "KAFKA_TOPIC_REPLICATION"),
                security=security,
            ),
            link_check=_link_check(settings),
            partitions=get_int(settings, "FRONTIER_PARTITIONS"),
            backlog=BacklogSettings(
                queue_max=get_int(settings, "FRONTIER_QUEUE_MAX"),
                batch=get_int(settings, "FRONTIER_SPILL_BATCH"),
                interval=get_float(settings, "FRONTIER_SPILL_INTERVAL"),
                topic=settings.get("FRONTIER_BACKLOG_TOPIC") or "",
                bootstrap=settings.get("KAFKA_BOOTSTRAP_SERVERS") or "",
                replication=get_int(settings, "KAFKA_TOPIC_REPLICATION"),
                compress=get_bool(settings, "FRONTIER_COMPRESS"),
                security=security,
            ),
            dedup=DedupConfig.parse(
                mode=settings.get("FRONTIER_DUPEFILTER"),
                ttl=get_int(settings, "FRONTIER_DEDUP_TTL"),
                capacity=get_int(settings, "FRONTIER_DEDUP_CAPACITY"),
                error_rate=get_float(settings, "FRONTIER_BLOOM_ERROR_RATE"),
            ),
        )
        values.validate()
        return values

    def check_spider(self, spider: str) -> None:
        """Refuse at start a spider whose name its frontier's keys cannot carry here, or whose
        backlog or seen-feed topic Kafka cannot name (Scrapy takes any spider name:
        ``shop:books``), rather than at its first spill."""
        if self.partitions > 1:
            where = f"FRONTIER_PARTITIONS={self.partitions} could not spread its parts"
        elif RedisConfig.from_url(self.redis_url).topology is Topology.CLUSTER:
            where = "on a Redis Cluster its seed key and its other keys would not share a slot"
        else:
            where = ""
        if where and (problem := braced_name(spider, where)):
            raise ValueError(problem)
        if "#" in spider:  # whatever this spider's parts: another spider may have parts
            raise ValueError(
                f"spider {spider!r} has a '#', which names the parts of a frontier split into "
                f"parts ({{<spider>#<n>}}: part n): its keys would be those of a part of "
                f"spider {spider.split('#', 1)[0]!r} with FRONTIER_PARTITIONS, the two crawls "
                "mixed and a purge of either deleting both; rename the spider"
            )
        if self.backlog.queue_max:
            topic_from_template("FRONTIER_BACKLOG_TOPIC", self.backlog.topic, spider)
        if self.seen_feed.enabled:
            topic_from_template("FRONTIER_SEEN_TOPIC", self.seen_feed.topic, spider)

    def validate(self) -> None:
        if not self.redis_url:
            raise ValueError("REDIS_URL is empty: the Redis frontier needs a Redis server")
        if self.heartbeat_interval <= 0:
            raise ValueError(f"FRONTIER_HEARTBEAT_INTERVAL={self.heartbeat_interval} must be > 0")
        if self.lease_timeout < 3 * self.heartbeat_interval:
            raise ValueError(
                f"FRONTIER_LEASE_TIMEOUT={self.lease_timeout} must be at least 3 x "
                f"FRONTIER_HEARTBEAT_INTERVAL={self.heartbeat_interval}"
            )
        for name, value in (
            ("FRONTIER_PREFETCH", self.prefetch),
            ("FRONTIER_RECLAIM_BATCH", self.reclaim_batch),
        ):
            if value < 1:
                raise ValueError(f"{name}={value} must be >= 1")
        if self.seen_cache < 0:
            raise ValueError(f"FRONTIER_SEEN_CACHE={self.seen_cache} must be >= 0")
        self.seen_feed.validate(self.seen_cache)
        if self.idle_poll <= 0:
            raise ValueError(f"FRONTIER_IDLE_POLL={self.idle_poll} must be > 0")
        if not 0 <= self.write_interval <= 1:
            raise ValueError(f"FRONTIER_WRITE_INTERVAL={self.write_interval} must be 0-1 (s)")
        check_partitions(self.partitions)
        self.backlog.validate()
        if self.close_timeout < 0:
            raise ValueError(f"FRONTIER_CLOSE_TIMEOUT={self.close_timeout} must be >= 0")
