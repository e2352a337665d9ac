"""Purging a spider's shared state: what there is, the question, the deletion.

``scrapy purge`` (``crawler.commands.purge``) and ``crawler purge`` (``crawler.cli.purge``)
are two front ends of one ``PurgePlan``: they differ only in how they read settings, print
and exit. Nodes never purge. A purge refuses while the spider has live nodes unless forced,
and then writes a ``purged:`` epoch: the running nodes drop what they hold and their
seen-caches at their next heartbeat (``crawler.frontier.epoch``), and the purge waits until
each has (``crawler.frontier.reset``). The Kafka backlog topic goes too: left, its requests
would flow into the next crawl.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scrapy.settings import BaseSettings, Settings

from crawler.cookies.jar_store import jars_pattern
from crawler.extensions.ledger_layout import pattern_for_spider
from crawler.frontier.backlog_topic import backlog_topic, purge_backlog
from crawler.frontier.epoch import PURGED_EPOCH
from crawler.frontier.keys import (
    FrontierKeys,
    fence_pattern,
    node_epoch_pattern,
    queue_pattern,
    start_pattern,
)
from crawler.frontier.partitions import spider_parts
from crawler.frontier.refusal import topics
from crawler.frontier.reset import (
    Acknowledged,
    live_nodes,
    new_epoch,
    reset_note,
    reset_wait,
    wait_for_nodes,
    write_epoch,
)
from crawler.frontier.seed_holds import SeedKeys
from crawler.kafka.config import security_setting
from crawler.lua import text
from crawler.redis_connection import SyncRedis
from crawler.settings_values import get_float, get_int


@dataclass(frozen=True)
class PurgeSettings:
    """The settings a purge reads (FRONTIER_QUEUE_MAX, KAFKA_BOOTSTRAP_SERVERS,
    FRONTIER_BACKLOG_TOPIC, FRONTIER_HEARTBEAT_INTERVAL)."""

    queue_max: int
    bootstrap: str
    backlog_template: str
    heartbeat_interval: float
    security: Mapping[str, Any] = field(default_factory=dict)  # of KAFKA_PRODUCER_CONFIG

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> PurgeSettings:
        """From Scrapy's settings or the ``crawler`` CLI's (values may be ``-s`` text); a
        value that is no number raises ``ValueError`` naming the setting."""
        values = settings if isinstance(settings, BaseSettings) else Settings(settings)
        return cls(
            queue_max=get_int(values, "FRONTIER_QUEUE_MAX"),
            bootstrap=str(settings["KAFKA_BOOTSTRAP_SERVERS"] or ""),
            backlog_template=str(settings["FRONTIER_BACKLOG_TOPIC"]),
            heartbeat_interval=get_float(values, "FRONTIER_HEARTBEAT_INTERVAL"),
            security=security_setting(settings),
        )


def spider_keys(seeds: SeedKeys, *, keep_seeds: bool) -> list[str]:
    """The spider's fixed keys: every part's (``seeds.frontier``), its invalid seeds, and its
    seeds unless ``keep_seeds``."""
    keys = [key for part in seeds.frontier for key in part.all()] + [seeds.invalid]
    if not keep_seeds:
        keys.append(seeds.seeds)
    return keys


def present_keys(
    client: SyncRedis, spider: str, *, keep_seeds: bool, seeds: SeedKeys | None = None
) -> list[str]:
    """The spider's keys that exist: the frontier's (every part), its seeds (``seeds``: the
    keys its nodes read, by default ``<spider>:start_urls`` and the parts Redis records), the
    start-request claims of every crawl, the crawl ledgers and the shared cookie jars."""
    if seeds is None:
        parts = spider_parts(client, spider)
        seeds = SeedKeys(f"{spider}:start_urls", f"{spider}:start_urls:invalid", parts)
    keys = spider_keys(seeds, keep_seeds=keep_seeds)
    present = [key for key in keys if client.exists(key)]
    listed = set(present)
    patterns = [start_pattern(spider), pattern_for_spider(spider), jars_pattern(spider)]
    for part in seeds.frontier:
        patterns += [queue_pattern(part), fence_pattern(part), node_epoch_pattern(part)]
    if not keep_seeds:  # the nodes' holds of taken seeds
        patterns.append(seeds.holds_pattern)
    for pattern in patterns:
        found = {text(key) for key in client.scan_iter(match=pattern)} - listed
        present += sorted(found)
    return present


@dataclass(frozen=True)
class PurgeResult:
    """What a purge did."""

    spider: str
    keys: list[str]  # found before the deletion
    deleted: int
    acknowledged: Acknowledged | None  # the live nodes' resets, when there were live nodes
    backlog: str  # the backlog topic's note ('; deleted ...'), '' without one

    def summary(self) -> str:
        if not self.keys:
            done = f"Nothing to purge for {self.spider!r} in Redis"
        else:
            done = f"Purged {self.deleted} keys of {self.spider!r}: {', '.join(self.keys)}"
            done += reset_note(self.acknowledged)
        return done + self.backlog

    def as_json(self) -> dict[str, object]:
        reset = self.acknowledged
        return {
            "spider": self.spider,
            "deleted": self.deleted,
            "keys": self.keys,
            "reset": None if reset is None else {"nodes": reset.nodes, "late": reset.late},
            "backlog": self.backlog.removeprefix("; "),
        }


@dataclass(frozen=True)
class PurgePlan:
    """What purging ``spider`` would delete, found before asking (nothing is looked up but
    the live nodes when they refuse the purge)."""

    spider: str
    parts: tuple[FrontierKeys, ...]  # the spider's frontier parts
    live: list[str]  # the spider's live nodes
    forced: bool  # --force: purge even with live nodes
    present: list[str]  # its keys in Redis
    # its backlog topics: the one the crawl recorded, those it spilled to, the settings' one
    topics: tuple[str, ...]
    settings: PurgeSettings
    # the crawl spilled to this topic, and the purge has no KAFKA_BOOTSTRAP_SERVERS to delete it
    undeletable: str = ""

    @classmethod
    def survey(
        cls,
        client: SyncRedis,
        spider: str,
        settings: PurgeSettings,
        *,
        seed_keys: tuple[str, str],
        keep_seeds: bool,
        force: bool,
    ) -> PurgePlan:
        """``seed_keys``: the spider's seed key and invalid-seed key, as its nodes resolve
        them (``crawler.frontier.seed_settings.seed_key_names``)."""
        parts = spider_parts(client, spider)
        live = live_nodes(client, parts)
        if live and not force:
            return cls(spider, parts, live, force, [], (), settings)
        seeds = SeedKeys(*seed_keys, parts)
        present = present_keys(client, spider, keep_seeds=keep_seeds, seeds=seeds)
        # the nodes spilled (their backlog counters are here) though the purge was not told
        # FRONTIER_QUEUE_MAX: the topic goes too
        spilled = any(keys.backlog in present for keys in parts)
        named = backlog_topic(
            settings.queue_max > 0 or spilled, settings.bootstrap, settings.backlog_template, spider
        )
        # the topic the nodes spilled to (their -s FRONTIER_BACKLOG_TOPIC, which the purge is
        # not given), recorded by the first of them
        recorded = text(client.get(parts[0].backlog_topic) or b"")
        # and every topic a part's offsets name (nodes given different topics spilled to each)
        spilled_to = [text(topic) for keys in parts for topic in client.hkeys(keys.backlog_written)]
        if not settings.bootstrap and (recorded or spilled):
            found = dict.fromkeys(topic for topic in (recorded, *spilled_to) if topic)
            topic = " and ".join(found) or settings.backlog_template.replace("{spider}", spider)
            return cls(spider, parts, live, force, present, (), settings, undeletable=topic)
        topics = tuple(dict.fromkeys(topic for topic in (recorded, *spilled_to, named) if topic))
        return cls(spider, parts, live, force, present, topics, settings)

    @property
    def refusal(self) -> str | None:
        """Why purging now is refused (live nodes, without ``--force``; a backlog topic it
        cannot delete), or None."""
        if self.undeletable:
            return (
                f"the crawl of {self.spider!r} spilled requests to the Kafka backlog "
                f"{topics(self.undeletable)}, which this purge cannot delete: "
                "KAFKA_BOOTSTRAP_SERVERS is "
                "empty here. Give it (the nodes' value): left, those requests come back into the "
                "next crawl"
            )
        if not self.live or self.forced:
            return None
        return (
            f"{len(self.live)} nodes of {self.spider!r} are live ({', '.join(sorted(self.live))}):"
            " stop them first, or pass --force (they then drop what they hold and their"
            " seen-caches, and the purge waits until they have)"
        )

    @property
    def question(self) -> str | None:
        """What the operator is asked before the deletion; None: nothing to delete."""
        doomed = [", ".join(self.present)] if self.present else []
        if self.topics:
            named = " and ".join(self.topics)
            if len(self.topics) == 1:
                doomed.append(f"the Kafka backlog topic {named} (if it exists)")
            else:
                doomed.append(f"the Kafka backlog topics {named} (if they exist)")
        if not doomed:
            return None
        return f"Delete {' and '.join(doomed)}? Type the spider name to confirm: "

    def confirmed(self, *, yes: bool, ask: Callable[[str], str]) -> bool:
        """Whether to go on: nothing to ask, ``--yes``, or the spider's name typed; ``ask``
        gives the answer to a question ("" when there is none: ``crawler.cli.prompt``)."""
        question = self.question
        return question is None or yes or ask(question).strip() == self.spider

    def carry_out(self, client: SyncRedis) -> PurgeResult:
        """Delete the keys and the backlog topic. With live nodes, write a ``purged:`` epoch
        and wait until each has reset: they do instead of taking the purge for lost data, and
        a seed pushed next meets nodes that forgot."""
        deleted, acknowledged = 0, None
        if self.present:
            deleted = sum(int(client.unlink(key)) for key in self.present)  # freed aside
            if self.live:
                parts = self.parts  # the live nodes go on with them: the count is written back
                client.set(parts[0].partitions, len(parts))
                epoch = new_epoch(PURGED_EPOCH)
                write_epoch(client, parts, epoch)
                wait = reset_wait(self.settings.heartbeat_interval)
                acknowledged = wait_for_nodes(client, parts, epoch, self.live, wait)
        backlog = "".join(
            purge_backlog(self.settings.bootstrap, topic, security=self.settings.security)
            for topic in self.topics
        )
        return PurgeResult(self.spider, self.present, deleted, acknowledged, backlog)
