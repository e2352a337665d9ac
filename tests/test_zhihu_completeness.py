"""Completeness on one node (no node killed, so the ledger is exact): every list's record, the
ledger's figures in ``crawler status zhihu``, the node's log line; and the pure parts
(``Tally``, the status rendering, search pages, fields that drifted)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from crawler.cli.completeness import completeness_groups, completeness_lines
from crawler.extensions.ledger_layout import ledger_fields
from crawler.zhihu.completeness import Completeness, Tally, percent
from crawler.zhihu.parsers import comment_item, content_item, creator_item, search_page
from tests.test_zhihu_crawl import (
    VARIETY,
    Expected,
    completeness_text,
    crawl_small,
    expect_person,
    expect_question,
    expect_search,
    expected_lists,
    found_lists,
    read_dead_letters,
    read_items,
    status_lines,
)
from tests.test_zhihu_parsers import body, context
from tests.zhihu_mock import DataConfig, MockConfig, QuestionSpec, ZhihuMock

# one person with answers, articles and zvideos; "Python" finds answers (seed 1)
DATA = DataConfig(
    seed=1,
    questions=(QuestionSpec(30, 150),),
    people=4,
    articles=4,
    article_comments=20,
    zvideos=3,
    zvideo_comments=10,
)


def test_one_node_records_every_list_and_the_ledger_adds_up(
    redis_url: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    zhihu_topics = f"test-{uuid.uuid4().hex[:10]}-{{spider}}-{{item_type}}"
    with ZhihuMock(MockConfig(data=DATA, variety=VARIETY)) as mock:
        data, base = mock.data, mock.base_url
        question = next(iter(data.questions.values()))
        person = next(
            p
            for p in data.people
            if all(data.authored_by(k, p) for k in ("answer", "article", "zvideo"))
        )
        seeds = {"question": f"{base}/question/{question.id}", "person": f"{base}/people/{person}"}
        expected = Expected(data, VARIETY)
        expect_question(expected, question, seeds["question"])
        expect_person(expected, person, seeds["person"])
        broken = expect_search(expected, "Python")
        lists = expected_lists(expected, [question], person)
        shortfall = sum(max(0, declared - got) for declared, got in lists.values())
        assert broken and shortfall  # the mock withholds something, and breaks a result
        found = crawl_small(
            mock,
            [seeds["question"], seeds["person"], orjson.dumps({"keyword": "Python"})],
            workdir=tmp_path,
            redis_url=redis_url,
            kafka=kafka_bootstrap,
            topics=zhihu_topics,
        )
        items = read_items(
            kafka_bootstrap,
            zhihu_topics,
            {"zhihu_comment": len(expected.comments), "zhihu_list": len(lists)},
        )
        status = status_lines(redis_url)
    assert {i["comment_id"] for i in items["zhihu_comment"]} == expected.comments
    assert found_lists(items["zhihu_list"]) == lists
    assert len(items["zhihu_list"]) == len(lists)  # one record per list
    assert status == completeness_text(lists)  # the ledger is exact without a kill
    assert sum(v for k, v in found.items() if k.startswith("zhihu/shortfall/")) == shortfall
    unparsed = read_dead_letters(kafka_bootstrap, zhihu_topics, "zhihu_unparsed", len(broken))
    assert len(unparsed) == len(broken)
    log = (tmp_path / "node-0.log").read_text()
    line = re.search(r"Zhihu completeness on this node: (.*)", log)
    assert line is not None, log[-3000:]
    assert re.search(r"; worst: \w+ of \S+ \(\d+ of \d+\)", line.group(1)), line.group(1)
    print(f"{status}\nnode log: {line.group(1)[:400]}")


def test_tally_counts_what_a_list_owes() -> None:
    tally = Tally().declare(10, 2).add(5)
    assert (tally.expected, tally.shortfall, tally.wants_more()) == (8, 3, True)
    assert tally.declare(99).declared == 10  # the first total stays
    assert Tally.of(tally.meta()) == tally
    assert Tally().add(3).wants_more() is False  # nothing declared: nothing owed
    assert Tally(2, 0, 5).shortfall == 0  # more than declared is not a shortfall
    assert (percent(7180, 7200), percent(1999, 2000), percent(0, 0)) == ("99.7%", "99.9%", "100.0%")


def test_ledger_keeps_completeness_stats_and_status_groups_them() -> None:
    record = Completeness()
    stats: dict[str, int] = {}
    for name, owner, tally in (
        ("root_comment", "1", Tally(100, 0, 100)),
        ("child_comment", "2", Tally(7100, 0, 7080)),
        ("question_answers", "3", Tally(500, 0, 500)),
    ):
        for event, value in record.record(name, owner, tally).items():
            stats[f"zhihu/{event}"] = stats.get(f"zhihu/{event}", 0) + value
    fields = ledger_fields(stats)
    assert fields["zhihu/declared/child_comment"] == 7100
    assert fields["zhihu/shortfall/child_comment"] == 20
    assert completeness_groups(fields)["comments"] == (7180, 7200, 1)
    assert completeness_lines(fields) == [
        "  completeness   comments 7,180 of 7,200 declared, 99.7% (1 list short);"
        " answers 500 of 500 declared, 100.0%"
    ]
    assert completeness_lines(ledger_fields({"frontier/done": 3})) == []
    assert record.summary(stats).endswith("; worst: child_comment of 2 (7080 of 7100)")


@pytest.fixture(scope="module")
def drifting_mock() -> Iterator[ZhihuMock]:
    with ZhihuMock(MockConfig(data=DATA, variety=VARIETY)) as mock:
        yield mock


def test_drifted_fields_are_null_and_reported(drifting_mock: ZhihuMock) -> None:
    mock, missing = drifting_mock, list[str]()
    data = mock.data
    answer = next(a for a in data.answers if VARIETY.drifted(a))
    item = content_item(body(mock, f"/api/v4/answers/{answer}"), context(missing=missing))
    assert (item.voteup_count, missing) == (None, ["content/voteup_count"])
    person = next(p for p in data.people.values() if VARIETY.drifted(p.id))
    creator = creator_item(
        body(mock, f"/api/v4/members/{person.url_token}"), context(None, missing)
    )
    assert creator.follower_count is None and missing[-1] == "creator/follower_count"
    for aid in data.answers:  # the first served root comment whose numbers drifted
        if not data.roots_of("answer", aid):
            continue
        page = body(mock, f"/api/v4/comment_v5/answers/{aid}/root_comment?limit=20")
        drifted = [c for c in page["data"] if VARIETY.drifted(c["id"])]
        if drifted:
            parsed = comment_item(drifted[0], "answer", aid, context(None, missing))
            break
    else:
        pytest.fail("no root comment drifted")
    assert parsed.like_count is None and missing[-1] == "comment/like_count"


def test_search_pages_skip_unknown_types_and_unwrap_results(drifting_mock: ZhihuMock) -> None:
    page = body(drifting_mock, "/api/v4/search_v3?t=general&q=Python&offset=0&limit=20")
    rest = body(drifting_mock, "/api/v4/search_v3?t=general&q=Python&offset=20&limit=20")
    found = search_page(page["data"] + rest["data"])
    assert {"relevant_query", "roundtable", "koc_box", "knowledge_ad"} <= set(found.skipped)
    assert found.unwrapped == ["feed_card"]
    assert sum("id" not in c for c in found.contents) == 1  # the broken one: dead-lettered
    assert found.people and all(
        c["type"] in ("answer", "article", "zvideo") for c in found.contents
    )


def test_a_node_that_completed_lists_recorded_short_before_says_so() -> None:
    """A list recorded short (5 declared, none collected), retried after the failure and
    completed on another node: that node's stats are corrections (declared +0, shortfall
    -5: the ledger sums them to the crawl's figures), and its closing line said `5 of 0
    declared (100.0%)` (an audit)."""
    stats = {"zhihu/declared/member_answers": 0, "zhihu/shortfall/member_answers": -5}
    said = Completeness().summary(stats)
    assert said.startswith("member_answers 5 more collected in lists recorded short before")
    mixed = {"zhihu/declared/root_comment": 10, "zhihu/shortfall/root_comment": -2}
    said = Completeness().summary(mixed)
    assert said.startswith("root_comment 10 of 10 declared (100.0%), 2 more collected in lists")
