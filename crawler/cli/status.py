"""``crawler status [spider ...]``: progress, queue, nodes, rates, failures, sessions and
dead letters per spider.

Redis must answer; Kafka need not: its dead letters are then ``unknown``.
"""

from __future__ import annotations

import argparse
from typing import Literal, TypedDict

import orjson

from crawler.cli import numbers
from crawler.cli.config import (
    add_kafka_option,
    add_redis_option,
    frontier_admin,
    kafka_security,
    project_settings,
    redis_client,
)
from crawler.cli.dead_letters import add_dead_letter_options, dead_letter_settings
from crawler.cli.spiders import require_spider, spider_facts
from crawler.cli.status_text import QUIET_SECONDS, render
from crawler.extensions.ledger_layout import SPOOLED_BY_PREFIX
from crawler.frontier.admin import Snapshot, discover_spiders
from crawler.frontier.layout import old_layout_keys
from crawler.frontier.ledger_view import LedgerView
from crawler.frontier.start_claim import start_key
from crawler.kafka.dead_letters import DeadLetterError, DeadLetterQueues, dead_letter_topics
from crawler.lua import text
from crawler.pipelines.pause_notice import KAFKA_AWAY, PauseInfo, read_pauses
from crawler.redis_connection import SyncRedis
from crawler.sessions.census import SessionCensus, count_sessions
from crawler.sessions.keys import SessionKeys

RATE_MINUTES = 5  # rates are averaged over this many of the last minutes
State = Literal[
    "running", "paused", "stalled", "finished", "finished_spooled", "old_layout", "not_started"
]


class DeadLetterStatus(TypedDict):
    state: Literal["known", "unknown", "off"]  # unknown: Kafka did not answer; off: no Kafka
    group: str
    unhandled: int | None  # over every dead-letter topic of the spider
    topics: dict[str, int]  # dead-letter topic -> unhandled
    error: str | None


class FrontierStatus(TypedDict):
    snapshot: Snapshot
    ledger: LedgerView
    finished: int  # done + failed in this crawl (ledger)
    progress: float | None  # finished / (finished + queued + leased)
    pages_per_minute: float
    delivered_per_minute: float
    finished_per_minute: float
    enqueued_per_minute: float  # new requests found: while above 0 the ETA is a lower bound
    eta_seconds: float | None
    eta_lower_bound: bool  # the frontier is still growing: more work than counted so far
    late_leases: int  # held by late and dead nodes: no node works them until they expire
    late_leases_back_in: float  # seconds until the last of them expires (0: expired already)
    spooled: int  # items in nodes' local Kafka spools: spooled, not replayed yet (ledger)
    spooled_nodes: list[str]  # the nodes that spooled items in this crawl (while spooled > 0)
    paused: dict[str, PauseInfo]  # live nodes whose crawl Kafka pauses -> why, since when
    kafka_away: dict[str, PauseInfo]  # live nodes Kafka does not answer, still crawling (spooling)
    # paused: work left, every live node paused; stalled: work left, no live node;
    # finished_spooled: finished, but items are still only in a spool; old_layout: requests
    # stored by an older version, which nodes refuse until `crawler migrate`
    state: State
    start_writer: str | None  # the node writing a plain spider's start requests (not done yet)
    # seeds in the seed key of a spider fed by start_urls or start() (its start requests
    # claimed): no node reads them, so they are no work left
    seeds_unread: int


class SpiderStatus(FrontierStatus):
    sessions: SessionCensus | None  # None: the spider uses no shared sessions
    dead_letters: DeadLetterStatus


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("status", help="state of the spiders' crawl")
    parser.add_argument("spiders", nargs="*", help="spiders to show (default: all found)")
    add_crawl_options(parser)
    add_dead_letter_status_options(parser)
    parser.add_argument("--json", action="store_true", help="a JSON list for scripts")
    parser.add_argument(
        "--all", action="store_true", help="also dead nodes whose leases were all reclaimed"
    )
    parser.set_defaults(run=run)


def add_crawl_options(parser: argparse.ArgumentParser) -> None:
    add_redis_option(parser)
    parser.add_argument(
        "--crawl", default=None, help="crawl id of the ledger (default: CRAWLER_CRAWL_ID)"
    )


