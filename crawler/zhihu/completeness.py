"""Completeness: what each list declared against what the crawl collected of it.

A list chain (a question's answers, a person's answers/articles/zvideos, a content's root
comments, a root's children) carries a :class:`Tally` in request meta from page to page:
the total it declared (``paging.totals`` or the owner's count), what it excused (counted but
never served: collapsed or under review) and what it collected so far. At the chain's end the
spider records it (:meth:`Completeness.record`): a ``zhihu_list`` item, the stats
``zhihu/declared|excused|collected|shortfall/<list>`` (summed into the crawl ledger) and the
node's worst lists, logged at close. Chains cut by ``ZHIHU_MAX_*`` are not recorded.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from crawler.zhihu.items import ZhihuListItem

TALLY = "zhihu_tally"  # request meta key: [declared or null, excused, collected]
STAT_EVENTS = ("declared", "excused", "collected", "shortfall", "short_lists")
# the stats the crawl ledger keeps per name (crawler/extensions/ledger_layout.py)
LEDGER_PREFIXES = tuple(f"zhihu/{event}/" for event in STAT_EVENTS)
WORST_KEPT = 5  # lists named in the close log line


@dataclass(frozen=True, slots=True)
class Tally:
    declared: int | None = None
    excused: int = 0
    collected: int = 0

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> Tally:
        declared, excused, collected = meta.get(TALLY) or (None, 0, 0)
        return cls(declared, int(excused), int(collected))

    def meta(self) -> dict[str, Any]:
        return {TALLY: [self.declared, self.excused, self.collected]}

    def declare(self, declared: int | None, excused: int = 0) -> Tally:
        """The first total a chain learns is its total (a later page may say otherwise)."""
        if self.declared is not None or declared is None:
            return self
        return replace(self, declared=declared, excused=excused)

    def add(self, collected: int) -> Tally:
        return replace(self, collected=self.collected + collected)

    @property
    def expected(self) -> int:
        return max(0, (self.declared or 0) - self.excused)

    @property
    def shortfall(self) -> int:
        return max(0, self.expected - self.collected)

    def item(self, list_name: str, owner_id: str, source: str) -> ZhihuListItem:
        """The ``zhihu_list`` record of the finished list."""
        return ZhihuListItem(
            list=list_name,
            owner_id=owner_id,
            declared=self.declared or 0,
            excused=self.excused,
            collected=self.collected,
            shortfall=self.shortfall,
            source=source,
            crawled_at=datetime.now(UTC),
        )

    def wants_more(self) -> bool:
        """The list declared more than was collected: worth a page past ``is_end``."""
        return self.declared is not None and self.collected < self.expected


def stat_deltas(list_name: str, tally: Tally) -> dict[str, int]:
    """The stats a finished list adds to (``zhihu/`` is the spider's prefix)."""
    values = (tally.expected, tally.excused, tally.collected, tally.shortfall, tally.shortfall > 0)
    pairs = zip(STAT_EVENTS, values, strict=True)
    return {f"{event}/{list_name}": int(value) for event, value in pairs}


def percent(collected: int, declared: int) -> str:
    """``99.7%``; rounded down, so a list short of anything never shows 100.0%."""
    if declared == 0:
        return "100.0%"
    tenths = collected * 1000 // declared
    return f"{tenths // 10}.{tenths % 10}%"


class Completeness:
    """One node's record of finished lists: the worst of them for the close log line."""

    def __init__(self) -> None:
        # min-heap of the worst lists: most missing first, then the least complete
        self._worst: list[tuple[int, float, str, str, int, int]] = []

    def record(self, list_name: str, owner_id: str, tally: Tally) -> dict[str, int]:
        if tally.shortfall:
            missing = tally.shortfall / tally.expected
            entry = (tally.shortfall, missing, list_name, owner_id, tally.collected, tally.expected)
            if len(self._worst) < WORST_KEPT:
                heapq.heappush(self._worst, entry)
            else:
                heapq.heappushpop(self._worst, entry)
        return stat_deltas(list_name, tally)

    def summary(self, stats: Mapping[str, Any]) -> str:
        """``root_comment 98 of 100 declared (98.0%), ...; worst: child_comment of 123 (0 of
        3), ...`` from the node's ``zhihu/`` stats."""
        lists = sorted(
            name.removeprefix("zhihu/declared/")
            for name in stats
            if name.startswith("zhihu/declared/")
        )
        parts = []
        for name in lists:
            declared = int(stats.get(f"zhihu/declared/{name}", 0))
            shortfall = int(stats.get(f"zhihu/shortfall/{name}", 0))
            # a list retried after it was recorded short (elsewhere, or before) is recorded again
            # as a correction: declared +0, shortfall below 0 (the ledger's sum is the crawl's)
            made_up = f"{-shortfall:,} more collected in lists recorded short before (retried)"
            if declared == 0:
                parts.append(f"{name} {made_up}" if shortfall < 0 else f"{name} none declared")
                continue
            got = declared - max(0, shortfall)
            line = f"{name} {got:,} of {declared:,} declared ({percent(got, declared)})"
            parts.append(f"{line}, {made_up}" if shortfall < 0 else line)
        worst = ", ".join(
            f"{name} of {owner} ({got} of {expected})"
            for *_, name, owner, got, expected in sorted(self._worst, reverse=True)
        )
        return "; ".join(parts or ["no list declared a total"]) + (
            f"; worst: {worst}" if worst else "; no list short"
        )
