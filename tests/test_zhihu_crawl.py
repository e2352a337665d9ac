"""End to end: zhihu nodes crawl the mock through real Redis and Kafka.

Sizes: the 3-node run crawls the mock's default data (seed 3): the 500-answer / 5,000-comment
question, one person (profile, answers, articles) and one search keyword, with comments and
creators on, paging at 20. The error tests run one node on a small mock (one 12-answer question).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from redis.asyncio import Redis as AsyncRedis

from crawler.cli.completeness import completeness_lines
from crawler.demo.nodes import REPO_ROOT
from crawler.frontier.admin import leases_per_node
from crawler.frontier.keys import FrontierKeys
from crawler.kafka.reader import read_topic
from crawler.sessions import Cookie, RedisSessionStore, Session, SessionSettings
from crawler.sessions.providers import CHROMIUM
from tests.cluster import logs, running_nodes, tracebacks, wait_for_exit, wait_for_log
from tests.services import unavailable
from tests.test_zhihu_parsers import plain
from tests.zhihu_mock import DataConfig, MockConfig, MockData, QuestionSpec, Variety, ZhihuMock
from tests.zhihu_mock.api import served_comments, served_roots
from tests.zhihu_mock.objects import ANONYMOUS_AVATAR, derived
from tests.zhihu_mock.records import Question
from tests.zhihu_mock.text import excerpt_of

PASSWORD_ENV = {"ZHIHU_PASSWORD_TESTER": "secret-密码-1"}
FAST = {
    "FRONTIER_LEASE_TIMEOUT": "4",
    "FRONTIER_HEARTBEAT_INTERVAL": "1",
    "FRONTIER_PREFETCH": "4",
    "CONCURRENT_REQUESTS": "8",
    "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
    "METRICS_ENABLED": "False",
    "ZHIHU_PRIVACY": "False",
    "ZHIHU_ACCOUNTS": "tester",
}
SMALL = DataConfig(
    seed=5,
    questions=(QuestionSpec(12, 60),),
    people=6,
    articles=2,
    article_comments=4,
    zvideos=1,
    zvideo_comments=0,
)
TYPES = ("zhihu_content", "zhihu_comment", "zhihu_creator")
JSON = dict[str, Any]


def node_settings(mock: ZhihuMock, topic_template: str, **extra: str) -> dict[str, str]:
    base = mock.base_url
    return {
        **FAST,
        "ZHIHU_WWW_URL": base,
        "ZHIHU_ZHUANLAN_URL": base,
        "ZHIHU_API_URL": f"{base}/api/v4",
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        **extra,
    }


@pytest.fixture
def zhihu_topics() -> str:
    return f"test-{uuid.uuid4().hex[:10]}-{{spider}}-{{item_type}}"


def read_items(kafka: str, template: str, expected: Mapping[str, int]) -> dict[str, list[JSON]]:
    found = {}
    for item_type in (*TYPES, *(t for t in expected if t not in TYPES)):
        topic = template.format(spider="zhihu", item_type=item_type)
        wanted = expected.get(item_type)
        messages = read_topic(kafka, topic, expected=wanted, timeout=60 if wanted else 5)
        found[item_type] = [orjson.loads(m.value) for m in messages]
    return found


def stats(workdir: Path, logs: str = "node-*.log") -> Counter[str]:
    total: Counter[str] = Counter()
    for path in workdir.glob(logs):
        for name, value in re.findall(
            r"'((?:zhihu|politeness|sessions|frontier/failed)/[^']+)': (\d+)", path.read_text()
        ):
            total[name] += int(value)
    return total


# --- what the mock holds -------------------------------------------------------------------


def author(data: MockData, url_token: str, base: str) -> JSON:
    person = data.people.get(url_token)
    if person is None:
        return {
            "id": "0",
            "url_token": "",
            "name": "匿名用户",
            "link": "",
            "avatar_url": ANONYMOUS_AVATAR,
        }
    return {
        "id": person.id,
        "url_token": url_token,
        "name": person.name,
        "link": f"{base}/people/{url_token}",
        "avatar_url": person.avatar_url,
    }


def expected_content(data: MockData, variety: Variety, kind: str, cid: str, base: str) -> JSON:
    found = content_fields(data, kind, cid, base)
    if variety.drifted(cid):
        found["voteup_count"] = None
    return found


def content_fields(data: MockData, kind: str, cid: str, base: str) -> JSON:
    comments = len(data.comments_of(kind, cid))
    if kind == "answer":
        a = data.answers[cid]
        return {
            "content_id": cid,
            "content_type": kind,
            "question_id": a.question_id,
            "title": data.questions[a.question_id].title,
            "excerpt": excerpt_of(a.content),
            "content_text": plain(a.content),
            "content_url": f"{base}/question/{a.question_id}/answer/{cid}",
            "created_time": a.created_time,
            "updated_time": a.updated_time,
            "voteup_count": a.voteup_count,
            "comment_count": comments,
            "author": author(data, a.author, base),
        }
    if kind == "article":
        r = data.articles[cid]
        return {
            "content_id": cid,
            "content_type": kind,
            "question_id": None,
            "title": r.title,
            "excerpt": excerpt_of(r.content),
            "content_text": plain(r.content),
            "content_url": f"{base}/p/{cid}",
            "created_time": r.created,
            "updated_time": r.updated,
            "voteup_count": r.voteup_count,
            "comment_count": comments,
            "author": author(data, r.author, base),
        }
    z = data.zvideos[cid]
    return {
        "content_id": cid,
        "content_type": kind,
        "question_id": None,
        "title": z.title,
        "excerpt": z.description,
        "content_text": z.description,
        "content_url": f"{base}/zvideo/{cid}",
        "created_time": z.created_at,
        "updated_time": z.updated_at,
        "voteup_count": z.voteup_count,
        "comment_count": comments,
        "author": author(data, z.author, base),
    }


def expected_comment(data: MockData, variety: Variety, comment_id: str, base: str) -> JSON:
    c = data.comments[comment_id]
    return {
        "comment_id": c.id,
        "parent_comment_id": None if c.is_root else c.reply_id,
        "content_id": c.content_id,
        "content_type": c.content_type,
        "content": plain(c.content),
        "created_time": c.created_time,
        "like_count": None if variety.drifted(c.id) else c.like_count,
        "dislike_count": c.dislike_count,
        "sub_comment_count": len(data.children_of(c.id)) if c.is_root else 0,
        "ip_location": c.ip_info,
        "author": author(data, c.author, base),
    }


def expected_creator(data: MockData, variety: Variety, url_token: str, base: str) -> JSON:
    p = data.people[url_token]
    return {
        "url_token": url_token,
        "id": p.id,
        "name": p.name,
        "link": f"{base}/people/{url_token}",
        "avatar_url": p.avatar_url,
        "gender": p.gender,
        "headline": p.headline,
        "follower_count": None if variety.drifted(p.id) else p.follower_count,
        "following_count": p.following_count,
        "answer_count": len(data.authored_by("answer", url_token)),
        "article_count": len(data.authored_by("article", url_token)),
        "zvideo_count": len(data.authored_by("zvideo", url_token)),
        "column_count": derived(p.id, 4),
        "question_count": len(data.authored_by("question", url_token)),
        "voteup_count": p.voteup_count,
        "ip_location": p.ip_location,
    }


def without(item: JSON, *names: str) -> JSON:
    return {k: v for k, v in item.items() if k not in names}


class Expected:
    """Contents by (type, id, source), comments by id, creators by url_token."""

    def __init__(self, data: MockData, variety: Variety | None = None) -> None:
        self.data = data
        self.variety = variety or Variety()
        self.contents: set[tuple[str, str, str]] = set()
        self.creators: set[str] = set()

    def add(self, kind: str, cid: str, source: str) -> None:
        self.contents.add((kind, cid, source))
        self.creators.add(self.data.content_author(kind, cid))

    @property
    def comments(self) -> set[str]:
        return {
            c.id
            for k, i, _ in self.contents
            for c in served_comments(self.data, self.variety, k, i)
        }

    def all_creators(self) -> set[str]:
        authors = {self.data.comments[c].author for c in self.comments}
        return (self.creators | authors) - {""}


def check_items(expected: Expected, items: dict[str, list[JSON]], base: str) -> Counter[str]:
    data, variety, duplicates = expected.data, expected.variety, Counter[str]()
    contents = Counter(
        (i["content_type"], i["content_id"], i["source"]) for i in items["zhihu_content"]
    )
    assert set(contents) == expected.contents
    for item in items["zhihu_content"]:
        want = expected_content(data, variety, item["content_type"], item["content_id"], base)
        assert without(item, "source", "crawled_at") == want
    comments = Counter(i["comment_id"] for i in items["zhihu_comment"])
    assert set(comments) == expected.comments
    for item in items["zhihu_comment"]:
        want = expected_comment(data, variety, item["comment_id"], base)
        assert without(item, "source", "crawled_at") == want
    creators = Counter(i["url_token"] for i in items["zhihu_creator"])
    assert set(creators) == expected.all_creators()
    for item in items["zhihu_creator"]:
        want = expected_creator(data, variety, item["url_token"], base)
        assert without(item, "source", "crawled_at") == want
    for name, seen in (("content", contents), ("comment", comments), ("creator", creators)):
        duplicates[name] = sum(seen.values()) - len(seen)
    return duplicates


def expected_question(data: MockData, question: Question, base: str) -> JSON:
    return {
        "question_id": question.id,
        "title": question.title,
        "detail": plain(question.detail),
        "question_url": f"{base}/question/{question.id}",
        "created_time": question.created,
        "updated_time": question.updated_time,
        "answer_count": len(question.answer_ids),
        "follower_count": question.follower_count,
        "visit_count": question.visit_count,
        "comment_count": 0,
        "topics": [topic.name for topic in question.topics],
        "author": author(data, question.author, base),
    }


def read_dead_letters(kafka: str, template: str, item_type: str, expected: int) -> list[JSON]:
    topic = template.format(spider="zhihu", item_type=item_type) + ".dlq"
    return [orjson.loads(m.value) for m in read_topic(kafka, topic, expected=expected, timeout=60)]


def status_lines(redis_url: str) -> str:
    """The completeness line of ``crawler status zhihu`` (the crawl ledger)."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "KAFKA_BOOTSTRAP_SERVERS")}
    result = subprocess.run(
        [sys.executable, "-m", "crawler", "status", "zhihu", "--redis", redis_url],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if "completeness" in line]
    assert len(lines) == 1, result.stdout
    return lines[0]