def add_dead_letter_status_options(parser: argparse.ArgumentParser) -> None:
    add_kafka_option(parser)
    add_dead_letter_options(parser)
    parser.add_argument(
        "--topic-template",
        default=None,
        help="the nodes' KAFKA_TOPIC_TEMPLATE (default: the spider's, else the project's)",
    )
    parser.add_argument(
        "--kafka-timeout",
        type=numbers.seconds,
        default=5.0,
        help="seconds Kafka may take to answer",
    )


def per_minute(count: int, seconds: float) -> float:
    return round(count * 60 / seconds, 1) if seconds > 0 else 0.0


def frontier_status(client: SyncRedis, spider: str, crawl_id: str) -> FrontierStatus:
    """The frontier and ledger part of a spider's status."""
    admin = frontier_admin(client, spider)
    snapshot = admin.snapshot()
    ledger = admin.ledger(crawl_id, RATE_MINUTES)
    totals, recent = ledger["totals"], ledger["recent"]
    finished = totals.get("done", 0) + totals.get("failed", 0)
    # A plain spider's start requests claimed by a node and not all written: work left too
    # (until its claim expires, when its node died: then another node writes them).
    writing, writer = client.hmget(start_key(admin.parts[0], crawl_id), "state", "node")
    start_writer = text(writer) if writing == b"writing" and writer else None
    # Work left: requests queued and leased, and seeds waiting or held by a node (a killed
    # one's too, until a node or requeue returns them), whose requests are not in the frontier
    # yet; unless the spider is fed by start_urls or start() (its start requests were
    # claimed): then none reads them.
    unread = snapshot["seeds_waiting"] if writing in (b"writing", b"done") else 0
    seeds = snapshot["seeds_waiting"] - unread + snapshot["seeds_held"]
    left = snapshot["queued"] + snapshot["leased"] + seeds
    # live: beating; a late node (no heartbeat for two intervals) is likely dead, its leases
    # not yet expired: it makes no rate, and its leases hold the ETA back
    live = [node["node"] for node in snapshot["nodes"] if node["state"] == "live"]
    # their leases go back to the queue as they expire: about when their node's entry runs out
    # (both a lease timeout after its last beat), at the next heartbeat of a live node
    stranded = [node for node in snapshot["nodes"] if node["state"] != "live" and node["leases"]]
    late_leases = sum(node["leases"] for node in stranded)
    back_in = max((max(0.0, node["expires_in"]) for node in stranded), default=0.0)
    notices = read_pauses(client, spider, live)
    paused = {node: info for node, info in notices.items() if info["reason"] != KAFKA_AWAY}
    kafka_away = {node: info for node, info in notices.items() if info["reason"] == KAFKA_AWAY}
    # Rates over the minutes nodes were fetching in (idle minutes would dilute them), and 0
    # with no live node or every one paused: nothing is happening, whatever the last minutes
    # did.
    window = ledger["active_seconds"] if len(live) > len(paused) else 0.0
    finished_per_minute = per_minute(recent.get("done", 0) + recent.get("failed", 0), window)
    enqueued_per_minute = per_minute(recent.get("enqueued", 0), window)
    spooled = max(0, totals.get("items/spooled", 0) - totals.get("items/replayed", 0))
    state: State = "running"
    eta = None
    if old_layout_keys(client, admin.parts):
        state = "old_layout"
    elif left == 0 and writing is None and not live and not (finished or totals.get("enqueued", 0)):
        # nothing ever enqueued nor a start claimed: a crawl id no node ran, nodes refused
        state = "not_started"
    elif left == 0 and start_writer is None:
        state, eta = "finished_spooled" if spooled else "finished", 0.0
    elif not live:
        state = "stalled"
    elif len(paused) == len(live):
        state = "paused"
    elif left > 0 and finished_per_minute > 0 and ledger["quiet_seconds"] < QUIET_SECONDS:
        per_request = 60 / finished_per_minute  # a seed is one request at least
        eta = round(max(left * per_request, back_in + late_leases * per_request), 1)
    return FrontierStatus(
        snapshot=snapshot,
        ledger=ledger,
        finished=finished,
        progress=finished / (finished + left) if finished + left else None,
        pages_per_minute=per_minute(recent.get("pages", 0), window),
        delivered_per_minute=per_minute(recent.get("items/delivered", 0), window),
        finished_per_minute=finished_per_minute,
        enqueued_per_minute=enqueued_per_minute,
        eta_seconds=eta,
        eta_lower_bound=eta is not None and eta > 0 and enqueued_per_minute > 0,
        late_leases=late_leases,
        late_leases_back_in=round(back_in, 1),
        spooled=spooled,
        spooled_nodes=sorted(
            field.removeprefix(SPOOLED_BY_PREFIX)
            for field, count in totals.items()
            if spooled and field.startswith(SPOOLED_BY_PREFIX) and count > 0
        ),
        paused=paused,
        kafka_away=kafka_away,
        state=state,
        start_writer=start_writer,
        seeds_unread=unread,
    )


