"""The ``completeness`` line of ``crawler status``: what the crawl's lists declared against
what it collected, from the ledger's ``zhihu/declared|shortfall/<list>`` fields
(crawler/zhihu/completeness.py).

``completeness   comments 7,180 of 7,200 declared, 99.7% (8 lists short); answers 500 of 500
declared, 100.0%; ...``: lists grouped under the names below, each group's collected count
being its declared count less its shortfall (a list that gave more than it declared does not
make up for another that gave less).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from crawler.zhihu.completeness import percent

DECLARED, SHORTFALL, SHORT_LISTS = "zhihu/declared/", "zhihu/shortfall/", "zhihu/short_lists/"
GROUPS = {  # list -> the name it is shown under; other lists are shown by their own name
    "root_comment": "comments",
    "child_comment": "comments",
    "question_answers": "answers",
    "member_answers": "creator answers",
    "member_articles": "creator articles",
    "member_zvideos": "creator videos",
}


def completeness_groups(totals: Mapping[str, int]) -> dict[str, tuple[int, int, int]]:
    """Group -> (collected, declared, lists short), in the order of ``GROUPS``."""
    found: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    order = list(dict.fromkeys(GROUPS.values()))
    for field, declared in totals.items():
        if not field.startswith(DECLARED):
            continue
        name = field.removeprefix(DECLARED)
        group = GROUPS.get(name, name)
        if group not in order:
            order.append(group)
        shortfall = totals.get(SHORTFALL + name, 0)
        found[group][0] += declared - shortfall
        found[group][1] += declared
        found[group][2] += totals.get(SHORT_LISTS + name, 0)
    return {
        group: (found[group][0], found[group][1], found[group][2])
        for group in order
        if group in found
    }


def completeness_lines(totals: Mapping[str, int]) -> list[str]:
    """The status line, or none when no list of the crawl declared a total."""
    groups = completeness_groups(totals)
    if not groups:
        return []
    parts = [
        f"{group} {got:,} of {declared:,} declared, {percent(got, declared)}"
        + (f" ({short:,} list{'' if short == 1 else 's'} short)" if short else "")
        for group, (got, declared, short) in groups.items()
    ]
    return [f"  completeness   {'; '.join(parts)}"]