def leases_by_node(client: redis.Redis) -> Counter[str]:
    """Leases each zhihu node holds now."""
    return leases_per_node(client.hvals(FrontierKeys.for_spider("zhihu").inflight))


# --- the 3-node crawl ------------------------------------------------------------------------


VARIETY = Variety(
    child_previews=False,
    withheld=frozenset({"question_answers", "member_articles", "child_comment"}),
    collapsed_roots=True,
    field_drift=True,
    search_drift=True,
)
MEMBER_LISTS = (
    ("answer", "member_answers"),
    ("article", "member_articles"),
    ("zvideo", "member_zvideos"),
)


def expect_question(expected: Expected, question: Question, seed: str) -> None:
    for aid in expected.variety.served("question_answers", question.answer_ids):
        expected.add("answer", aid, seed)


def expect_person(expected: Expected, person: str, seed: str) -> None:
    for kind, list_name in MEMBER_LISTS:
        for cid in expected.variety.served(list_name, expected.data.authored_by(kind, person)):
            expected.add(kind, cid, seed)
    expected.creators.add(person)


def expect_search(expected: Expected, keyword: str) -> list[str]:
    """Adds what the search leads to; returns the ids of the results the spider cannot use."""
    entries = expected.variety.search_entries(expected.data.search[keyword])
    forms = expected.variety.search_forms(entries)
    broken = [e.object_id for e in entries if forms.get(e.id) == "broken"]
    for entry in entries:
        if entry.kind != "search_result" or forms.get(entry.id) == "broken":
            continue
        if entry.object_type in ("answer", "article", "zvideo"):
            expected.add(entry.object_type, entry.object_id, keyword)
        elif entry.object_type == "people":
            expected.creators.add(entry.object_id)
    return broken


