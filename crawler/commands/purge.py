"""``scrapy purge <spider> [--yes] [--keep-seeds]``: delete a spider's shared state in Redis.

The only thing that deletes the shared frontier: nodes never do. Asks for
confirmation unless ``--yes`` is given; refuses while the spider has live nodes unless
``--force`` is given, and then writes a ``purged:`` epoch: the running nodes drop what
they hold and their seen-caches at their next heartbeat (``crawler.frontier.epoch``),
and the purge waits until each has (``crawler.frontier.reset``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.extensions.ledger_layout import pattern_for_spider
from crawler.frontier.backlog import backlog_topic, purge_backlog
from crawler.frontier.epoch import PURGED_EPOCH
from crawler.frontier.keys import (
    fence_pattern,
    frontier_parts,
    node_epoch_pattern,
    queue_pattern,
    start_pattern,
)
from crawler.frontier.partitions import spider_parts
from crawler.frontier.reset import (
    Acknowledged,
    live_nodes,
    new_epoch,
    reset_note,
    reset_wait,
    wait_for_nodes,
    write_epoch,
)
from crawler.frontier.seed_queue import SeedKeys
from crawler.lua import text
from crawler.redis_connection import SyncRedis, sync_client
from crawler.redis_url import RedisConfig


def spider_keys(spider: str, *, keep_seeds: bool, partitions: int = 1) -> list[str]:
    parts = frontier_parts(spider, partitions)
    keys = [key for part in parts for key in part.all()] + [f"{spider}:start_urls:invalid"]
    if not keep_seeds:
        keys.append(f"{spider}:start_urls")
    return keys


def present_keys(client: SyncRedis, spider: str, *, keep_seeds: bool) -> list[str]:
    """The spider's keys that exist: the frontier's (every part), its seeds, the
    start-request claims of every crawl and the crawl ledgers."""
    parts = spider_parts(client, spider)
    keys = spider_keys(spider, keep_seeds=keep_seeds, partitions=len(parts))
    present = [key for key in keys if client.exists(key)]
    listed = set(present)
    patterns = [start_pattern(spider), pattern_for_spider(spider)]
    for part in parts:
        patterns += [queue_pattern(part), fence_pattern(part), node_epoch_pattern(part)]
    if not keep_seeds:  # the nodes' holds of taken seeds
        patterns.append(SeedKeys(f"{spider}:start_urls", "", parts).holds_pattern)
    for pattern in patterns:
        found = {text(key) for key in client.scan_iter(match=pattern)} - listed
        present += sorted(found)
    return present


def refusal(live: list[str], spider: str, *, force: bool) -> str | None:
    """Why purging ``spider`` now is refused (``live`` nodes, without ``--force``), or None."""
    if not live or force:
        return None
    return (
        f"{len(live)} nodes of {spider!r} are live ({', '.join(sorted(live))}): stop them "
        "first, or pass --force (they then drop what they hold and their seen-caches, and the "
        "purge waits until they have)"
    )


def confirmation(present: list[str], topic: str | None) -> str | None:
    """The question a purge asks before it deletes the ``present`` keys and the backlog
    ``topic`` (left, its requests would flow into the next crawl); None: nothing to delete."""
    doomed = [", ".join(present)] if present else []
    if topic:
        doomed.append(f"the Kafka backlog topic {topic} (if it exists)")
    if not doomed:
        return None
    return f"Delete {' and '.join(doomed)}? Type the spider name to confirm: "


def outcome(
    spider: str, present: list[str], deleted: int, acknowledged: Acknowledged | None
) -> str:
    """What a purge did in Redis, for the operator (the backlog's note follows)."""
    if not present:
        return f"Nothing to purge for {spider!r} in Redis"
    return f"Purged {deleted} keys of {spider!r}: {', '.join(present)}" + reset_note(acknowledged)


def purge(
    client: SyncRedis, spider: str, present: list[str], *, live: list[str], wait: float
) -> tuple[int, Acknowledged | None]:
    """Delete ``present``. With ``live`` nodes, write a ``purged:`` epoch and wait up to
    ``wait`` seconds until each has reset (``crawler.frontier.reset``): they do instead of
    taking the purge for lost data, and a seed pushed next meets nodes that forgot."""
    parts = spider_parts(client, spider)
    deleted = sum(int(client.delete(key)) for key in present)
    if not live:
        return deleted, None
    client.set(parts[0].partitions, len(parts))  # the live nodes go on with their parts
    epoch = new_epoch(PURGED_EPOCH)
    write_epoch(client, parts, epoch)
    return deleted, wait_for_nodes(client, parts, epoch, live, wait)


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
        parser.add_argument("--keep-seeds", action="store_true", help="keep <spider>:start_urls")
        parser.add_argument("--force", action="store_true", help="purge even with live nodes")

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
            live = live_nodes(client, spider_parts(client, args[0]))
            if (why := refusal(live, args[0], force=opts.force)) is not None:
                print(f"Not purged: {why}", file=sys.stderr)
                self.exitcode = 1
                return
            present = present_keys(client, args[0], keep_seeds=opts.keep_seeds)
            bootstrap = self.settings.get("KAFKA_BOOTSTRAP_SERVERS") or ""
            topic = backlog_topic(
                self.settings.getint("FRONTIER_QUEUE_MAX"),
                bootstrap,
                str(self.settings.get("FRONTIER_BACKLOG_TOPIC")),
                args[0],
            )
            if (question := confirmation(present, topic)) is None:
                print(f"Nothing to purge for {args[0]!r} on {redis.display}")
                return
            if not opts.yes and input(question).strip() != args[0]:
                print("Not purged.")
                self.exitcode = 1
                return
            deleted, acknowledged = 0, None
            if present:
                wait = reset_wait(self.settings.getfloat("FRONTIER_HEARTBEAT_INTERVAL"))
                deleted, acknowledged = purge(client, args[0], present, live=live, wait=wait)
            backlog = purge_backlog(bootstrap, topic) if topic else ""
            print(outcome(args[0], present, deleted, acknowledged) + backlog)
        finally:
            client.close()
        sys.stdout.flush()
