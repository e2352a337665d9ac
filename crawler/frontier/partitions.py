"""Which part of a partitioned frontier a request belongs to (no Scrapy imports).

A spider's frontier may be split into ``FRONTIER_PARTITIONS`` parts, each under its
own hash tag (``crawler.frontier.keys``), so a Redis Cluster spreads one spider over
its masters. A request's part follows from its site (the URL's host), with a hash
every node computes alike: a site's requests, its dedup entries and most links of
its pages stay in one part. The count a crawl started with is kept in
``{<spider>}:partitions``; a node started with another count is refused
(:class:`PartitionsChanged`): requests and fingerprints would be looked for in the
wrong parts. A purge removes it, so the next crawl may choose again.
"""

from __future__ import annotations

import zlib

from crawler.frontier.keys import FrontierKeys, frontier_parts
from crawler.frontier.refusal import CrawlSettingChanged
from crawler.lua import text
from crawler.redis_connection import AsyncRedis, SyncRedis

MAX_PARTITIONS = 1024


def part_of(site: str, count: int) -> int:
    """The part of a frontier split into ``count`` parts that holds ``site``'s requests."""
    return zlib.crc32(site.encode()) % count if count > 1 else 0


def check_partitions(count: int) -> None:
    if not 1 <= count <= MAX_PARTITIONS:
        raise ValueError(f"FRONTIER_PARTITIONS={count} must be between 1 and {MAX_PARTITIONS}")


class PartitionsChanged(CrawlSettingChanged):
    """A node's ``FRONTIER_PARTITIONS`` is not the count the spider's crawl started with."""

    stat = "partitions"
    finish_reason = "frontier_partitions_changed"

    def __init__(self, spider: str, stored: int, wanted: int) -> None:
        super().__init__(
            spider,
            f"is split into {stored} parts (FRONTIER_PARTITIONS when its crawl started)",
            f"FRONTIER_PARTITIONS={wanted}",
            f"-s FRONTIER_PARTITIONS={stored}",
        )


def stored_partitions(client: SyncRedis, spider: str) -> int:
    """The number of parts of a spider's frontier (1 for a frontier that never said)."""
    stored = client.get(FrontierKeys.for_spider(spider).partitions)
    return int(text(stored)) if stored else 1


def spider_parts(client: SyncRedis, spider: str) -> tuple[FrontierKeys, ...]:
    """The keys of every part of a spider's frontier, as its crawl stored the count."""
    return frontier_parts(spider, stored_partitions(client, spider))


async def record_once(client: AsyncRedis, key: str, value: str | int) -> str:
    """What the crawl recorded at ``key``: ``value``, unless an earlier node recorded one."""
    await client.set(key, value, nx=True)
    return text(await client.get(key)) or str(value)


async def claim_partitions(client: AsyncRedis, spider: str, count: int) -> None:
    """Record ``count`` as the spider's number of parts unless one is recorded; raise
    ``PartitionsChanged`` when another one is."""
    stored = int(await record_once(client, FrontierKeys.for_spider(spider).partitions, count))
    if stored != count:
        raise PartitionsChanged(spider, stored, count)