def expected_lists(
    expected: Expected, questions: list[Question], person: str | None
) -> dict[tuple[str, str], tuple[int, int]]:
    """(list, owner) -> (declared less excused, served) of every list the crawl finishes."""
    data, variety = expected.data, expected.variety
    lists = {
        ("question_answers", q.id): (
            len(q.answer_ids),
            len(variety.served("question_answers", q.answer_ids)),
        )
        for q in questions
    }
    for kind, list_name in MEMBER_LISTS if person else ():
        assert person is not None
        ids = data.authored_by(kind, person)
        if ids:
            lists[list_name, person] = (len(ids), len(variety.served(list_name, ids)))
    for kind, cid in {(k, i) for k, i, _ in expected.contents}:
        roots, served = served_roots(data, variety, kind, cid)
        if roots:
            lists["root_comment", cid] = (len(roots), len(served))
        for root in served:
            children = data.children_of(root.id)
            if children:
                got = len(variety.served("child_comment", children))
                lists["child_comment", root.id] = (len(children), got)
    return lists


def found_lists(items: list[JSON]) -> dict[tuple[str, str], tuple[int, int]]:
    """The zhihu_list items by (list, owner); a list recorded twice (a re-run page) agrees."""
    found: dict[tuple[str, str], tuple[int, int]] = {}
    for item in items:
        key = (item["list"], item["owner_id"])
        value = (item["declared"] - item["excused"], item["collected"])
        assert found.setdefault(key, value) == value, (key, value, found[key])
        assert item["shortfall"] == max(0, value[0] - value[1])
    return found


