"""Scrapy add-on that picks cluster or standalone mode from the settings.

Cluster mode (``REDIS_URL`` set): ``LeasingScheduler`` shares one Redis
frontier between nodes. Standalone mode: Scrapy's own scheduler.
Without ``KAFKA_BOOTSTRAP_SERVERS`` items go to a JSON Lines feed instead.
Values are set at ``addon`` priority, so project, spider and command-line
settings still win.
"""

from __future__ import annotations

from scrapy.settings import BaseSettings

LEASING_SCHEDULER = "crawler.frontier.scheduler.LeasingScheduler"


class ClusterAddon:
    def update_settings(self, settings: BaseSettings) -> None:
        if settings.get("REDIS_URL"):
            settings.set("SCHEDULER", LEASING_SCHEDULER, priority="addon")
        if not settings.get("KAFKA_BOOTSTRAP_SERVERS") and not settings.getdict("FEEDS"):
            feed = settings.get("CRAWLER_STANDALONE_FEED")
            if feed:
                settings.set(
                    "FEEDS",
                    {feed: {"format": "jsonlines", "encoding": "utf-8"}},
                    priority="addon",
                )
