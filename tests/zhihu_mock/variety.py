"""The shape variety real Zhihu shows, each behind a switch of :class:`Variety` (all off).

Tests compute what a switch hides with the same methods the mock serves with
(:meth:`Variety.served`, :meth:`Variety.drifted`, :meth:`Variety.search_forms`).
See docs/zhihu-mock.md.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from tests.zhihu_mock.records import Comment, SearchEntry

T = TypeVar("T")
# lists whose last item a switch can withhold (counted in their totals, never served)
WITHHOLDABLE = frozenset(
    {
        "question_answers",
        "member_answers",
        "member_articles",
        "member_zvideos",
        "root_comment",
        "child_comment",
    }
)
SearchForm = Literal["plain", "wrapped", "broken"]
# entries search_drift appends to every keyword's results: an unknown entry type and a result
# whose object type no crawler knows
DRIFT_ENTRIES = (
    SearchEntry("relevant_query", "drift-relevant-query", "", ""),
    SearchEntry("search_result", "drift-roundtable", "roundtable", "drift-roundtable"),
)


@dataclass(frozen=True)
class Variety:
    # False: root comments carry child_comment_count but no child_comments preview and
    # child_comment_next_offset null (children only from child_comment pages)
    child_previews: bool = True
    # lists of WITHHOLDABLE whose last item (in the order served) is counted in paging.totals
    # and in the owner's counts but never served
    withheld: frozenset[str] = field(default_factory=frozenset)
    # of each content with two or more roots, the oldest root is collapsed: counted in
    # paging.totals and counts.collapsed_counts, not served (nor its children)
    collapsed_roots: bool = False
    # nulls where numbers were: voteup_count of some contents, like_count (absent) of some
    # comments, follower_count of some members (those whose id drifted() is true)
    field_drift: bool = False
    # search answers DRIFT_ENTRIES too, the first answer result inside a wrapper object
    # ({"type": "feed_card", "target": {...}}) and the second without an id (unusable)
    search_drift: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.withheld) - WITHHOLDABLE
        if unknown:
            raise ValueError(f"Variety.withheld={sorted(unknown)}: not in {sorted(WITHHOLDABLE)}")

    def served(self, list_name: str, ordered: Sequence[T]) -> list[T]:
        """The items of a list the site serves, in its order."""
        if list_name in self.withheld and ordered:
            return list(ordered[:-1])
        return list(ordered)

    def collapsed(self, roots: Sequence[Comment]) -> Comment | None:
        """The root comment of a content that is collapsed (not served), if any."""
        if not self.collapsed_roots or len(roots) < 2:
            return None
        return min(roots, key=lambda c: (c.created_time, c.id))

    def drifted(self, object_id: str) -> bool:
        """Whether an object's numbers are null (``field_drift``): about one in five."""
        return self.field_drift and zlib.crc32(object_id.encode()) % 5 == 0

    def search_entries(self, entries: Sequence[SearchEntry]) -> tuple[SearchEntry, ...]:
        return (*entries, *DRIFT_ENTRIES) if self.search_drift else tuple(entries)

    def search_forms(self, entries: Sequence[SearchEntry]) -> dict[str, SearchForm]:
        """Entry id -> how an answer result is rendered: wrapped, broken (no id) or plain."""
        if not self.search_drift:
            return {}
        answers = [e.id for e in entries if e.kind == "search_result" and e.object_type == "answer"]
        forms: tuple[SearchForm, ...] = ("wrapped", "broken")
        return dict(zip(answers, forms, strict=False))