def completeness_text(lists: Mapping[tuple[str, str], tuple[int, int]]) -> str:
    """The status line ``crawler status`` must show for these lists."""
    totals: Counter[str] = Counter()
    for (name, _), (declared, got) in lists.items():
        totals[f"zhihu/declared/{name}"] += declared
        totals[f"zhihu/shortfall/{name}"] += max(0, declared - got)
        totals[f"zhihu/short_lists/{name}"] += int(got < declared)
    return completeness_lines(totals)[0]


@pytest.mark.slow
def test_three_nodes_crawl_question_person_and_search(
    redis_url: str,
    redis_client: redis.Redis,
    kafka_bootstrap: str,
    zhihu_topics: str,
    tmp_path: Path,
) -> None:
    """The mock with every Variety switch on: items equal the mock's, each list's record
    (zhihu_list) gives its exact shortfall, the ledger shows 100% where everything is served."""
    # a question of 200 answers: pages of answers and comments past the first, ~900 requests
    questions = (QuestionSpec(200, 2000), QuestionSpec(12, 60), QuestionSpec(3, 0))
    config = MockConfig(DataConfig(seed=3, questions=questions), rate_limit=60, variety=VARIETY)
    with ZhihuMock(config) as mock:
        data, base = mock.data, mock.base_url
        question = max(data.questions.values(), key=lambda q: len(q.answer_ids))
        person = next(  # creator mode lists all three kinds
            p for p in data.people if all(data.authored_by(k, p) for k, _ in MEMBER_LISTS)
        )
        keyword = "Python"
        seeds = {
            "question": f"{base}/question/{question.id}?utm_source=test",
            "person": f"{base}/people/{person}",
        }
        expected = Expected(data, VARIETY)
        expect_question(expected, question, seeds["question"])
        expect_person(expected, person, seeds["person"])
        broken = expect_search(expected, keyword)
        assert broken  # the search has an unusable result to dead-letter
        lists = expected_lists(expected, [question], person)
        settings = node_settings(mock, zhihu_topics, POLITENESS_RATE="40", POLITENESS_BURST="5")
        env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, **PASSWORD_ENV}
        started = time.monotonic()
        with running_nodes(
            3, workdir=tmp_path, env=env, settings=settings, spider="zhihu"
        ) as nodes:
            redis_client.lpush("zhihu:start_urls", seeds["question"], seeds["person"])
            redis_client.lpush(
                "zhihu:start_urls", orjson.dumps({"keyword": keyword, "type": "search"})
            )
            deadline = time.monotonic() + 120
            while sum(mock.counters.requests.values()) < 300 or not leases_by_node(redis_client):
                assert time.monotonic() < deadline, logs(tmp_path)
                time.sleep(0.05)
            # the node holding the most leases: a working node, whose pages must run elsewhere
            held = leases_by_node(redis_client)
            victim = max(range(3), key=lambda i: held[f"node-{i}"])
            nodes[victim].send_signal(signal.SIGKILL)
            codes = wait_for_exit(nodes, timeout=240)
        elapsed = time.monotonic() - started
        expected_codes = [-signal.SIGKILL if i == victim else 0 for i in range(3)]
        assert codes == expected_codes, logs(tmp_path)
        assert tracebacks(tmp_path) == [], logs(tmp_path)
        wanted = {
            "zhihu_content": len(expected.contents),
            "zhihu_comment": len(expected.comments),
            "zhihu_creator": len(expected.all_creators()),
            "zhihu_question": 1,
            "zhihu_list": len(lists),
        }
        items = read_items(kafka_bootstrap, zhihu_topics, wanted)
        duplicates = check_items(expected, items, base)
        for item in items["zhihu_question"]:  # twice at most: a re-run first page
            assert without(item, "source", "crawled_at") == expected_question(data, question, base)
        assert found_lists(items["zhihu_list"]) == lists
        unparsed = read_dead_letters(kafka_bootstrap, zhihu_topics, "zhihu_unparsed", len(broken))
        assert [u["endpoint"] for u in unparsed] == ["search"] * len(broken)
        for raw in (orjson.loads(u["body"]) for u in unparsed):  # the result object, as served
            assert raw["type"] == "answer" and "id" not in raw
        status = status_lines(redis_url)
        print(
            f"expected={wanted} received={ {k: len(v) for k, v in items.items()} } "
            f"duplicates={dict(duplicates)} logins={mock.counters.logins} "
            f"40362={mock.counters.errors.get(40362, 0)} requests="
            f"{sum(mock.counters.requests.values())} seconds={elapsed:.1f}\n"
            f"lists (exact, from zhihu_list items): {completeness_text(lists)}\n"
            f"ledger (crawler status): {status}"
        )
        assert mock.counters.logins == {"tester": 1}
        assert mock.counters.errors.get(40362, 0) == 0
        survivors = "".join(
            (tmp_path / f"node-{i}.log").read_text() for i in range(3) if i != victim
        )
        assert "frontier/reclaimed" in survivors  # the killed node's pages ran elsewhere
        # a killed node may have delivered the items of its leased pages before dying
        assert sum(duplicates.values()) <= 12 * 60, duplicates
        # the ledger misses a killed node's last interval and counts re-run pages twice: its
        # figures are exact in the one-node test below; here 100% where all is served
        for group in ("creator answers", "creator videos"):
            assert re.search(rf"{group} ([0-9,]+) of \1 declared, 100\.0%", status), status
        for group in ("answers", "creator articles", "comments"):
            assert re.search(rf"{group} [0-9,]+ of [0-9,]+ declared, [0-9.]+% \(", status), status
        # (the drift stats are checked on one node below: the killed node's final stats are
        # lost with it, and it may be the one that crawled the search)


