"""Exit status 1 for a node that stopped because it may not crawl (a refusal), not done.

A node refused by the frontier (``FrontierRefused``: another partition count, an old layout,
a Kafka backlog it would not read) or stopped by a topic Kafka refuses for good closes its
spider with a finish reason of its own; Scrapy's ``crawl`` and ``runspider`` exited 0 then,
as for a finished crawl, so a supervisor (systemd, a Kubernetes Job, a shell script) took the
node for done. The project's versions of both commands exit 1 for those finish reasons.
"""

from __future__ import annotations

import argparse
from typing import Any

from scrapy import Spider, signals
from scrapy.commands import BaseRunSpiderCommand
from scrapy.crawler import Crawler

from crawler.frontier.layout import OldLayout
from crawler.frontier.partitions import PartitionsChanged
from crawler.frontier.refusal import BacklogUnread, FrontierRefused
from crawler.kafka.topics import TopicRefused

REFUSED_FINISH_REASONS = frozenset(
    refusal.finish_reason
    for refusal in (FrontierRefused, PartitionsChanged, OldLayout, BacklogUnread, TopicRefused)
)


class ExitOnRefusal(BaseRunSpiderCommand):
    """A crawl command whose exit status is 1 when its spider closed refused."""

    refused = False

    def _create_crawler(self, spidercls: type[Spider] | str) -> Crawler:
        crawler = super()._create_crawler(spidercls)
        crawler.signals.connect(self._spider_closed, signal=signals.spider_closed)
        return crawler

    def _spider_closed(self, spider: Spider, reason: str, **kwargs: Any) -> None:
        self.refused = self.refused or reason in REFUSED_FINISH_REASONS

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        super().run(args, opts)  # type: ignore[safe-super]  # a mixin: before crawl or runspider
        if self.refused:
            self.exitcode = 1
