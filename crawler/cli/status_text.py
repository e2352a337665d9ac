"""The text of ``crawler status`` (and the pieces ``crawler top`` shares): one block per spider."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from crawler.cli.completeness import completeness_lines
from crawler.frontier.admin import NodeInfo, Snapshot
from crawler.frontier.ledger_view import LedgerView
from crawler.kafka.health import outage_words
from crawler.pipelines.pause_notice import KAFKA_AWAY, PauseInfo
from crawler.sessions.census import SessionCensus

if TYPE_CHECKING:
    from crawler.cli.status import DeadLetterStatus, FrontierStatus, SpiderStatus


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


QUIET_SECONDS = 120  # live nodes fetching no page this long: the rates say nothing of now


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
        late = [
            node["heartbeat_ago"] for node in status["snapshot"]["nodes"] if node["state"] == "late"
        ]
        return "STALLED: work left, no live node" + (
            f" ({len(late)} late: no heartbeat for {min(late):.0f}s: stopped, frozen, or alive "
            "and unable to write to Redis, as at its maxmemory (-OOM): see their logs)"
            if late
            else ""
        )
    if status["state"] == "old_layout":
        spider = status["snapshot"]["spider"]
        return (
            "OLD LAYOUT: requests stored by an older version, which nodes refuse: stop them and "
            f"run `crawler migrate {spider}`"
        )
    if status["state"] == "paused":
        first = min(status["paused"].values(), key=lambda pause: pause["since"])
        return f"{pause_text(first)}: no ETA"
    if status["state"] == "not_started":
        return (
            "NOT STARTED: no request of this crawl was ever enqueued and no node runs it (another "
            "crawl id? nodes refused at start?)"
        )
    if status["state"] == "finished_spooled":
        return f"FINISHED, BUT {status['spooled']} ITEMS ONLY IN A SPOOL: see spool"
    return running_eta(status)


def running_eta(status: FrontierStatus) -> str:
    """The ETA of a crawl under way, a lower bound while it still finds new pages; none while
    its live nodes fetch nothing (the rates then say nothing of now)."""
    quiet = status["ledger"]["quiet_seconds"]
    live = sum(node["state"] == "live" for node in status["snapshot"]["nodes"])
    if status["state"] == "running" and status["eta_seconds"] is None and quiet >= QUIET_SECONDS:
        return (
            f"ETA ?: no page fetched for {quiet // 60:.0f} min by the {live} live "
            f"node{'' if live == 1 else 's'} (see crawler leases, and the sites' politeness below)"
        )
    text = format_eta(status["eta_seconds"], status["eta_lower_bound"])
    if status["eta_lower_bound"]:
        text += f" (still finding {status['enqueued_per_minute']} new/min)"
    if status["state"] == "running" and status["late_leases"]:
        back_in = status["late_leases_back_in"]
        text += f" ({status['late_leases']} leases of late or dead nodes, " + (
            f"back in the queue in ~{back_in:.0f}s as they expire)"
            if back_in >= 1
            else "expired: back in the queue at a live node's next heartbeat)"
        )
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


# The records behind the failures and invalid seeds lines are the spider's, of every crawl id
# (the ledger's lines above are the crawl's): said where there are any (an audit read a crawl's
# "1 failed" beside "failures 4").
SPIDER_WIDE = " (records of every crawl of the spider: {where})"

# Runs a SHORT ledger line names: a crawl whose pods were killed for weeks has hundreds.
SHORT_RUNS_NAMED = 5


def ledger_text(ledger: LedgerView) -> str:
    short, runs, replays = ledger["short_runs"], ledger["runs"], ledger["replays"]
    pushed = f"{runs} node run{'' if runs == 1 else 's'}"
    if replays:
        pushed += f" and {replays} spool replay{'' if replays == 1 else 's'}"
    if not short and not ledger["open_runs"]:
        return f"adds up ({pushed}, none stopped without its final push)"
    if not short:
        unfinished = ledger["open_runs"]
        return (
            f"adds up so far ({pushed}, none stopped without its final push; "
            f"{len(unfinished)} {'has' if len(unfinished) == 1 else 'have'} not made it yet: "
            f"{'its' if len(unfinished) == 1 else 'their'} counts since "
            f"{'its' if len(unfinished) == 1 else 'their'} last push are not in: "
            f"{_named(unfinished)})"
        )
    return (
        f"SHORT: {len(short)} of {runs} node runs stopped without their final push"
        f" (their last interval is missing): {_named(short)}"
    )


def _named(runs: list[str]) -> str:
    named = ", ".join(runs[:SHORT_RUNS_NAMED])
    if len(runs) > SHORT_RUNS_NAMED:
        named += f" and {len(runs) - SHORT_RUNS_NAMED} more (--json names them all)"
    return named


def pause_text(pause: PauseInfo) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(pause["since"]))
    kafka = outage_words(bool(pause.get("missing_topic"))).away
    if pause["reason"] == KAFKA_AWAY:
        return f"{kafka.upper()} since {since} UTC (spooling its items, still crawling)"
    spool = ", its spool cannot be written" if pause["reason"] == "spool_error" else ""
    return f"PAUSED ({kafka} since {since} UTC{spool})"


def spool_text(status: FrontierStatus) -> str:
    spider = status["snapshot"]["spider"]
    return (
        f"{status['spooled']} items in the spool of node(s)"
        f" {', '.join(status['spooled_nodes']) or '?'} (not in Kafka yet: `crawler spool replay"
        f" {spider} --dir <the node's KAFKA_SPOOL_DIR>` on that host, or start a node there)"
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
    live = any(node["state"] == "live" for node in snap["nodes"])
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
        )
        + (
            f", start requests: being written by {status['start_writer']}"
            if status["start_writer"]
            else ""
        )
        + (
            f" ({status['seeds_unread']} seeds in {snap['seeds_key']} that no node reads "
            f"({snap['spider']} is not fed from Redis: its start_urls or start() are its start "
            "requests): not work left)"
            if status["seeds_unread"]
            else ""
        ),
        f"  rates          {status['pages_per_minute']} pages/min,"
        f" {status['delivered_per_minute']} items delivered/min,"
        f" {status['finished_per_minute']} finished/min"
        + (
            f" (over {status['ledger']['active_seconds']:.0f}s of fetching"
            if live
            else f" (no live node; nodes fetched for {status['ledger']['active_seconds']:.0f}s"
        )
        + f" in the last {status['ledger']['window_seconds']:.0f}s)",
        f"  nodes          {nodes_text(snap['nodes'])}",
    ]
    shown = [node for node in snap["nodes"] if show_all or not gone(node)]
    width = max((len(node["node"]) for node in shown), default=0)
    lines += [
        f"    {node['node']:<{width}}  {node['state']:<4}"
        f"  {node['leases']:>4} leases  heartbeat {node['heartbeat_ago']:.1f}s ago"
        + (
            f"  {pause_text(notice)}"
            if (
                notice := status["paused"].get(node["node"])
                or status["kafka_away"].get(node["node"])
            )
            else ""
        )
        for node in shown
    ]
    lines.append(f"  ledger         {ledger_text(status['ledger'])}")
    if live_crawls := status["ledger"]["live_crawls"]:
        crawl = status["ledger"]["crawl_id"]
        lines.append(
            f"  crawl id       no live node runs crawl {crawl!r}; the live nodes run "
            f"{', '.join(live_crawls)} (their CRAWLER_CRAWL_ID): crawler status "
            f"{snap['spider']} --crawl {live_crawls[0]}"
        )
    if errored := totals.get("items/errored", 0):
        lines.append(
            f"  items lost     {errored} (a pipeline raised: 'Error processing' in the node logs)"
        )
    if unstored := totals.get("unstored", 0):
        lines.append(
            f"  not stored     {unstored} requests (a value Redis cannot hold: 'Request not "
            "enqueued' in the node logs)"
        )
    if in_files := totals.get("items/dead_letter_file", 0):
        lines.append(
            f"  not in Kafka   {in_files} items neither their topic nor its DLQ took, only in "
            "their node's dead-letter file (KAFKA_SPOOL_DIR/<spider>/dead-letters/<node>.jsonl "
            "on its host)"
        )
    if status["spooled"]:
        lines.append(f"  spool          {spool_text(status)}")
    lines += completeness_lines(totals)
    lines += [f"  incident       {incident_text(incident)}" for incident in snap["incidents"]]
    lines += [
        f"  failures       {snap['failed']}: {_counts(snap['failed_by_reason'])}"
        + (
            SPIDER_WIDE.format(where=f"crawler failed {snap['spider']} list")
            if snap["failed"]
            else ""
        ),
        f"  invalid seeds  {snap['invalid_seeds']}: {_counts(snap['invalid_by_reason'])}"
        + (SPIDER_WIDE.format(where=snap["invalid_key"]) if snap["invalid_seeds"] else ""),
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