# --- one error path each, on a small mock ---------------------------------------------------


def crawl_small(
    mock: ZhihuMock,
    seeds: list[bytes | str],
    *,
    workdir: Path,
    redis_url: str,
    kafka: str,
    topics: str,
    **extra: str,
) -> Counter[str]:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka, **PASSWORD_ENV}
    settings = node_settings(mock, topics, **extra)
    with running_nodes(1, workdir=workdir, env=env, settings=settings, spider="zhihu") as nodes:
        client = redis.Redis.from_url(redis_url)
        client.lpush("zhihu:start_urls", *seeds)
        client.close()
        assert wait_for_exit(nodes, timeout=120) == [0], logs(workdir)
    assert tracebacks(workdir) == [], logs(workdir)
    return stats(workdir)


def small_question(mock: ZhihuMock) -> tuple[str, Expected]:
    question = next(iter(mock.data.questions.values()))
    url = f"{mock.base_url}/question/{question.id}"
    expected = Expected(mock.data, mock.config.variety)
    for aid in question.answer_ids:
        expected.add("answer", aid, url)
    return url, expected


@pytest.fixture
def small_mock(request: pytest.FixtureRequest) -> Iterator[ZhihuMock]:
    with ZhihuMock(MockConfig(**{"data": SMALL, **getattr(request, "param", {})})) as mock:
        yield mock


@pytest.mark.parametrize(
    "small_mock", [{"variety": Variety(field_drift=True, search_drift=True)}], indirect=True
)
def test_shape_drift_is_counted_by_the_field_it_lacks(
    small_mock: ZhihuMock, redis_url: str, kafka_bootstrap: str, zhihu_topics: str, tmp_path: Path
) -> None:
    """Search entries of unknown types are skipped and counted, a wrapped result unwrapped, a
    null where a count was recorded as missing: the stats name each (one node, none lost)."""
    url, _ = small_question(small_mock)
    found = crawl_small(
        small_mock,
        [url, orjson.dumps({"keyword": "Python", "type": "search"})],
        workdir=tmp_path,
        redis_url=redis_url,
        kafka=kafka_bootstrap,
        topics=zhihu_topics,
    )
    for name in ("search/skipped/relevant_query", "search/skipped/roundtable"):
        assert found[f"zhihu/{name}"] >= 1, (name, found)
    assert found["zhihu/search/unwrapped/feed_card"] >= 1, found
    assert found["zhihu/missing_field/content/voteup_count"] >= 1, found
    assert found["zhihu/missing_field/comment/like_count"] >= 1, found
    assert found["zhihu/missing_field/creator/follower_count"] >= 1, found


@pytest.mark.parametrize("small_mock", [{"variety": Variety(child_previews=False)}], indirect=True)
def test_children_are_fetched_when_roots_carry_no_preview_nor_cursor(
    small_mock: ZhihuMock, redis_url: str, kafka_bootstrap: str, zhihu_topics: str, tmp_path: Path
) -> None:
    """Roots declare child_comment_count but embed no children and no next offset (real Zhihu
    in several listings): the children come from child_comment pages, from the first."""
    url, expected = small_question(small_mock)
    children = {c for c in expected.comments if not small_mock.data.comments[c].is_root}
    assert len(children) >= 10  # the small mock has children to lose
    crawl_small(
        small_mock,
        [url],
        workdir=tmp_path,
        redis_url=redis_url,
        kafka=kafka_bootstrap,
        topics=zhihu_topics,
        ZHIHU_CREATORS="False",
    )
    items = read_items(kafka_bootstrap, zhihu_topics, {"zhihu_comment": len(expected.comments)})
    comments = Counter(i["comment_id"] for i in items["zhihu_comment"])
    assert set(comments) == expected.comments
    assert max(comments.values()) == 1  # no child twice (a first page repeats no preview)


