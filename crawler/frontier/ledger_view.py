"""Reading a crawl's ledger (layout in ``crawler.extensions.ledger_layout``): totals, the
last minutes' sums, the node runs that pushed, which of them stopped without their final push,
and, when no live node pushes to it, the crawls live nodes push to (no Scrapy imports)."""

from __future__ import annotations

from collections import Counter
from typing import TypedDict

from crawler.extensions.ledger_layout import (
    STARTED_FIELD,
    LedgerKeys,
    is_replay,
    pattern_for_spider,
)
from crawler.frontier.inspect import SCAN_COUNT
from crawler.lua import text
from crawler.redis_connection import SyncRedis, server_time_ms


class LedgerView(TypedDict):
    crawl_id: str
    totals: dict[str, int]
    recent: dict[str, int]  # sums of the per-minute buckets of the window
    window_seconds: float  # time the recent sums cover (from the crawl's start at most)
    active_seconds: float  # of the window, the minutes in which nodes fetched pages
    # since the end of the window's last minute in which nodes fetched pages (0 during one;
    # the whole window when none had any)
    quiet_seconds: float
    runs: int  # node runs that pushed to this ledger
    replays: int  # `crawler spool replay`s that added to it (one final push each)
    short_runs: list[str]  # runs silent for 3 push intervals without a final push (killed)
    # runs without their final push that are not short (yet): their counts since their last
    # push are not in the totals (a live node's last interval, or a node killed just now)
    open_runs: list[str]
    # when no live node pushes to this crawl's ledger: the crawls live nodes push to
    live_crawls: list[str]


def _runs(fields: dict[str, str]) -> dict[str, dict[str, str]]:
    """``<run>:<name>`` fields of the ledger's runs hash, by run (a run id may hold ':')."""
    runs: dict[str, dict[str, str]] = {}
    for field, value in fields.items():
        run, _, name = field.rpartition(":")
        runs.setdefault(run, {})[name] = value
    return runs


def _silent(last: dict[str, str], now_ms: float) -> bool:
    """Whether a run's last push is more than three of its intervals old."""
    return now_ms - float(last.get("at", 0)) > 3 * float(last.get("every", 0))


def _pushing(runs: dict[str, dict[str, str]], alive: set[str], now_ms: float) -> bool:
    """Whether a live node pushes to this ledger now: a run of an alive node id that is not
    silent (``_silent``) and whose last push was not its final one."""
    return any(
        run.rpartition(":")[0] in alive
        and last.get("state") != "final"
        and not _silent(last, now_ms)
        for run, last in runs.items()
    )


def read_ledger(
    client: SyncRedis, spider: str, nodes_key: str, crawl_id: str, minutes: int = 5
) -> LedgerView:
    """The crawl's totals and the sums of its last ``minutes`` per-minute buckets
    (``nodes_key``: the spider's nodes, by their last beat)."""
    keys = LedgerKeys.for_crawl(spider, crawl_id)
    now = server_time_ms(client, keys.total) / 1000
    current = int(now // 60)
    window = range(current - minutes + 1, current + 1)
    with client.pipeline(transaction=False) as pipe:
        pipe.hgetall(keys.total)
        pipe.hgetall(keys.runs)
        pipe.zrangebyscore(nodes_key, now * 1000, "+inf")
        for minute in window:
            pipe.hgetall(keys.minute(minute))
        total_raw, runs_raw, alive_raw, *buckets = pipe.execute()
    alive = {text(node) for node in alive_raw}
    totals = {text(f): int(v) for f, v in total_raw.items()}
    started = totals.pop(STARTED_FIELD, 0) / 1000
    recent: Counter[str] = Counter()
    active = 0.0
    fetched_until = started  # the end of the last minute nodes fetched in (or the start)
    for minute, bucket in zip(window, buckets, strict=True):
        counts = {text(f): int(v) for f, v in bucket.items()}
        recent.update(counts)
        if counts.get("pages", 0) > 0:  # a minute nodes were fetching in, as much as elapsed
            active += max(0.0, min(now, (minute + 1) * 60) - max(minute * 60, started))
            fetched_until = min(now, (minute + 1) * 60)
    window_start = max(window.start * 60, started)
    every_run = _runs({text(f): text(v) for f, v in runs_raw.items()})
    runs = {run: last for run, last in every_run.items() if not is_replay(run)}
    newest: dict[str, str] = {}  # node id -> its latest run
    for run, _ in sorted(runs.items(), key=lambda entry: float(entry[1].get("at", 0))):
        newest[run.rpartition(":")[0]] = run
    # a live node's latest run pushes again (after a Redis outage); an older run of the same
    # id (a pod restarted in place keeps its name) was killed and never will
    pushes_again = {run for node, run in newest.items() if node in alive}
    unfinished = [run for run, last in sorted(runs.items()) if last.get("state") != "final"]
    short = [  # silent for three pushes, and not to push again
        run for run in unfinished if _silent(runs[run], now * 1000) and run not in pushes_again
    ]
    return LedgerView(
        crawl_id=crawl_id,
        totals=totals,
        recent=dict(recent),
        window_seconds=round(max(0.0, now - window_start), 3),
        active_seconds=round(active, 3),
        quiet_seconds=round(now - max(fetched_until, window_start), 3),
        runs=len(runs),
        replays=len(every_run) - len(runs),
        short_runs=short,
        open_runs=[run for run in unfinished if run not in short],
        live_crawls=(
            _live_crawls(client, spider, alive, crawl_id, now * 1000)
            if alive and not _pushing(runs, alive, now * 1000)
            else []
        ),
    )


def _live_crawls(
    client: SyncRedis, spider: str, alive: set[str], crawl_id: str, now_ms: float
) -> list[str]:
    """The other crawls of the spider whose ledger a live node pushes to now (a status
    asked for a crawl id the nodes were not started with). A ledger's runs stay: a node id
    that ran another crawl before (a pod keeps its name) counts only if it pushes there."""
    crawls = []
    for key in client.scan_iter(match=pattern_for_spider(spider), count=SCAN_COUNT):
        name = text(key)
        if not name.endswith(":runs"):
            continue
        other = name.removesuffix(":runs").rsplit(":", 1)[1]
        if other == crawl_id:
            continue
        runs = _runs({text(f): text(v) for f, v in client.hgetall(name).items()})
        if _pushing(runs, alive, now_ms):
            crawls.append(other)
    return sorted(crawls)
