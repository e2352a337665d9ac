"""Exit status 1 for a node that stopped because it may not crawl (a refusal), not done.

A node refused by the frontier (``FrontierRefused``: another partition count, an old layout, a
Kafka backlog it would not read, or read in another topic, items sent to other topics than its
crawl's, a scrapy-redis queue left in Redis, a frontier write that failed for good), stopped by
a topic Kafka refuses for good, by a local feed file another node writes
(``crawler.feed_storage``) or by a ``CRAWLER_SESSION_KEY`` that cannot read the stored sessions
closes its spider with a finish reason of its own; Scrapy's ``crawl`` and ``runspider`` exited 0
then, as for a finished crawl, so a supervisor (systemd, a Kubernetes Job, a shell script) took
the node for done. The project's versions of both commands exit 1 for those finish reasons, and
for a node that saw the frontier lose its data (``frontier/epoch_lost``), whatever its reason.

A setting the project refuses at start (a ``ValueError`` or ``NotConfigured`` raised by its own
code while the crawler starts) made Scrapy exit 1 with asyncio's "Task exception was never
retrieved" and a traceback, the reason on its last line; these commands log the reason alone,
as one ERROR line (errors raised elsewhere keep asyncio's report). A node forced to stop before
its spider closed (a second SIGTERM or Ctrl-C: Scrapy's unclean shutdown) exits 1 too, with an
ERROR saying what it left undone.

They also hand the crawler its spider arguments (``-a``) as ``CRAWLER_SPIDER_ARGUMENTS``: a plain
spider's ``start()`` runs once per crawl, and a node given other arguments than the node that
ran it is warned (``ClusterStartMiddleware``). A crawler whose ``ADDONS`` lost ``ClusterAddon`` is
not started (``crawler.addon_check``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from scrapy import Spider, signals
from scrapy.commands import BaseRunSpiderCommand
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

from crawler import feed_storage
from crawler.addon_check import (
    NotStarted,
    reactor_problem,
    reactorless_problem,
    require_cluster_addon,
)
from crawler.frontier.dedup_claim import DedupChanged, FingerprinterChanged
from crawler.frontier.layout import OldLayout
from crawler.frontier.node_run import NodeIdInUse
from crawler.frontier.partitions import PartitionsChanged
from crawler.frontier.refusal import (
    BacklogTopicChanged,
    BacklogUnread,
    FrontierRefused,
    ItemTopicsChanged,
    ScrapyRedisQueueLeft,
    WriteFailed,
)
from crawler.kafka.topics import TopicRefused
from crawler.middlewares import session_supply

REFUSED_FINISH_REASONS = frozenset(
    (
        *(
            refusal.finish_reason
            for refusal in (
                FrontierRefused,
                PartitionsChanged,
                DedupChanged,
                FingerprinterChanged,
                OldLayout,
                BacklogUnread,
                BacklogTopicChanged,
                ItemTopicsChanged,
                ScrapyRedisQueueLeft,
                WriteFailed,
                NodeIdInUse,
                TopicRefused,
            )
        ),
        feed_storage.FINISH_REASON,  # a local feed file another node writes
        session_supply.KEY_FINISH_REASON,  # CRAWLER_SESSION_KEY cannot read the sessions
    )
)


logger = logging.getLogger(__name__)

DATA_LOST_STAT = "frontier/epoch_lost"  # the node saw Redis lose the frontier's data


def raised_by_the_project(exc: BaseException) -> bool:
    """Whether ``exc`` is a refusal the project's own code raised (its innermost frame is in
    the ``crawler`` package)."""
    if not isinstance(exc, (ValueError, NotConfigured)) or exc.__traceback__ is None:
        return False
    frame = exc.__traceback__
    while frame.tb_next is not None:
        frame = frame.tb_next
    return str(frame.tb_frame.f_globals.get("__name__", "")).startswith("crawler.")


def report_refusals(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's exception handler: a refusal at start as one line, else as asyncio
    reports it."""
    exc = context.get("exception")
    if exc is not None and raised_by_the_project(exc):
        logger.error("Not started: %s", exc)
    else:
        loop.default_exception_handler(context)


class ExitOnRefusal(BaseRunSpiderCommand):
    """A crawl command whose exit status is 1 when its spider closed refused, or after the
    frontier lost its data."""

    refused = False
    spider_arguments: dict[str, str] | None = None
    open_spiders = 0  # opened and not closed: a second signal's unclean shutdown leaves one

    def _create_crawler(self, spidercls: type[Spider] | str) -> Crawler:
        crawler = super()._create_crawler(spidercls)
        require_cluster_addon(crawler.settings)
        if problem := reactorless_problem(crawler.settings) or reactor_problem(crawler.settings):
            raise NotStarted(problem)
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        if self.spider_arguments is not None:
            crawler.settings.set(
                "CRAWLER_SPIDER_ARGUMENTS", dict(self.spider_arguments), priority="cmdline"
            )
        return crawler

    def _spider_opened(self) -> None:
        self.open_spiders += 1

    def _spider_closed(self, spider: Spider, reason: str, **kwargs: Any) -> None:
        # a spider whose opening failed (a pipeline's open_spider raised) is closed unopened
        self.open_spiders = max(0, self.open_spiders - 1)
        self.refused = self.refused or reason in REFUSED_FINISH_REASONS
        stats = spider.crawler.stats
        if lost := int((stats.get_value(DATA_LOST_STAT) if stats else 0) or 0):
            logger.error(
                "The crawl ended after the frontier lost its data %d time(s) (%s): requests "
                "that were only queued then were never crawled; exit status 1 (crawler status "
                "shows the incidents)",
                lost,
                DATA_LOST_STAT,
            )
            self.refused = True

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        asyncio.get_event_loop().set_exception_handler(report_refusals)
        self.spider_arguments = opts.spargs
        try:
            super().run(args, opts)  # type: ignore[safe-super]  # a mixin: before crawl or runspider
        except NotStarted as missing:
            logger.error("Not started: %s", missing)
            self.exitcode = 1
            return
        if self.open_spiders > 0:
            logger.error(
                "The node stopped before its spider closed (a second SIGTERM or Ctrl-C forces "
                "Scrapy's unclean shutdown): in cluster mode it made no final ledger push, and "
                "its leases go back to the queue only once they expire (FRONTIER_LEASE_TIMEOUT); "
                "exit status 1"
            )
            self.refused = True
        if self.refused:
            self.exitcode = 1