@pytest.mark.parametrize("small_mock", [{"verify_signature": lambda *_: False}], indirect=True)
def test_signature_errors_are_counted_and_not_retried(
    small_mock: ZhihuMock, redis_url: str, kafka_bootstrap: str, zhihu_topics: str, tmp_path: Path
) -> None:
    url, _ = small_question(small_mock)
    found = crawl_small(
        small_mock,
        [url],
        workdir=tmp_path,
        redis_url=redis_url,
        kafka=kafka_bootstrap,
        topics=zhihu_topics,
        ZHIHU_SESSIONS="False",
    )
    assert found["zhihu/signer_error/question_answers"] == 1
    assert small_mock.counters.errors[10003] == 1
    assert found["zhihu/d_c0/guest"] == 1  # guest mode: d_c0 from explore, once


@pytest.mark.parametrize("code", [100, 101])
def test_expired_session_logs_in_once_and_goes_on(
    code: int, redis_url: str, kafka_bootstrap: str, zhihu_topics: str, tmp_path: Path
) -> None:
    now = [time.time()]
    config = MockConfig(data=SMALL, session_lifetime=60.0, clock=lambda: now[0])
    with ZhihuMock(config) as mock:
        z_c0 = mock.issue_session("tester") if code == 101 else "2|1:0|not-a-session"
        now[0] += 120  # the issued session is past its lifetime: 101
        put_session(redis_url, z_c0)
        url, expected = small_question(mock)
        found = crawl_small(
            mock,
            [url, orjson.dumps({"keyword": "Python"})],
            workdir=tmp_path,
            redis_url=redis_url,
            kafka=kafka_bootstrap,
            topics=zhihu_topics,
        )
        assert mock.counters.errors[code] >= 1
        assert mock.counters.logins == {"tester": 1}
        assert found["sessions/marked/expired"] >= 1
        items = read_items(kafka_bootstrap, zhihu_topics, {"zhihu_comment": len(expected.comments)})
        # the search seed (search needs a login) adds comments of its results
        assert expected.comments <= {i["comment_id"] for i in items["zhihu_comment"]}


def put_session(redis_url: str, z_c0: str, account: str = "tester", *more: Cookie) -> None:
    async def put() -> None:
        client = AsyncRedis.from_url(redis_url)
        store = RedisSessionStore(client, SessionSettings())
        await store.put(Session("zhihu", account, (Cookie("z_c0", z_c0), *more)), 3600)
        await client.aclose()

    asyncio.run(put())


def test_a_session_without_d_c0_is_signed_with_a_guest_d_c0_whatever_the_other_sessions_hold(
    redis_url: str, kafka_bootstrap: str, zhihu_topics: str, tmp_path: Path
) -> None:
    """The guest d_c0 comes from an explore fetch that carries no session: one that carried
    another account's d_c0 got none, and every request of the account without one failed."""
    accounts = {"with": "pw-1", "without": "pw-2"}
    with ZhihuMock(MockConfig(data=SMALL, accounts=accounts)) as mock:
        put_session(redis_url, mock.issue_session("with"), "with", Cookie("d_c0", "Aknown|1"))
        put_session(redis_url, mock.issue_session("without"), "without")
        url, expected = small_question(mock)
        found = crawl_small(
            mock,
            [url],
            workdir=tmp_path,
            redis_url=redis_url,
            kafka=kafka_bootstrap,
            topics=zhihu_topics,
        )
        assert mock.counters.errors[10003] == 0, found
        assert found["zhihu/d_c0/guest"] == 1
        items = read_items(kafka_bootstrap, zhihu_topics, {"zhihu_comment": len(expected.comments)})
        assert expected.comments <= {i["comment_id"] for i in items["zhihu_comment"]}


CHILDREN_CHALLENGED = {
    "variety": Variety(child_previews=False),
    "challenge_paths": ("/child_comment",),
}


