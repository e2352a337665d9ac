"""``scrapy purge <spider> [--yes] [--keep-seeds] [--force]``: delete a spider's shared state.

The Scrapy front end of ``crawler.frontier.purge.PurgePlan``: asks for confirmation unless
``--yes`` is given; refuses while the spider has live nodes unless ``--force`` is given. A Redis
URL the server cannot serve (``crawler.redis_checks``) or a Redis that fails ends it in one line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, ClassVar

from scrapy import Spider
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.settings import BaseSettings

from crawler.cli.prompt import answer
from crawler.cli.spiders import settings_as_nodes_read_them
from crawler.frontier.purge import PurgePlan, PurgeSettings
from crawler.frontier.seed_settings import seed_key_names
from crawler.redis_checks import topology_problem
from crawler.redis_connection import SyncRedis, sync_client
from crawler.redis_outage import REDIS_FAILURES
from crawler.redis_url import RedisConfig


class Command(ScrapyCommand):
    requires_project = True
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "<spider> [--yes] [--keep-seeds] [--force]"

    def short_desc(self) -> str:
        return "Delete a spider's shared queue, leases, dedup set and seeds in Redis"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
        parser.add_argument("--keep-seeds", action="store_true", help="keep the seed key")
        parser.add_argument("--force", action="store_true", help="purge even with live nodes")

    def _node_settings(self, name: str) -> tuple[BaseSettings, type[Spider] | None]:
        """The settings as the spider's nodes read them (its ``custom_settings`` applied: its
        own ``FRONTIER_BACKLOG_TOPIC``, seed key...), and its class (None: not in this
        project, while its state may still be in Redis)."""
        assert self.settings is not None
        assert self.crawler_process is not None
        try:
            spider_class = self.crawler_process.spider_loader.load(name)
        except KeyError:
            spider_class = None
        return settings_as_nodes_read_them(self.settings, spider_class), spider_class

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give exactly one spider name")
        assert self.settings is not None
        url = self.settings.get("REDIS_URL")
        if not url:
            raise UsageError("REDIS_URL is empty: there is no shared state to purge")
        node_settings, spider_class = self._node_settings(args[0])
        try:
            settings = PurgeSettings.from_settings(node_settings)
        except ValueError as exc:  # a setting refused, named in the message
            raise UsageError(str(exc)) from exc
        # where its nodes read seeds: its redis_key or SEEDS_KEY, and SEEDS_INVALID_KEY
        seed_keys = seed_key_names(node_settings, spider_class or args[0])
        config = RedisConfig.from_url(url)
        if problem := topology_problem(config):
            self._fail(problem)
            return
        client = sync_client(config)
        try:
            self._purge(client, args[0], settings, seed_keys, opts)
        except REDIS_FAILURES as exc:
            self._fail(f"Redis at {config.display} failed: {type(exc).__name__}: {exc}")
        finally:
            client.close()
        sys.stdout.flush()

    def _fail(self, why: str) -> None:
        print(f"Not purged: {why}", file=sys.stderr)
        self.exitcode = 1

    def _purge(
        self,
        client: SyncRedis,
        spider: str,
        settings: PurgeSettings,
        seed_keys: tuple[str, str],
        opts: argparse.Namespace,
    ) -> None:
        plan = PurgePlan.survey(
            client,
            spider,
            settings,
            seed_keys=seed_keys,
            keep_seeds=opts.keep_seeds,
            force=opts.force,
        )
        if (why := plan.refusal) is not None:
            self._fail(why)
            return
        if not plan.confirmed(yes=opts.yes, ask=answer):
            print("Not purged.")
            self.exitcode = 1
            return
        print(plan.carry_out(client).summary())
