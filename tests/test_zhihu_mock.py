"""The local Zhihu mock: shapes of every endpoint, every enforcement, both logins, determinism."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from playwright.async_api import async_playwright

from crawler.sessions.providers import CHROMIUM
from tests.services import unavailable
from tests.zhihu_mock import DataConfig, MockConfig, QuestionSpec, Variety, ZhihuMock, generate
from tests.zhihu_mock.client import MockClient, Reply, format_signature
from tests.zhihu_mock.records import MockData
from tests.zhihu_mock.zse_ck import zse_ck_hash

SMALL = DataConfig(
    seed=7,
    questions=(QuestionSpec(45, 400), QuestionSpec(2, 0)),
    people=12,
    articles=6,
    article_comments=40,
    zvideos=3,
    zvideo_comments=12,
)
TINY = DataConfig(seed=3, questions=(QuestionSpec(3, 10),), people=4, articles=1, zvideos=1)
ID = re.compile(r"^\d{1,19}$")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def mock() -> Iterator[ZhihuMock]:
    with ZhihuMock(MockConfig(data=SMALL)) as server:
        yield server


@pytest.fixture
def client(mock: ZhihuMock) -> MockClient:
    """A logged-in client with a guest d_c0 and signed API calls."""
    logged_in = MockClient(mock.base_url).guest()
    logged_in.cookies["z_c0"] = mock.issue_session("tester")
    return logged_in


def walk(client: MockClient, first: str) -> Iterator[dict[str, Any]]:
    """Every page of a list endpoint, following paging.next until is_end."""
    url, seen = first, set()
    while True:
        reply = client.get(url)
        assert reply.status == 200, reply.text
        page = reply.json()
        yield page
        if page["paging"]["is_end"]:
            return
        url = page["paging"]["next"]
        assert url.startswith(client.base_url)
        assert url not in seen
        seen.add(url)


def initial_data(markup: str) -> dict[str, Any]:
    found = re.search(r'<script id="js-initialData" type="text/json">(.*?)</script>', markup)
    assert found is not None
    loaded: dict[str, Any] = json.loads(found.group(1))
    return loaded


def commented(data: MockData, kind: str, ids: Any) -> list[str]:
    return [i for i in ids if data.comments_of(kind, i)]


# Data ---------------------------------------------------------------------------------------


def test_same_seed_gives_the_same_data() -> None:
    assert generate(SMALL) == generate(SMALL)
    assert generate(SMALL).answers != generate(dataclasses.replace(SMALL, seed=8)).answers


def test_default_data_has_the_big_question() -> None:
    data = generate(DataConfig())
    big = next(iter(data.questions.values()))
    assert len(big.answer_ids) == 500
    comments = [c for aid in big.answer_ids for c in data.comments_of("answer", aid)]
    assert len(comments) == 5000
    assert {c.is_root for c in comments} == {True, False}
    assert all(ID.match(i) for i in [*data.answers, *data.questions, *data.comments])
    assert any(len(i) == 19 for i in data.answers)
    assert any(c.author == "" for c in data.answers.values())  # anonymous answers exist
    text = "".join(a.content for a in data.answers.values())
    assert re.search(r"[\u4e00-\u9fff]", text) and re.search(r"[A-Za-z]", text) and "🔥" in text


# API shapes ---------------------------------------------------------------------------------


def test_question_answers_page_until_is_end(mock: ZhihuMock, client: MockClient) -> None:
    qid, question = next(iter(mock.data.questions.items()))
    include = "data[*].content,voteup_count,comment_count"
    query = urlencode({"include": include, "limit": 20, "offset": 0, "sort_by": "default"})
    pages = list(walk(client, f"/api/v4/questions/{qid}/answers?{query}"))
    assert len(pages) == 3 and pages[0]["paging"]["is_start"] and pages[0]["paging"]["totals"] == 45
    ids = [answer["id"] for page in pages for answer in page["data"]]
    assert ids == list(question.answer_ids)
    feed_pages = list(walk(client, f"/api/v4/questions/{qid}/feeds?limit=7&order=default"))
    cards = [card for page in feed_pages for card in page["data"]]
    assert [c["target"]["id"] for c in cards] == list(question.answer_ids)
    assert {c["type"] for c in cards} == {"question_feed_card"}
    assert [c["position"] for c in cards] == list(range(45))
    assert {"cursor", "skip_count", "target_type"} <= set(cards[0])


def test_the_big_question_pages_all_500_answers() -> None:
    with ZhihuMock(MockConfig(require_login=False)) as big:
        client = MockClient(big.base_url).guest()
        qid, question = next(iter(big.data.questions.items()))
        pages = list(walk(client, f"/api/v4/questions/{qid}/answers?limit=20&offset=0"))
        assert len(pages) == 25
        assert [a["id"] for page in pages for a in page["data"]] == list(question.answer_ids)


def test_public_base_url_prefixes_absolute_urls() -> None:
    with tiny_mock(public_base_url="https://www.zhihu.com") as server:
        client = MockClient(server.base_url).guest()
        qid = next(iter(server.data.questions))
        page = client.get(f"/api/v4/questions/{qid}/answers?limit=1").json()
        assert page["paging"]["next"].startswith(f"https://www.zhihu.com/api/v4/questions/{qid}/")
        assert page["data"][0]["url"].startswith("https://www.zhihu.com/api/v4/answers/")


def test_runs_alone_and_prints_its_base_url() -> None:
    command = [sys.executable, "-m", "tests.zhihu_mock", "--port", "0", "--seed", "2"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            base_url = re.search(r"http://127\.0\.0\.1:\d+", line)
            assert base_url is not None, line
            assert MockClient(base_url.group(0)).get("/explore").status == 200
        finally:
            process.terminate()
            process.wait(timeout=10)
            assert process.stdout is not None
            process.stdout.close()


def test_answer_shape_matches_the_data(mock: ZhihuMock, client: MockClient) -> None:
    aid, answer = next(iter(mock.data.answers.items()))
    shape = client.get(f"/api/v4/answers/{aid}?include=content").json()
    assert shape["id"] == aid and shape["type"] == "answer" and shape["content"] == answer.content
    assert shape["created_time"] == answer.created_time
    assert shape["voteup_count"] == answer.voteup_count
    assert shape["comment_count"] == len(mock.data.comments_of("answer", aid))
    assert shape["question"]["id"] == answer.question_id
    assert isinstance(shape["author"]["gender"], int) and "badge_v2" in shape["author"]
    assert shape["reaction"]["statistics"]["up_vote_count"] == answer.voteup_count
    assert {"pagination_info", "can_comment", "ip_info", "thanks_count"} <= set(shape)


def test_article_zvideo_question_and_member_shapes(mock: ZhihuMock, client: MockClient) -> None:
    article = next(iter(mock.data.articles.values()))
    shape = client.get(f"/api/v4/articles/{article.id}").json()
    assert (shape["title"], shape["created"], shape["updated"]) == (
        article.title,
        article.created,
        article.updated,
    )
    zvideo = next(iter(mock.data.zvideos.values()))
    assert client.get(f"/api/v4/zvideos/{zvideo.id}").json()["title"] == zvideo.title
    qid = next(iter(mock.data.questions))
    assert client.get(f"/api/v4/questions/{qid}").json()["answer_count"] == 45
    person = next(iter(mock.data.people.values()))
    member = client.get(f"/api/v4/members/{person.url_token}").json()
    assert member["answer_count"] == len(mock.data.authored_by("answer", person.url_token))
    assert member["follower_count"] == person.follower_count
    assert member["ip_info"].endswith(person.ip_location)


def test_member_answers_and_articles(mock: ZhihuMock, client: MockClient) -> None:
    for token in mock.data.people:
        for kind, path in (("answer", "answers"), ("article", "articles")):
            pages = walk(client, f"/api/v4/members/{token}/{path}?offset=0&limit=20")
            ids = [item["id"] for page in pages for item in page["data"]]
            assert ids == mock.data.authored_by(kind, token)


def test_comment_cursors_walk_all_root_and_child_comments(
    mock: ZhihuMock, client: MockClient
) -> None:
    data = mock.data
    contents = [
        *(("answers", "answer", a) for a in commented(data, "answer", data.answers)),
        *(("articles", "article", a) for a in commented(data, "article", data.articles)),
        *(("zvideos", "zvideo", z) for z in commented(data, "zvideo", data.zvideos)),
    ]
    assert {kind for kind, _, _ in contents} == {"answers", "articles", "zvideos"}
    children_walked = 0
    for plural, kind, content_id in contents:
        first = f"/api/v4/comment_v5/{plural}/{content_id}/root_comment?order=score&limit=10"
        pages = list(walk(client, first))
        assert pages[0]["counts"]["total_counts"] == len(data.comments_of(kind, content_id))
        assert {"comment_status", "sorter"} <= set(pages[0])
        roots = [c for page in pages for c in page["data"]]
        assert sorted(c["id"] for c in roots) == sorted(
            c.id for c in data.roots_of(kind, content_id)
        )
        assert [c["score"] for c in roots] == sorted((c["score"] for c in roots), reverse=True)
        for root in roots:
            assert root["reply_comment_id"] == "0" and "child_comment_next_offset" in root
            if not root["child_comment_count"]:
                continue
            offset = parse_qs(urlsplit(pages[0]["paging"]["next"]).query)["offset"][0]
            assert re.fullmatch(r"\d+_\d+_0", offset)
            child_first = (
                f"/api/v4/comment_v5/comment/{root['id']}/child_comment?order=sort&limit=10"
            )
            children = [c for page in walk(client, child_first) for c in page["data"]]
            assert [c["id"] for c in children] == [c.id for c in data.children_of(root["id"])]
            assert {c["reply_root_comment_id"] for c in children} == {root["id"]}
            children_walked += len(children)
    assert children_walked == sum(not c.is_root for c in data.comments.values())


def test_child_preview_cursor_continues_after_the_preview(
    mock: ZhihuMock, client: MockClient
) -> None:
    root = next(
        c for c in mock.data.comments.values() if c.is_root and len(mock.data.children_of(c.id)) > 2
    )
    plural = f"{root.content_type}s"
    pages = walk(client, f"/api/v4/comment_v5/{plural}/{root.content_id}/root_comment?limit=20")
    shape = next(c for page in pages for c in page["data"] if c["id"] == root.id)
    assert len(shape["child_comments"]) == 2
    offset = shape["child_comment_next_offset"]
    rest = client.get(
        f"/api/v4/comment_v5/comment/{root.id}/child_comment?order=sort&offset={offset}"
    )
    expected = [c.id for c in mock.data.children_of(root.id)][2:12]
    assert [c["id"] for c in rest.json()["data"]] == expected


def test_variety_switches_change_what_is_served() -> None:
    """Each Variety switch, against the data: totals count what the lists hold back."""
    variety = Variety(
        child_previews=False,
        withheld=frozenset({"question_answers", "member_zvideos", "child_comment"}),
        collapsed_roots=True,
        field_drift=True,
        search_drift=True,
    )
    with ZhihuMock(MockConfig(data=SMALL, variety=variety)) as server:
        data, client = server.data, MockClient(server.base_url).guest()
        client.cookies["z_c0"] = server.issue_session("tester")
        qid, question = next(iter(data.questions.items()))
        pages = list(walk(client, f"/api/v4/questions/{qid}/answers?offset=0&limit=20"))
        assert [a["id"] for page in pages for a in page["data"]] == list(question.answer_ids[:-1])
        assert pages[0]["paging"]["totals"] == len(question.answer_ids)
        token = next(t for t in data.people if data.authored_by("zvideo", t))
        member = client.get(f"/api/v4/members/{token}").json()
        videos = client.get(f"/api/v4/members/{token}/zvideos?offset=0&limit=20").json()
        assert member["zvideo_count"] == videos["paging"]["totals"] == len(videos["data"]) + 1
        kind, cid = next(
            (k, i) for k, i in (("answer", a) for a in data.answers) if len(data.roots_of(k, i)) > 2
        )
        roots = [
            c
            for page in walk(client, f"/api/v4/comment_v5/{kind}s/{cid}/root_comment?limit=20")
            for c in page["data"]
        ]
        first = client.get(f"/api/v4/comment_v5/{kind}s/{cid}/root_comment?limit=20").json()
        assert first["counts"]["collapsed_counts"] == 1
        assert first["paging"]["totals"] == len(roots) + 1 == len(data.roots_of(kind, cid))
        hidden = variety.collapsed(data.roots_of(kind, cid))
        assert hidden is not None and hidden.id not in {r["id"] for r in roots}
        for root in roots:
            assert root["child_comments"] == [] and root["child_comment_next_offset"] is None
            children = data.children_of(root["id"])
            assert root["child_comment_count"] == len(children)
            if children:
                path = f"/api/v4/comment_v5/comment/{root['id']}/child_comment?limit=20"
                served = [c["id"] for page in walk(client, path) for c in page["data"]]
                assert served == [c.id for c in children[:-1]]
        drifted = [r for r in roots if variety.drifted(r["id"])]
        assert all("like_count" not in r for r in drifted)
        search = client.get("/api/v4/search_v3?t=general&q=Python&offset=0&limit=20").json()
        rest = client.get("/api/v4/search_v3?t=general&q=Python&offset=20&limit=20").json()
        entries = search["data"] + rest["data"]
        assert {"relevant_query"} <= {e["type"] for e in entries}
        objects = [e["object"] for e in entries if e["type"] == "search_result"]
        assert {"roundtable", "feed_card"} <= {o["type"] for o in objects}
        assert sum(o.get("type") == "answer" and "id" not in o for o in objects) == 1


def test_search_mixes_types_and_pages_to_an_empty_next(mock: ZhihuMock, client: MockClient) -> None:
    for keyword, entries in mock.data.search.items():
        query = urlencode({"t": "general", "q": keyword, "correction": 1, "offset": 0, "limit": 7})
        pages = list(walk(client, f"/api/v4/search_v3?{query}&lc_idx=0"))
        assert pages[-1]["paging"]["next"] == ""
        items = [item for page in pages for item in page["data"]]
        assert [i["id"] for i in items] == [e.id for e in entries]
        results = [i for i in items if i["type"] in ("search_result", "zvideo")]
        kept = [e for e in entries if e.kind == "search_result"]
        assert [r["object"]["type"] for r in results] == [e.object_type for e in kept]
        assert all(r["object"]["type"] == "zvideo" for r in results if r["type"] == "zvideo")
        assert {"koc_box", "knowledge_ad"} <= {i["type"] for i in items}
        assert all(f"<em>{keyword}</em>" in r["highlight"]["title"] for r in results[:1])
        if len(pages) > 1:
            next_query = parse_qs(urlsplit(pages[0]["paging"]["next"]).query)
            assert {"offset", "lc_idx", "search_hash_id"} <= set(next_query)
        assert {"hit_labels", "search_action_info", "strategy_res_list"} <= set(pages[0])
    types = {e.object_type for es in mock.data.search.values() for e in es if e.object_type}
    assert types == {"answer", "article", "question", "zvideo", "people"}
    served = {
        i["type"]
        for keyword in mock.data.search
        for page in walk(client, f"/api/v4/search_v3?{urlencode({'q': keyword, 'limit': 7})}")
        for i in page["data"]
    }
    assert "zvideo" in served  # videos as entries of their own type, as the site answers some


# HTML pages ---------------------------------------------------------------------------------


def test_html_pages_embed_camel_case_initial_data(mock: ZhihuMock) -> None:
    browser = MockClient(mock.base_url, sign=False)
    data = mock.data
    qid, question = next(iter(data.questions.items()))
    aid = question.answer_ids[3]
    article, zvideo = next(iter(data.articles.values())), next(iter(data.zvideos.values()))
    person = next(iter(data.people.values()))
    checks = [
        (f"/question/{qid}", "questions", qid, "answerCount"),
        (f"/question/{qid}/answer/{aid}", "answers", aid, "voteupCount"),
        (f"/answer/{aid}", "answers", aid, "createdTime"),
        (f"/p/{article.id}", "articles", article.id, "voteupCount"),
        (f"/zvideo/{zvideo.id}", "zvideos", zvideo.id, "playCount"),
        (f"/people/{person.url_token}", "users", person.url_token, "followerCount"),
    ]
    for path, kind, key, field in checks:
        reply = browser.get(path)
        assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/html")
        entity = initial_data(reply.text)["initialState"]["entities"][kind][key]
        assert field in entity and not any("_" in name for name in entity)
    state = initial_data(browser.get(f"/question/{qid}").text)["initialState"]
    assert state["question"]["answers"][qid]["ids"] == list(question.answer_ids[:5])
    assert browser.get(f"/question/{qid}/answer/{next(iter(data.articles))}").status == 404


def test_explore_sets_a_guest_d_c0(mock: ZhihuMock) -> None:
    browser = MockClient(mock.base_url)
    assert browser.get("/explore").status == 200
    assert re.fullmatch(r"A[\w-]+\|\d+", browser.cookies["d_c0"])
    assert "Set-Cookie" not in browser.get("/explore").headers  # already has one


# Enforcement --------------------------------------------------------------------------------


def tiny_mock(**config: Any) -> ZhihuMock:
    return ZhihuMock(MockConfig(data=TINY, **config))


def test_signature_and_d_c0_are_required() -> None:
    with tiny_mock() as server:
        path = f"/api/v4/answers/{next(iter(server.data.answers))}"
        assert MockClient(server.base_url).get(path).status == 403  # no d_c0 to sign with
        reply = MockClient(server.base_url, sign=False).guest().get(path)
        assert reply.status == 403
        assert reply.json() == {
            "error": {"code": 10003, "message": "请求参数异常，请升级客户端后重试"}
        }
        signed = MockClient(server.base_url).guest()
        assert signed.get(path).status == 200
        for version, value in (
            ("101_3_3.0", "2.0_short"),
            ("101_3_3.0", "1.0_" + "A" * 64),
            ("101_3_2.0", "2.0_" + "A" * 64),
        ):
            reply = signed.get(path, {"x-zse-93": version, "x-zse-96": value})
            assert (reply.status, reply.json()["error"]["code"]) == (403, 10003)
        assert server.counters.errors[10003] == 5
        assert server.counters.requests["answer"] == 6


def test_a_plugged_verifier_sees_the_exact_path_and_d_c0() -> None:
    seen: list[tuple[str, str]] = []

    def exact(path_with_query: str, d_c0: str, value: str) -> bool:
        seen.append((path_with_query, d_c0))
        return value == format_signature(path_with_query, d_c0)

    with tiny_mock(verify_signature=exact) as server:
        client = MockClient(server.base_url).guest()
        path = f"/api/v4/answers/{next(iter(server.data.answers))}?include=content%2Cvoteup_count"
        assert client.get(path).status == 200
        assert seen == [(path, client.cookies["d_c0"])]
        wrong = format_signature("/other", client.cookies["d_c0"])
        assert client.get(path, {"x-zse-96": wrong}).status == 403


def test_enforcement_can_be_switched_off() -> None:
    with tiny_mock(require_d_c0=False, require_signature=False, require_login=False) as server:
        anonymous = MockClient(server.base_url)
        token = next(iter(server.data.people))
        assert anonymous.get(f"/api/v4/members/{token}/answers").status == 200
        assert anonymous.get("/api/v4/search_v3?t=general&q=Python").status == 200


def test_logged_in_endpoints_need_z_c0() -> None:
    with tiny_mock() as server:
        guest = MockClient(server.base_url).guest()
        root = next(c for c in server.data.comments.values() if c.is_root)
        token = next(iter(server.data.people))
        for path in (
            f"/api/v4/members/{token}/answers?offset=0&limit=20",
            f"/api/v4/members/{token}/articles?offset=0&limit=20",
            f"/api/v4/comment_v5/comment/{root.id}/child_comment?order=sort&limit=10",
            "/api/v4/search_v3?t=general&q=Python&offset=0&limit=20",
            "/api/v4/me",
        ):
            reply = guest.get(path)
            assert reply.status == 401, path
            assert reply.json()["error"]["code"] == 100
        guest.cookies["z_c0"] = "2|1:0|10:1700000000|4:z_c0|forged"
        assert guest.get("/api/v4/me").json()["error"]["code"] == 100
        assert server.counters.errors[100] == 6


def test_sessions_expire_after_their_lifetime() -> None:
    clock = FakeClock()
    with tiny_mock(session_lifetime=3600, clock=clock) as server:
        client = MockClient(server.base_url).guest()
        client.cookies["z_c0"] = server.issue_session("tester")
        assert client.get("/api/v4/me").json()["name"] == "tester"
        clock.now += 3601
        reply = client.get("/api/v4/search_v3?t=general&q=Python")
        assert (reply.status, reply.json()["error"]["code"]) == (401, 101)
        assert server.counters.errors[101] == 1


def test_rate_limit_answers_40362() -> None:
    clock = FakeClock()
    with tiny_mock(rate_limit=3, clock=clock) as server:
        client = MockClient(server.base_url).guest()
        path = f"/api/v4/answers/{next(iter(server.data.answers))}"
        statuses = [client.get(path).status for _ in range(5)]
        assert statuses == [200, 200, 200, 403, 403]
        assert client.get(path).json()["error"]["code"] == 40362
        assert client.get("/explore").status == 200  # pages are not limited
        clock.now += 1.5
        assert client.get(path).status == 200
        assert server.counters.errors[40362] == 3


def nonce_of(page: str) -> str:
    found = re.search(r'<meta id="zh-zse-ck" content="001_([0-9a-f]+)">', page)
    assert found is not None, page
    return found.group(1)


def challenged(reply: Reply) -> bool:
    return reply.status == 403 and reply.headers["Content-Type"].startswith("text/html")


def test_challenged_paths_answer_the_page_until_a_valid_zse_ck() -> None:
    with tiny_mock(challenge_paths=(r"/api/v4/answers/",)) as server:
        client = MockClient(server.base_url).guest()
        path = f"/api/v4/answers/{next(iter(server.data.answers))}"
        pages = [client.get(path) for _ in range(3)]
        assert all(challenged(page) for page in pages)
        assert client.get(f"/api/v4/articles/{next(iter(server.data.articles))}").status == 200
        nonce, d_c0 = nonce_of(pages[0].text), client.cookies["d_c0"]
        for forged in (
            f"001_{nonce}_00000000",
            f"001_{nonce}_{zse_ck_hash(nonce, d_c0 + 'x')}",  # solved for another d_c0
            f"001_{'0' * 32}_{zse_ck_hash('0' * 32, d_c0)}",  # a nonce never handed out
            f"002_{nonce}_{zse_ck_hash(nonce, d_c0)}",
        ):
            client.cookies["__zse_ck"] = forged
            assert challenged(client.get(path)), forged
        assert server.counters.challenges == 7
        client.cookies["__zse_ck"] = f"001_{nonce}_{zse_ck_hash(nonce, d_c0)}"
        assert client.get(path).json()["id"] == path.rsplit("/", 1)[1]
        assert client.get(path).status == 200
        assert (server.counters.challenges, server.counters.challenges_solved) == (7, 1)


def test_chromium_runs_the_challenge_script() -> None:
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")
    with tiny_mock(challenge_paths=(r"/answers/",)) as server:
        client = MockClient(server.base_url).guest()
        url = f"{server.base_url}/api/v4/answers/{next(iter(server.data.answers))}"

        async def solve() -> str:
            async with async_playwright() as playwright:
                browser = await playwright.chromium.launch(executable_path=CHROMIUM)
                try:
                    context = await browser.new_context()
                    await context.add_cookies(
                        [{"name": "d_c0", "value": client.cookies["d_c0"], "url": url}]
                    )
                    page = await context.new_page()
                    await page.goto(url)
                    async with asyncio.timeout(30):
                        while True:
                            cookies = {c["name"]: c["value"] for c in await context.cookies()}
                            # set, and the reload passed the challenge (unsigned: 10003)
                            if "__zse_ck" in cookies and server.counters.errors[10003] == 1:
                                return cookies["__zse_ck"]
                            await asyncio.sleep(0.05)
                finally:
                    await browser.close()

        value = asyncio.run(solve())
        nonce = value.split("_")[1]
        assert value == f"001_{nonce}_{zse_ck_hash(nonce, client.cookies['d_c0'])}"
        client.cookies["__zse_ck"] = value
        assert client.get(urlsplit(url).path).status == 200
        assert (server.counters.challenges, server.counters.challenges_solved) == (1, 1)


def test_a_solved_zse_ck_expires_after_its_lifetime() -> None:
    clock = FakeClock()
    with tiny_mock(challenge_paths=(r"/answers/",), zse_ck_lifetime=60, clock=clock) as server:
        client = MockClient(server.base_url).guest()
        path = f"/api/v4/answers/{next(iter(server.data.answers))}"
        nonce = nonce_of(client.get(path).text)
        client.cookies["__zse_ck"] = f"001_{nonce}_{zse_ck_hash(nonce, client.cookies['d_c0'])}"
        clock.now += 30  # the lifetime runs from the first request let through, not the page
        assert client.get(path).status == 200
        clock.now += 59
        assert client.get(path).status == 200
        clock.now += 2
        assert challenged(client.get(path))
        assert (server.counters.challenges, server.counters.challenges_solved) == (2, 1)


def test_a_challenge_limit_lets_unsolved_calls_through_after_n_pages() -> None:
    with tiny_mock(challenge_paths=(r"/answers/", r"/articles/"), challenge_limit=2) as server:
        client = MockClient(server.base_url).guest()
        answer = f"/api/v4/answers/{next(iter(server.data.answers))}"
        article = f"/api/v4/articles/{next(iter(server.data.articles))}"
        assert [challenged(client.get(answer)) for _ in range(3)] == [True, True, False]
        assert challenged(client.get(article))  # each pattern counts its own pages
        assert server.counters.challenges == 3


def test_unknown_ids_and_content_without_comments_answer_404(
    mock: ZhihuMock, client: MockClient
) -> None:
    data = mock.data
    silent = next(a for a in data.answers if not data.comments_of("answer", a))
    child = next(c for c in data.comments.values() if not c.is_root)
    for path in (
        "/api/v4/answers/1",
        "/api/v4/articles/2",
        "/api/v4/questions/3/answers?limit=20",
        "/api/v4/members/nobody-here",
        f"/api/v4/comment_v5/answers/{silent}/root_comment?order=score&limit=10",
        f"/api/v4/comment_v5/comment/{child.id}/child_comment",
        "/api/v4/nothing",
        "/question/4",
    ):
        reply = client.get(path)
        assert reply.status == 404, path
        assert "code" in reply.json()["error"]
    talkative = next(a for a in data.answers if data.comments_of("answer", a))
    bad = client.get(f"/api/v4/comment_v5/answers/{talkative}/root_comment?offset=nonsense")
    assert (bad.status, bad.json()["error"]["code"]) == (400, 400)
    assert client.get(f"/api/v4/answers/{talkative}/../x").status == 404


# Login --------------------------------------------------------------------------------------


def test_form_login_sets_z_c0_and_counts_one_login() -> None:
    with tiny_mock(accounts={"tester": "pw-密码", "other": "x"}) as server:
        browser = MockClient(server.base_url).guest()
        page = browser.get("/signin").text
        assert 'action="/api/v3/oauth/sign_in"' in page
        assert 'name="username"' in page and 'type="password"' in page
        form = "application/x-www-form-urlencoded"
        wrong = browser.post("/api/v3/oauth/sign_in", b"username=tester&password=no", form)
        assert wrong.status == 401 and "z_c0" not in browser.cookies
        body = urlencode({"username": "tester", "password": "pw-密码"}).encode()
        reply = browser.post("/api/v3/oauth/sign_in", body, form)
        assert (reply.status, reply.headers["Location"]) == (302, "/")
        assert browser.get("/api/v4/me").json()["name"] == "tester"
        as_json = json.dumps({"username": "other", "password": "x"}).encode()
        api = MockClient(server.base_url).guest()
        assert api.post("/api/v3/oauth/sign_in", as_json, "application/json").json()["login"]
        assert api.get("/api/v4/me").json()["uid"]
        assert server.counters.logins == {"tester": 1, "other": 1}


def test_qr_login_after_the_test_only_scan() -> None:
    clock = FakeClock()
    with tiny_mock(clock=clock) as server:
        browser = MockClient(server.base_url).guest()
        page = browser.get("/signin?qr=1").text
        assert "<canvas" in page and "/api/v3/account/api/login/qrcode" in page
        assert "scan_info" in page
        created = browser.post("/api/v3/account/api/login/qrcode").json()
        assert {"token", "link", "expires_at"} <= set(created)
        token = created["token"]
        image = browser.get(f"/api/v3/account/api/login/qrcode/{token}/image")
        assert image.headers["Content-Type"] == "image/svg+xml" and b"<svg" in image.body
        info = f"/api/v3/account/api/login/qrcode/{token}/scan_info"
        assert browser.get(info).json()["status"] == 0
        assert server.counters.logins == {}
        assert browser.post(f"/__mock__/qr/{token}/scan").status == 200
        assert browser.get(info).json()["status"] == 1 and "z_c0" in browser.cookies
        assert browser.get(info).json()["status"] == 1  # polling again logs in no twice
        assert browser.get("/api/v4/me").json()["name"] == "tester"
        assert server.counters.logins == {"tester": 1}
        late = browser.post("/api/v3/account/api/login/qrcode").json()["token"]
        clock.now += 121
        expired = browser.get(f"/api/v3/account/api/login/qrcode/{late}/scan_info").json()
        assert expired["status"] == 5
