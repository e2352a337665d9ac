"""``crawler status [spider ...]``: progress, queue, nodes, rates, failures, sessions and
dead letters per spider.

Redis must answer; Kafka need not: its dead letters are then ``unknown``.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal, TypedDict

import orjson

from crawler.cli.completeness import completeness_lines
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
from crawler.frontier.admin import LedgerView, NodeInfo, Snapshot, discover_spiders
from crawler.frontier.layout import old_layout_keys
from crawler.kafka.dead_letters import DeadLetterError, DeadLetterQueues, dead_letter_topics
from crawler.redis_connection import SyncRedis
from crawler.sessions.census import SessionCensus, count_sessions
from crawler.sessions.keys import SessionKeys

RATE_MINUTES = 5  # rates are averaged over this many of the last minutes


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
    # stalled: work left, no live node; old_layout: requests stored by an older version, which
    # nodes refuse until `crawler migrate`
    state: Literal["running", "stalled", "finished", "old_layout"]


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
        "--kafka-timeout", type=float, default=5.0, help="seconds Kafka may take to answer"
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
    remaining = snapshot["queued"] + snapshot["leased"]
    # Seeds waiting or held by a node (a killed one's too, until a node or requeue returns
    # them) are work left: their requests are not in the frontier yet.
    seeds = snapshot["seeds_waiting"] + snapshot["seeds_held"]
    live = any(node["live"] for node in snapshot["nodes"])
    # Rates over the minutes nodes were fetching in (idle minutes would dilute them), and 0
    # with no live node: nothing is happening, whatever the last minutes did.
    window = ledger["active_seconds"] if live else 0.0
    finished_per_minute = per_minute(recent.get("done", 0) + recent.get("failed", 0), window)
    enqueued_per_minute = per_minute(recent.get("enqueued", 0), window)
    state: Literal["running", "stalled", "finished", "old_layout"] = "running"
    eta = None
    if old_layout_keys(client, admin.parts):
        state = "old_layout"
    elif remaining == 0 and seeds == 0:
        state, eta = "finished", 0.0
    elif not live:
        state = "stalled"
    elif remaining > 0 and finished_per_minute > 0:
        eta = round(remaining * 60 / finished_per_minute, 1)
    return FrontierStatus(
        snapshot=snapshot,
        ledger=ledger,
        finished=finished,
        progress=finished / (finished + remaining) if finished + remaining else None,
        pages_per_minute=per_minute(recent.get("pages", 0), window),
        delivered_per_minute=per_minute(recent.get("items/delivered", 0), window),
        finished_per_minute=finished_per_minute,
        enqueued_per_minute=enqueued_per_minute,
        eta_seconds=eta,
        eta_lower_bound=eta is not None and eta > 0 and enqueued_per_minute > 0,
        state=state,
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


def dedup_detail(snap: Snapshot) -> str:
    """`` (bloom, 1.9 MB, 45% of its slice, est. FP 0.0061%)``, per dedup mode in use."""
    parts = []
    for mode in snap["dedup_modes"]:
        size = mode["bytes"]
        text = f"{mode['mode']}, " + (
            f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.1f} kB"
        )
        if mode["fill"] is not None:
            text += f", {mode['fill']:.0%} of its slice, est. FP {mode['fp_rate'] * 100:.2g}%"
        parts.append(text)
    return f" ({'; '.join(parts)})" if parts else ""


def progress_bar(fraction: float | None, width: int = 30) -> str:
    filled = round((fraction or 0.0) * width)
    percent = "   -  " if fraction is None else f"{fraction * 100:5.1f}%"
    return f"[{'#' * filled}{'.' * (width - filled)}] {percent}"


def format_eta(seconds: float | None, lower_bound: bool = False) -> str:
    if seconds is None:
        return "ETA ?"
    if seconds == 0:
        return "finished"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"ETA {'>= ' if lower_bound else ''}{hours}:{minutes:02d}:{secs:02d}"


def eta_text(status: FrontierStatus) -> str:
    """The ETA, or why there is none; a lower bound while the crawl still finds new pages."""
    if status["state"] == "stalled":
        return "STALLED: work left, no live node"
    if status["state"] == "old_layout":
        spider = status["snapshot"]["spider"]
        return (
            "OLD LAYOUT: requests stored by an older version, which nodes refuse: stop them and "
            f"run `crawler migrate {spider}`"
        )
    text = format_eta(status["eta_seconds"], status["eta_lower_bound"])
    if status["eta_lower_bound"]:
        text += f" (still finding {status['enqueued_per_minute']} new/min)"
    return text


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in counts.items()) or "none"


def sessions_text(sessions: SessionCensus | None) -> str:
    if sessions is None:
        return "none (the spider has no session_platform)"
    resting = f" ({sessions['resting']} resting)" if sessions["resting"] else ""
    accounts = f"{sessions['accounts']} account{'' if sessions['accounts'] == 1 else 's'}"
    return f"{sessions['platform']}: {accounts}: {_counts(sessions['by_health'])}{resting}"


def dead_letters_text(dead_letters: DeadLetterStatus) -> str:
    if dead_letters["state"] == "off":
        return "- (no Kafka: give --bootstrap or set KAFKA_BOOTSTRAP_SERVERS)"
    if dead_letters["state"] == "unknown":
        return f"unknown ({dead_letters['error']})"
    return (
        f"{dead_letters['unhandled']} unhandled: {_counts(dead_letters['topics'])}"
        f" (group {dead_letters['group']})"
    )


def incident_text(incident: Mapping[str, Any]) -> str:
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(incident.get("at", 0))))
    return (
        f"{at} UTC: Redis lost the frontier's data (epoch {incident.get('epoch_before')} ->"
        f" {incident.get('epoch_after')}); {incident.get('node')} re-enqueued the"
        f" {incident.get('requeued')} requests it held; requests only queued then are lost,"
        " and the counts before it are gone"
    )


def ledger_text(ledger: LedgerView) -> str:
    short = ledger["short_runs"]
    if not short:
        return f"adds up ({ledger['runs']} node runs, none stopped without its final push)"
    return (
        f"SHORT: {len(short)} of {ledger['runs']} node runs stopped without their final push"
        f" (their last interval is missing): {', '.join(short)}"
    )


def gone(node: NodeInfo) -> bool:
    """A dead node whose leases were all reclaimed: hidden unless ``--all``."""
    return node["state"] == "gone"


def nodes_text(nodes: list[NodeInfo]) -> str:
    states = Counter("dead" if gone(node) else node["state"] for node in nodes)
    parts = [f"{states[state]} {state}" for state in ("live", "late", "dead") if states[state]]
    gone_count = sum(1 for node in nodes if gone(node))
    return (", ".join(parts) or "none") + (f" ({gone_count} gone: --all)" if gone_count else "")


def render(status: SpiderStatus, show_all: bool = False) -> str:
    snap, totals = status["snapshot"], status["ledger"]["totals"]
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(snap["server_time"]))
    live = any(node["live"] for node in snap["nodes"])
    lines = [
        f"{snap['spider']}  (crawl {status['ledger']['crawl_id']}, {at} UTC)",
        f"  progress       {progress_bar(status['progress'])}  {eta_text(status)}"
        + ("  (INCOMPLETE: frontier data lost, see incidents)" if snap["incidents"] else ""),
        f"  done/failed    {totals.get('done', 0)} done, {totals.get('failed', 0)} failed,"
        f" {totals.get('enqueued', 0)} enqueued,"
        + (f" {totals['retried']} retried (crawler failed retry)," if totals.get("retried") else "")
        + f" {totals.get('pages', 0)} pages",
        f"  queue          {snap['queued']} queued"
        + (f" ({snap['spilled']} in Kafka)" if snap["spilled"] else "")
        + f", {snap['leased']} leased"
        f" ({snap['expired']} expired), {snap['dedup']} seen{dedup_detail(snap)},"
        f" {snap['seeds_waiting']} seeds waiting"
        + (
            f", {snap['seeds_held']} seeds held ({snap['seeds_held_expired']} expired)"
            if snap["seeds_held"]
            else ""
        ),
        f"  rates          {status['pages_per_minute']} pages/min,"
        f" {status['delivered_per_minute']} items delivered/min,"
        f" {status['finished_per_minute']} finished/min"
        f" (over {status['ledger']['active_seconds'] if live else 0:.0f}s of fetching"
        f" in the last {status['ledger']['window_seconds']:.0f}s)",
        f"  nodes          {nodes_text(snap['nodes'])}",
    ]
    shown = [node for node in snap["nodes"] if show_all or not gone(node)]
    width = max((len(node["node"]) for node in shown), default=0)
    lines += [
        f"    {node['node']:<{width}}  {node['state']:<4}"
        f"  {node['leases']:>4} leases  heartbeat {node['heartbeat_ago']:.1f}s ago"
        for node in shown
    ]
    lines.append(f"  ledger         {ledger_text(status['ledger'])}")
    lines += completeness_lines(totals)
    lines += [f"  incident       {incident_text(incident)}" for incident in snap["incidents"]]
    lines += [
        f"  failures       {snap['failed']}: {_counts(snap['failed_by_reason'])}",
        f"  invalid seeds  {snap['invalid_seeds']}: {_counts(snap['invalid_by_reason'])}",
        f"  dead letters   {dead_letters_text(status['dead_letters'])}",
        f"  sessions       {sessions_text(status['sessions'])}",
        # the limiter's state is per site, shared by every spider and crawl of this Redis
        f"  politeness     {len(snap['politeness'])} site(s) (every spider's: shared per site)",
    ]
    lines += [
        f"    {site['site']}  factor {site['factor']:.2f}"
        + (f"  cooling down {site['cooldown_left']:.1f}s" if site["cooldown_left"] else "")
        for site in snap["politeness"]
    ]
    return "\n".join(lines)


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