@pytest.mark.parametrize("small_mock", [CHILDREN_CHALLENGED], indirect=True)
def test_a_list_given_up_counts_as_short(
    small_mock: ZhihuMock, redis_url: str, kafka_bootstrap: str, zhihu_topics: str, tmp_path: Path
) -> None:
    """Every child-comment page is challenged and its retries run out: the lists those pages
    began are lost, and were counted nowhere (status said comments 100.0%, no list short); the
    pages had no failure record (`crawler failed` had nothing to retry, an audit)."""
    url, _ = small_question(small_mock)
    found = crawl_small(
        small_mock,
        [url],
        workdir=tmp_path,
        redis_url=redis_url,
        kafka=kafka_bootstrap,
        topics=zhihu_topics,
        ZHIHU_MAX_RETRIES="1",
        ZHIHU_CREATORS="False",
    )
    given_up = found["zhihu/gave_up/challenge"]
    assert given_up > 0
    assert found["zhihu/short_lists/child_comment"] == given_up  # each one's list, short
    assert found["zhihu/shortfall/child_comment"] == found["zhihu/declared/child_comment"]
    # and each page is a failure record, to retry once the challenge is mended: they were done
    assert found["frontier/failed/zhihu/challenge"] == given_up, found


@pytest.mark.parametrize(
    ("small_mock", "penalty"),
    [
        pytest.param({"rate_limit": 4}, "zhihu_40362", id="403", marks=pytest.mark.slow),
        pytest.param({"rate_limit": 4, "rate_limit_status": 429}, "429", id="429"),
    ],
    indirect=["small_mock"],
)
def test_rate_limited_requests_cool_the_site_and_are_retried(
    small_mock: ZhihuMock,
    penalty: str,
    redis_url: str,
    kafka_bootstrap: str,
    zhihu_topics: str,
    tmp_path: Path,
) -> None:
    """Each 40362 pauses the site once: as code 40362, or as a 429 (a status the politeness
    middleware penalizes itself; a second pause for its code doubled every cooldown)."""
    url, expected = small_question(small_mock)
    found = crawl_small(
        small_mock,
        [url],
        workdir=tmp_path,
        redis_url=redis_url,
        kafka=kafka_bootstrap,
        topics=zhihu_topics,
        POLITENESS_RATE="40",
        POLITENESS_BURST="10",
        POLITENESS_COOLDOWN="0.5",
        POLITENESS_MAX_COOLDOWN="1",
        SESSIONS_COOLDOWN="0.2",
        SESSIONS_MAX_STRIKES="1000",
        SESSIONS_MAX_TRIES="1",
        ZHIHU_MAX_RETRIES="100",
    )
    assert small_mock.counters.errors[40362] >= 1
    assert found[f"politeness/penalty/{penalty}"] >= 1
    penalties = sum(v for k, v in found.items() if k.startswith("politeness/penalty/"))
    assert penalties == found[f"politeness/penalty/{penalty}"], found
    assert found["sessions/marked/risky"] >= 1
    items = read_items(kafka_bootstrap, zhihu_topics, {"zhihu_comment": len(expected.comments)})
    assert {i["comment_id"] for i in items["zhihu_comment"]} == expected.comments
    assert {(i["content_id"]) for i in items["zhihu_content"]} == {c[1] for c in expected.contents}


@pytest.mark.parametrize(
    ("small_mock", "browser"),
    [
        pytest.param(
            {"challenge_paths": (r"/answers\?",), "challenge_limit": 2},
            {},
            id="browser_off",
            marks=pytest.mark.slow,
        ),
        pytest.param(
            {"challenge_paths": (r"/answers\?",), "challenge_limit": 2},
            {"ZHIHU_CHALLENGE_BROWSER": "True", "BROWSER_EXECUTABLE": "/nonexistent/chromium"},
            id="no_browser",
        ),
    ],
    indirect=["small_mock"],
)
def test_challenge_pages_are_retried_later(
    small_mock: ZhihuMock,
    browser: dict[str, str],
    redis_url: str,
    kafka_bootstrap: str,
    zhihu_topics: str,
    tmp_path: Path,
) -> None:
    url, expected = small_question(small_mock)
    found = crawl_small(
        small_mock,
        [url],
        workdir=tmp_path,
        redis_url=redis_url,
        kafka=kafka_bootstrap,
        topics=zhihu_topics,
        ZHIHU_COMMENTS="False",
        **browser,
    )
    # not solved: retried until the site relents
    assert small_mock.counters.challenges == 2
    assert small_mock.counters.challenges_solved == 0
    assert found["zhihu/challenge/question_answers"] == 2
    assert found["zhihu/retry/challenge"] == 2
    assert found["zhihu/challenge/failed/no_browser"] == (2 if browser else 0)
    assert [k for k in found if k.startswith("zhihu/api_error/")] == []  # no API answer
    items = read_items(kafka_bootstrap, zhihu_topics, {"zhihu_content": len(expected.contents)})
    assert {i["content_id"] for i in items["zhihu_content"]} == {c[1] for c in expected.contents}


