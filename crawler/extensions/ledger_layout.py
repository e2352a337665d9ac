"""Layout of the per-crawl ledger in Redis: key names and fields (no Scrapy imports).

Every node adds the deltas of its stats to ``{<spider>}:ledger:<crawl id>`` (totals
of the crawl) and to ``{<spider>}:ledger:<crawl id>:m:<epoch minute>`` (the same
fields per minute, for rates; they expire after ``BUCKET_TTL`` seconds), and records
its run's last push in ``{<spider>}:ledger:<crawl id>:runs``. The keys carry the
spider's hash tag, like the frontier keys. See docs/redis-keys.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from crawler.frontier.keys import glob_escape
from crawler.kafka.replay import REPLAY_OF_CRAWL
from crawler.zhihu.completeness import LEDGER_PREFIXES

BUCKET_TTL = 2 * 3600  # seconds a per-minute bucket is kept
STARTED_FIELD = "started_ms"  # first push of the crawl (Redis time, ms); not a counter

# ledger field -> the stat it adds up
DIRECT_FIELDS = {
    "seeded": "seeds/received",
    "enqueued": "frontier/added",
    "leased": "frontier/leased",
    "done": "frontier/done",
    "reclaimed": "frontier/reclaimed",
    "released": "frontier/released",
    "items/scraped": "item_scraped_count",
    "items/dropped": "item_dropped_count",
    "items/delivered": "kafka/delivered",
    "items/spooled": "kafka/spooled",
    # items neither their topic nor its DLQ took: only in the node's dead-letter file
    "items/dead_letter_file": "kafka/dead_lettered_file",
    "pages": "downloader/response_count",  # every response, also those retried (500s)
}
# ledger field -> stat prefixes whose stats it sums
SUMMED_FIELDS = {
    # certain duplicates, and those a Bloom filter takes for seen (FRONTIER_DUPEFILTER=bloom)
    "dropped/dup": ("dupefilter/filtered", "dupefilter/bloom_maybe_seen"),
    "invalid_seeds": ("seeds/invalid/",),
    "failed": ("frontier/failed/",),
    "requeued": ("frontier/requeued/",),
    "lease_lost": ("frontier/lease_lost/",),
    "items/errored": ("pipeline/item_error/",),  # lost: a pipeline raised on them
    "unstored": ("frontier/unserializable",),  # requests not enqueued: Redis cannot hold them
    # spooled messages a replay took out of the spool: delivered, or dead-lettered (those of
    # other crawls taken out below: their crawls' ledgers count them)
    "items/replayed": ("kafka/replayed", "kafka/replay_dead_lettered"),
}
DEAD_LETTER_STATS = ("kafka/dead_lettered", "kafka/dead_lettered_file")
# what a replay of spooled messages credits the crawl they are of (``replayed_of_other_crawls``)
REPLAY_FIELDS = ("items/replayed", "items/delivered")
FAILED_PREFIX = "frontier/failed/"  # also kept per reason as failed/<reason>
SPOOLED_BY_PREFIX = "items/spooled_by/"  # + node id: the messages that node spooled
KEPT_PREFIXES = LEDGER_PREFIXES  # kept per stat name: what lists declared and gave (completeness)


@dataclass(frozen=True, slots=True)
class LedgerKeys:
    total: str
    minute_prefix: str
    runs: str  # run -> its last push: <run>:push, <run>:at (Redis ms), <run>:state, <run>:every
    item_topics: str  # the KAFKA_TOPIC_TEMPLATE the crawl's items go to (its first node's)
    node_topics: str  # hash: node id -> the KAFKA_TOPIC_TEMPLATE it started with

    @classmethod
    def for_crawl(cls, spider: str, crawl_id: str) -> LedgerKeys:
        total = f"{{{spider}}}:ledger:{crawl_id}"
        return cls(
            total=total,
            minute_prefix=f"{total}:m:",
            runs=f"{total}:runs",
            item_topics=f"{total}:item_topics",
            node_topics=f"{total}:item_topics:nodes",
        )

    def minute(self, epoch_minute: int) -> str:
        return f"{self.minute_prefix}{epoch_minute}"


REPLAY_RUN = ":replay-"  # in the run id of a ``crawler spool replay``'s push: not a node run


def is_replay(run: str) -> bool:
    """Whether ledger run ``run`` is a spool replay's (one final push), not a node's."""
    return REPLAY_RUN in run


def push_args(
    run: str, push: int, keys: LedgerKeys, *, state: str, every_ms: int, deltas: Mapping[str, int]
) -> list[str | int]:
    """``ledger_push.lua``'s ARGV: push ``push`` of ``run`` (``state``: ``final`` or
    ``running``; ``every_ms``: the run's push interval), then field, delta pairs."""
    args: list[str | int] = [run, push, keys.minute_prefix, BUCKET_TTL, state, every_ms]
    for field, delta in deltas.items():
        args += [field, delta]
    return args


def pattern_for_spider(spider: str) -> str:
    """SCAN pattern of every ledger key of a spider (all crawls, totals and minutes)."""
    return f"{{{glob_escape(spider)}}}:ledger:*"


def ledger_fields(stats: Mapping[str, object]) -> dict[str, int]:
    """The ledger's counters as the stats give them now (numeric stats only)."""
    numbers = {
        name: int(value)
        for name, value in stats.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }
    fields = {field: numbers.get(stat, 0) for field, stat in DIRECT_FIELDS.items()}
    for field, prefixes in SUMMED_FIELDS.items():
        fields[field] = sum(v for name, v in numbers.items() if name.startswith(prefixes))
    for (_crawl, field), credited in replayed_of_other_crawls(numbers).items():
        fields[field] -= credited  # their crawls' ledgers count them
    fields["items/dead_lettered"] = sum(numbers.get(stat, 0) for stat in DEAD_LETTER_STATS)
    for name, value in numbers.items():
        if name.startswith(FAILED_PREFIX):
            fields[f"failed/{name[len(FAILED_PREFIX) :]}"] = value
        elif name.startswith(KEPT_PREFIXES):
            fields[name] = value
    return fields


def replayed_of_other_crawls(stats: Mapping[str, object]) -> dict[tuple[str, str], int]:
    """(crawl id, ledger field) -> what the node's replays took out of its spool of messages of
    that crawl (not the node's): ``items/replayed``, and of those ``items/delivered`` (the
    dead-lettered ones' dead-letter counts stay the node crawl's)."""
    by_field: dict[tuple[str, str], int] = {}
    for name, value in stats.items():
        if not name.startswith(REPLAY_OF_CRAWL) or not isinstance(value, int | float):
            continue
        outcome, _, crawl = name[len(REPLAY_OF_CRAWL) :].partition("/")
        for field in REPLAY_FIELDS if outcome == "delivered" else REPLAY_FIELDS[:1]:
            by_field[(crawl, field)] = by_field.get((crawl, field), 0) + int(value)
    return by_field


def fields_by_crawl(counts: Iterable[tuple[tuple[str, str], int]]) -> dict[str, dict[str, int]]:
    """``((crawl id, field), n)`` pairs grouped by crawl: crawl id -> field -> their sum."""
    grouped: dict[str, dict[str, int]] = {}
    for (crawl, field), n in counts:
        fields = grouped.setdefault(crawl, {})
        fields[field] = fields.get(field, 0) + n
    return grouped
