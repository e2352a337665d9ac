"""``scrapy purge <spider> [--yes] [--keep-seeds]``: delete a spider's shared state in Redis.

The only thing that deletes the shared frontier: nodes never do. Asks for
confirmation unless ``--yes`` is given.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.extensions.ledger_layout import pattern_for_spider
from crawler.frontier.keys import FrontierKeys, fence_pattern, start_pattern
from crawler.frontier.seed_queue import SeedKeys
from crawler.lua import text
from crawler.redis_connection import RedisConfig, SyncRedis, sync_client


def spider_keys(spider: str, *, keep_seeds: bool) -> list[str]:
    keys = [*FrontierKeys.for_spider(spider).all(), f"{spider}:start_urls:invalid"]
    if not keep_seeds:
        keys.append(f"{spider}:start_urls")
    return keys


def present_keys(client: SyncRedis, spider: str, *, keep_seeds: bool) -> list[str]:
    """The spider's keys that exist: the frontier's, its seeds, the start-request claims
    of every crawl and the crawl ledgers."""
    present = [key for key in spider_keys(spider, keep_seeds=keep_seeds) if client.exists(key)]
    patterns = [start_pattern(spider), pattern_for_spider(spider), fence_pattern(spider)]
    if not keep_seeds:  # the nodes' holds of taken seeds
        frontier = FrontierKeys.for_spider(spider)
        patterns.append(SeedKeys(f"{spider}:start_urls", "", frontier).holds_pattern)
    for pattern in patterns:
        present += sorted(text(key) for key in client.scan_iter(match=pattern))
    return present


class Command(ScrapyCommand):
    requires_project = True
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<spider> [--yes] [--keep-seeds]"

    def short_desc(self) -> str:
        return "Delete a spider's shared queue, leases, dedup set and seeds in Redis"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
        parser.add_argument("--keep-seeds", action="store_true", help="keep <spider>:start_urls")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give exactly one spider name")
        assert self.settings is not None
        url = self.settings.get("REDIS_URL")
        if not url:
            raise UsageError("REDIS_URL is empty: there is no shared state to purge")
        redis = RedisConfig.from_url(url)
        client = sync_client(redis)
        try:
            present = present_keys(client, args[0], keep_seeds=opts.keep_seeds)
            if not present:
                print(f"Nothing to purge for {args[0]!r} on {redis.display}")
                return
            if not opts.yes:
                answer = input(f"Delete {', '.join(present)}? Type the spider name to confirm: ")
                if answer.strip() != args[0]:
                    print("Not purged.")
                    self.exitcode = 1
                    return
            deleted = sum(int(client.delete(key)) for key in present)
            print(f"Purged {deleted} keys of {args[0]!r}: {', '.join(present)}")
        finally:
            client.close()
        sys.stdout.flush()