TWO_QUESTIONS = dataclasses.replace(
    SMALL, questions=(QuestionSpec(12, 60), QuestionSpec(12, 60)), articles=0, zvideos=0
)


@pytest.mark.parametrize(
    "small_mock", [{"data": TWO_QUESTIONS, "challenge_paths": (r"/comment_v5/",)}], indirect=True
)
def test_two_nodes_solve_a_challenge_once_in_chromium(
    small_mock: ZhihuMock, redis_url: str, kafka_bootstrap: str, zhihu_topics: str, tmp_path: Path
) -> None:
    """Every comment list is challenged until a __zse_ck is solved. Each node takes one question
    (seeds one at a time), so both send comment requests at once and both are challenged while
    one node solves in Chromium (launching it alone takes longer than those requests)."""
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")
    expected = Expected(small_mock.data)
    seeds = [f"{small_mock.base_url}/question/{qid}" for qid in small_mock.data.questions]
    for seed, question in zip(seeds, small_mock.data.questions.values(), strict=True):
        for aid in question.answer_ids:
            expected.add("answer", aid, seed)
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap, **PASSWORD_ENV}
    settings = node_settings(
        small_mock,
        zhihu_topics,
        SEEDS_BATCH_SIZE="1",
        ZHIHU_CREATORS="False",
        ZHIHU_CHALLENGE_BROWSER="True",
        ZHIHU_CHALLENGE_TIMEOUT="20",
    )
    started = time.monotonic()
    with running_nodes(2, workdir=tmp_path, env=env, settings=settings, spider="zhihu") as nodes:
        for index in range(2):
            assert wait_for_log(tmp_path / f"node-{index}.log", "Reading seeds", 60), logs(tmp_path)
        client = redis.Redis.from_url(redis_url)
        client.lpush("zhihu:start_urls", *seeds)
        client.close()
        assert wait_for_exit(nodes, timeout=120) == [0, 0], logs(tmp_path)
    assert tracebacks(tmp_path) == [], logs(tmp_path)
    wanted = {"zhihu_content": len(expected.contents), "zhihu_comment": len(expected.comments)}
    items = read_items(kafka_bootstrap, zhihu_topics, wanted)
    elapsed = time.monotonic() - started
    per_node = [stats(tmp_path, f"node-{index}.log") for index in range(2)]
    found = sum(per_node, Counter[str]())
    challenged = found["zhihu/challenge/root_comment"] + found["zhihu/challenge/child_comment"]
    solved, shared = found["zhihu/challenge/solved"], found["zhihu/challenge/shared"]
    print(
        f"challenges={small_mock.counters.challenges} solved={solved} "
        f"shared per node={[n['zhihu/challenge/shared'] for n in per_node]} seconds={elapsed:.1f}"
    )
    assert {i["content_id"] for i in items["zhihu_content"]} == {c[1] for c in expected.contents}
    assert {i["comment_id"] for i in items["zhihu_comment"]} == expected.comments
    assert small_mock.counters.challenges_solved == 1  # one __zse_ck for the cluster
    assert solved == 1
    assert all(n["zhihu/challenge/solved"] + n["zhihu/challenge/shared"] for n in per_node)
    # every challenged response was solved or found solved, then retried; the browser's page
    # was one more challenge
    assert solved + shared == found["zhihu/retry/challenge"] == challenged
    assert small_mock.counters.challenges == challenged + 1
    assert not [name for name in found if name.startswith("zhihu/challenge/failed")]


def test_not_found_and_invalid_seeds(
    small_mock: ZhihuMock, redis_url: str, kafka_bootstrap: str, zhihu_topics: str, tmp_path: Path
) -> None:
    base = small_mock.base_url
    seeds: list[bytes | str] = [
        f"{base}/question/999",
        f"{base}/answer/998",
        f"{base}/topic/1",
        orjson.dumps({"keyword": "x", "sort": "best"}),
    ]
    found = crawl_small(
        small_mock,
        seeds,
        workdir=tmp_path,
        redis_url=redis_url,
        kafka=kafka_bootstrap,
        topics=zhihu_topics,
    )
    assert found["zhihu/not_found/question_answers"] == 1
    assert found["zhihu/not_found/answer_page"] == 1
    assert small_mock.counters.errors[404] == 2  # not retried
    client = redis.Redis.from_url(redis_url)
    invalid = [orjson.loads(raw) for raw in client.lrange("zhihu:start_urls:invalid", 0, -1)]
    client.close()
    assert sorted(r["reason"] for r in invalid) == ["zhihu_search", "zhihu_url"]