class StatusReader:
    """Reads spiders' statuses from Redis and, when configured, Kafka (kept open for ``top``)."""

    def __init__(self, client: SyncRedis, args: argparse.Namespace) -> None:
        self.redis = client
        self.settings = project_settings()
        self.crawl_id = args.crawl or str(self.settings["CRAWLER_CRAWL_ID"])
        self.topic_template: str | None = args.topic_template
        if self.topic_template is not None:
            try:
                self.topic_template.format(spider="s", item_type="t")
            except (KeyError, IndexError, ValueError, AttributeError) as exc:
                raise SystemExit(
                    f"--topic-template {self.topic_template!r} is invalid: only {{spider}} and"
                    f" {{item_type}} may be used ({exc!r})"
                ) from exc
        self.dlq_template: str | None = args.dlq_template
        self.group = dead_letter_settings(args).group  # also checks --dlq-template
        self.bootstrap = str(args.bootstrap or self.settings["KAFKA_BOOTSTRAP_SERVERS"] or "")
        self.kafka = (
            DeadLetterQueues(
                self.bootstrap, self.group, args.kafka_timeout, security=kafka_security()
            )
            if self.bootstrap
            else None
        )
        self.session_prefix = str(self.settings["SESSIONS_KEY_PREFIX"])

    def close(self) -> None:
        if self.kafka is not None:
            self.kafka.close()

    def collect_all(self, spiders: list[str]) -> list[SpiderStatus]:
        """Status of ``spiders`` (default: every spider found)."""
        names = spiders or discover_spiders(self.redis)
        partitions: dict[str, list[int]] | DeadLetterError | None = None
        if self.kafka is not None and names:
            try:
                partitions = self.kafka.partitions()
            except DeadLetterError as exc:
                partitions = exc
        return [self.collect(name, partitions) for name in names]

    def collect(
        self, spider: str, partitions: dict[str, list[int]] | DeadLetterError | None
    ) -> SpiderStatus:
        facts = spider_facts(spider, self.settings)
        sessions = (
            count_sessions(self.redis, SessionKeys(facts.session_platform, self.session_prefix))
            if facts.session_platform
            else None
        )
        topic_template = self.topic_template or facts.topic_template
        dlq_template = self.dlq_template or facts.dlq_template
        return SpiderStatus(
            **frontier_status(self.redis, spider, self.crawl_id),
            sessions=sessions,
            dead_letters=self._dead_letters(spider, topic_template, dlq_template, partitions),
        )

    def _dead_letters(
        self,
        spider: str,
        topic_template: str,
        dlq_template: str,
        partitions: dict[str, list[int]] | DeadLetterError | None,
    ) -> DeadLetterStatus:
        if self.kafka is None or partitions is None:
            return DeadLetterStatus(
                state="off", group=self.group, unhandled=None, topics={}, error=None
            )
        try:
            if isinstance(partitions, DeadLetterError):
                raise partitions
            topics = dead_letter_topics(topic_template, dlq_template, spider, list(partitions))
            counts = {dlq: self.kafka.unhandled(dlq, partitions[dlq]) for dlq in topics}
        except DeadLetterError as exc:
            return DeadLetterStatus(
                state="unknown", group=self.group, unhandled=None, topics={}, error=str(exc)
            )
        return DeadLetterStatus(
            state="known",
            group=self.group,
            unhandled=sum(counts.values()),
            topics=counts,
            error=None,
        )


def run(args: argparse.Namespace) -> int:
    settings = project_settings()
    for spider in args.spiders:
        require_spider(spider, settings)
    client = redis_client(args)
    try:
        reader = StatusReader(client, args)
        try:
            statuses = reader.collect_all(args.spiders)
        finally:
            reader.close()
    finally:
        client.close()
    if args.json:
        print(orjson.dumps(statuses, option=orjson.OPT_INDENT_2).decode())
    elif not statuses:
        print("No spider state in this Redis database.")
    else:
        print("\n\n".join(render(status, args.all) for status in statuses))
    return 0
