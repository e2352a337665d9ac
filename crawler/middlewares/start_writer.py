"""What a node that finds its crawl's start requests written already says: when its own spider
would have written others, and when the crawl has nothing left.

start() runs once per crawl (``crawler.frontier.start_claim``): the node that claims the writing
records its spider arguments (``-a``) and what its ``start_urls`` are. A later node, or a later
run, whose spider was given other arguments or has other ``start_urls`` (a new version of the
spider) does not run start() again, so what only it would crawl is not crawled: it says so, with
what to do, instead of an INFO line only.
"""

from __future__ import annotations

import logging

import orjson
from scrapy import Spider
from scrapy.settings import BaseSettings

from crawler.frontier.start_claim import StartClaim, start_urls_digest
from crawler.redis_outage import OutageGuard

logger = logging.getLogger(__name__)

ANOTHER_CRAWL_ID = (
    "another CRAWLER_CRAWL_ID runs start() again but keeps what the dedup has seen (only new "
    "URLs are crawled)"
)
WHAT_TO_DO = (
    "give the crawl another CRAWLER_CRAWL_ID (what the dedup has seen is kept), or run "
    "`crawler purge {spider}` first"
)


class StartWriter:
    """This node's spider as a start-request claim records it."""

    def __init__(self, settings: BaseSettings, spider: Spider) -> None:
        self.spider = spider.name
        # '' when not known, as when the crawl is not started by scrapy crawl or runspider
        given = settings.get("CRAWLER_SPIDER_ARGUMENTS")
        self.arguments = (
            ""
            if given is None
            else orjson.dumps(
                settings.getdict("CRAWLER_SPIDER_ARGUMENTS"), option=orjson.OPT_SORT_KEYS
            ).decode()
        )
        self.start_urls = start_urls_digest(getattr(spider, "start_urls", None))

    async def compare(self, claim: StartClaim, guard: OutageGuard, crawl_id: str) -> None:
        """Warn when the node that ran start() was given other spider arguments, or had other
        start_urls, than this one."""
        todo = WHAT_TO_DO.format(spider=self.spider)
        theirs = await guard.run(claim.arguments, reads_only=True)
        if self.arguments and theirs is not None and theirs != self.arguments:
            logger.warning(
                "The start requests of crawl %r were written by a node whose spider arguments "
                "were %r; this node's are %r: start() is not run again with them. To crawl "
                "with these, %s",
                crawl_id,
                orjson.loads(theirs),
                orjson.loads(self.arguments),
                todo,
            )
        theirs = await guard.run(claim.start_urls, reads_only=True)
        if self.start_urls and theirs is not None and theirs != self.start_urls:
            logger.warning(
                "The start requests of crawl %r were written by a node whose spider had other "
                "start_urls (%s URLs) than this node's (%s): start() is not run again, so URLs "
                "only this version has are not crawled. To crawl them, %s",
                crawl_id,
                theirs.split(" ", 1)[0],
                self.start_urls.split(" ", 1)[0],
                todo,
            )


def say_nothing_left(crawl_id: str, spider: str, writer: str | None) -> None:
    """A node that finds its crawl's start requests written and nothing queued or leased crawls
    nothing: at INFO while ``writer``, the other node that wrote them, runs (the crawl ended as
    this node started, as a small crawl can), else a warning (``scrapy crawl`` run again after
    the crawl finished, as plain Scrapy users do)."""
    if writer is not None:
        logger.info(
            "Crawl %r is done (nothing queued or leased; %s, the node that wrote its start "
            "requests, runs now): this node has nothing to crawl. To crawl the site again, stop "
            "the nodes and run `crawler purge %s`; %s",
            crawl_id,
            writer,
            spider,
            ANOTHER_CRAWL_ID,
        )
        return
    logger.warning(
        "Crawl %r has nothing left (nothing queued or leased): its start requests were "
        "written by another node or an earlier run, and start() is not run again, so this "
        "run crawls nothing. To crawl the site again run `crawler purge %s` first; %s",
        crawl_id,
        spider,
        ANOTHER_CRAWL_ID,
    )
