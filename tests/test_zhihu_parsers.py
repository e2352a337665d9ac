"""Zhihu seeds, parsers, signer, privacy and settings against the mock's own payloads."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from itemadapter import ItemAdapter
from scrapy.settings import Settings

from crawler.frontier.seeds import InvalidSeed, Seed
from crawler.zhihu.errors import Problem, classify
from crawler.zhihu.items import Author
from crawler.zhihu.parsers import Context, comment_item, content_item, creator_item
from crawler.zhihu.payloads import ParseError, html_to_text, list_page, page_entities
from crawler.zhihu.privacy import Privacy, shared_privacy_key
from crawler.zhihu.settings import ZhihuSettings
from crawler.zhihu.signer import Zse96Signer, signature_input, signed_digest
from crawler.zhihu.urls import (
    DEFAULT_ENDPOINTS,
    Endpoints,
    SearchSeed,
    Target,
    parse_zhihu_seed,
    recognize,
)
from settings import base
from tests.zhihu_mock import DataConfig, MockConfig, QuestionSpec, ZhihuMock
from tests.zhihu_mock.messages import Request as MockRequest
from tests.zhihu_mock.messages import Response as MockResponse
from tests.zhihu_mock.objects import ANONYMOUS_AVATAR
from tests.zhihu_mock.records import MockData
from tests.zhihu_mock.text import excerpt_of

BASE = "http://zhihu.test"
HOSTS = frozenset({"www.zhihu.com", "zhihu.com", "zhuanlan.zhihu.com"})
D_C0 = "AMock_d_c0_value|1700000000"
SMALL = DataConfig(
    seed=11,
    questions=(QuestionSpec(30, 200),),
    people=10,
    articles=4,
    article_comments=20,
    zvideos=2,
    zvideo_comments=6,
)


def plain(markup: str) -> str:
    """The expected text of mock HTML, computed independently of ``html_to_text``."""
    paragraphs = re.findall(r"<p[^>]*>(.*?)</p>", markup) or [markup]
    return "\n".join(
        re.sub(r"<[^>]+>", "", p).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        for p in paragraphs
    )


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("https://www.zhihu.com/question/123", Target("question", "123")),
        ("https://www.zhihu.com/question/123/?utm_source=x#a", Target("question", "123")),
        (
            "https://www.zhihu.com/question/123/answer/456?utm_psn=1",
            Target("answer", "456", question_id="123"),
        ),
        ("https://www.zhihu.com/answer/456", Target("answer", "456")),
        ("https://zhuanlan.zhihu.com/p/789?share=1", Target("article", "789")),
        ("https://www.zhihu.com/people/some-one.2", Target("people", "some-one.2")),
        ("https://zhihu.com/zvideo/1234567890123456789", Target("zvideo", "1234567890123456789")),
    ],
)
def test_seed_urls_are_recognized(url: str, target: Target) -> None:
    seed = parse_zhihu_seed(url.encode(), max_bytes=1000)
    assert isinstance(seed, Seed)
    assert recognize(seed.url, HOSTS) == target


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://www.zhihu.com/topic/19550517", "zhihu_url"),
        ("https://www.zhihu.com/question/abc", "zhihu_url"),
        # digits of another script: Zhihu's ids are ASCII (it was fetched, and a 404)
        ("https://www.zhihu.com/question/１２３", "zhihu_url"),
        ("https://www.zhihu.com/p/١٢٣", "zhihu_url"),
        ("https://www.zhihu.com/", "zhihu_url"),
        ("https://example.com/question/123", "zhihu_host"),
    ],
)
def test_bad_seed_urls_are_rejected_with_a_reason(url: str, reason: str) -> None:
    with pytest.raises(InvalidSeed) as caught:
        recognize(url, HOSTS)
    assert caught.value.reason == reason


def test_search_seeds() -> None:
    raw = orjson.dumps({"keyword": " 咖啡 ", "type": "search", "sort": "created_time"})
    assert parse_zhihu_seed(raw, max_bytes=1000) == SearchSeed("咖啡", sort="created_time")
    full = {"keyword": "Python", "time_interval": "a_week", "vertical": "answer", "priority": 3}
    seed = parse_zhihu_seed(orjson.dumps(full), max_bytes=1000)
    assert seed == SearchSeed("Python", "", "a_week", "answer", 3)
    with_url = orjson.dumps({"url": "https://www.zhihu.com/question/1", "meta": {"a": 1}})
    assert isinstance(parse_zhihu_seed(with_url, max_bytes=1000), Seed)


@pytest.mark.parametrize(
    ("payload", "reason", "message"),
    [
        ({"keyword": "", "type": "search"}, "zhihu_search", "keyword"),
        ({"keyword": "x", "type": "topic"}, "zhihu_search", "'topic'"),
        ({"keyword": "x", "sort": "best"}, "zhihu_search", "sort='best'"),
        ({"keyword": "x", "time_interval": 7}, "zhihu_search", "time_interval=7"),
        ({"keyword": "x", "colour": "red"}, "zhihu_search", "colour"),
        ({"type": "search"}, "zhihu_search", "keyword"),
        ({"meta": {}}, "url", "no url"),
    ],
)
def test_bad_search_seeds_are_rejected(payload: dict[str, Any], reason: str, message: str) -> None:
    with pytest.raises(InvalidSeed) as caught:
        parse_zhihu_seed(orjson.dumps(payload), max_bytes=1000)
    assert caught.value.reason == reason
    assert message in str(caught.value)


def test_oversized_search_seed_is_too_large() -> None:
    with pytest.raises(InvalidSeed) as caught:
        parse_zhihu_seed(orjson.dumps({"keyword": "x" * 100}), max_bytes=50)
    assert caught.value.reason == "too_large"


def settings(**overrides: Any) -> Settings:
    values = Settings({k: v for k, v in vars(base).items() if k.startswith("ZHIHU_")})
    values.setdict({"ZHIHU_PRIVACY_KEY": "k", **overrides}, priority="cmdline")
    return values


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ZHIHU_MAX_ANSWERS": "-1"}, "ZHIHU_MAX_ANSWERS=-1 must be >= 0"),
        ({"ZHIHU_MAX_COMMENTS": "many"}, "ZHIHU_MAX_COMMENTS='many' is not an integer"),
        # Scrapy's getint read 2.7 as 2 and True as 1, without a word (an audit)
        ({"ZHIHU_PAGE_SIZE": 2.7}, "ZHIHU_PAGE_SIZE=2.7 is not an integer"),
        ({"ZHIHU_MAX_RETRIES": True}, "ZHIHU_MAX_RETRIES=True is not an integer"),
        ({"ZHIHU_API_URL": "ftp://x"}, "ZHIHU_API_URL='ftp://x' must be an http(s) URL"),
        ({"ZHIHU_ANSWER_SORT": "best"}, "ZHIHU_ANSWER_SORT='best' must be one of"),
        ({"ZHIHU_ENDPOINTS": {"nope": "x"}}, "ZHIHU_ENDPOINTS['nope']='x': unknown endpoint"),
        ({"ZHIHU_ENDPOINTS": {"member": "{api}/m/{uid}"}}, "ZHIHU_ENDPOINTS['member']="),
        ({"ZHIHU_PASSWORD_ENV": "PW"}, "ZHIHU_PASSWORD_ENV='PW' must contain {account}"),
        ({"ZHIHU_CHALLENGE_TIMEOUT": "0"}, "ZHIHU_CHALLENGE_TIMEOUT=0.0 must be > 0"),
        (
            {"ZHIHU_CHALLENGE_TIMEOUT": "soon"},
            "ZHIHU_CHALLENGE_TIMEOUT='soon' is not a number",
        ),
        ({"ZHIHU_CHALLENGE_BROWSER": "True"}, "BROWSER_EXECUTABLE='' must name the Chromium"),
    ],
)
def test_bad_settings_name_the_setting(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ZhihuSettings.from_settings(settings(**overrides))


def test_whole_numbers_are_read_however_written() -> None:
    """As every integer setting: "3.0" failed the start ("is not a valid int")."""
    config = ZhihuSettings.from_settings(settings(ZHIHU_PAGE_SIZE="10.0", ZHIHU_MAX_ANSWERS=3.0))
    assert (config.page_size, config.max_answers) == (10, 3)


def test_endpoint_templates_follow_the_base_urls() -> None:
    config = ZhihuSettings.from_settings(
        settings(ZHIHU_API_URL="http://127.0.0.1:9/api/v4", ZHIHU_PRIVACY="False")
    )
    assert config.endpoints.url("member", **{"url_token": "a b"}) == (
        "http://127.0.0.1:9/api/v4/members/a%20b?include="
        + DEFAULT_ENDPOINTS["member"].split("include=")[1]
    )
    assert "127.0.0.1:9" in config.seed_hosts
    assert (
        config.endpoints.url(
            "search", keyword="机器 学习", limit=20, time_interval="", sort="", vertical=""
        ).count("%E6%9C%BA")
        == 1
    )


# --- against the mock -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def mock() -> Iterator[ZhihuMock]:
    def exact(path_with_query: str, d_c0: str, value: str) -> bool:
        expected = hashlib.md5(signature_input("101_3_3.0", path_with_query, d_c0).encode())
        return signed_digest(value) == expected.hexdigest()

    with ZhihuMock(MockConfig(data=SMALL, verify_signature=exact)) as server:
        yield server


def fetch(mock: ZhihuMock, target: str, *, login: bool = True) -> MockResponse:
    """One signed request through the mock's rules (no socket)."""
    cookies = {"d_c0": D_C0}
    if login:
        cookies["z_c0"] = mock.issue_session("tester")
    signer = Zse96Signer()
    headers = {"x-zse-93": signer.version, "x-zse-96": signer.sign(target, D_C0)}
    return mock.handle(MockRequest("GET", target, headers, cookies, base_url=BASE))


def body(mock: ZhihuMock, target: str) -> Any:
    response = fetch(mock, target)
    assert response.status == 200, response.body[:300]
    return orjson.loads(response.body)


def context(privacy: Privacy | None = None, missing: list[str] | None = None) -> Context:
    endpoints = Endpoints.build(DEFAULT_ENDPOINTS, BASE, BASE, BASE + "/api/v4")
    gaps = [] if missing is None else missing
    return Context(
        "seed",
        datetime(2026, 1, 1, tzinfo=UTC),
        privacy or Privacy(False, b""),
        endpoints,
        lambda item, field: gaps.append(f"{item}/{field}"),
    )


def author_json(data: MockData, url_token: str) -> dict[str, str]:
    """An item's author as the mock holds it (privacy off)."""
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
        "link": f"{BASE}/people/{url_token}",
        "avatar_url": person.avatar_url,
    }


def test_the_mock_accepts_the_default_signer(mock: ZhihuMock) -> None:
    qid = next(iter(mock.data.questions))
    assert fetch(mock, f"/api/v4/questions/{qid}").status == 200
    tampered = mock.handle(
        MockRequest(
            "GET",
            f"/api/v4/questions/{qid}?x=1",
            {
                "x-zse-93": "101_3_3.0",
                "x-zse-96": Zse96Signer().sign(f"/api/v4/questions/{qid}", D_C0),
            },
            {"d_c0": D_C0},
            base_url=BASE,
        )
    )
    assert classify(tampered.status, tampered.body).problem is Problem.SIGNATURE  # type: ignore[union-attr]


def expected_answer(data: MockData, aid: str) -> dict[str, Any]:
    answer = data.answers[aid]
    return {
        "content_id": aid,
        "content_type": "answer",
        "question_id": answer.question_id,
        "title": data.questions[answer.question_id].title,
        "excerpt": excerpt_of(answer.content),
        "content_text": plain(answer.content),
        "content_url": f"{BASE}/question/{answer.question_id}/answer/{aid}",
        "created_time": answer.created_time,
        "updated_time": answer.updated_time,
        "voteup_count": answer.voteup_count,
        "comment_count": len(data.comments_of("answer", aid)),
        "author": author_json(data, answer.author),
    }


def fields(item: Any) -> dict[str, Any]:
    found: dict[str, Any] = ItemAdapter(item).asdict()
    del found["source"], found["crawled_at"]
    return found


def test_answers_from_the_api_and_from_pages_match_the_data(mock: ZhihuMock) -> None:
    qid, question = next(iter(mock.data.questions.items()))
    page = list_page(body(mock, f"/api/v4/questions/{qid}/answers?limit=20&offset=0"), "x")
    assert page.next_url is not None and "offset=20" in page.next_url
    for answer in page.data:
        assert fields(content_item(answer, context())) == expected_answer(mock.data, answer["id"])
    aid = question.answer_ids[3]
    html = fetch(mock, f"/answer/{aid}").body.decode()
    entity = page_entities(html)["answers"][aid]
    assert fields(content_item(entity, context())) == expected_answer(mock.data, aid)
    assert (page.is_end, page.totals) == (False, len(question.answer_ids))
    last = list_page(body(mock, f"/api/v4/questions/{qid}/answers?limit=20&offset=20"), "x")
    assert last.is_end  # its next URL is still offered: a spider short of the total may go on
    empty = list_page(body(mock, f"/api/v4/questions/{qid}/answers?limit=20&offset=40"), "x")
    assert (empty.data, empty.next_url) == ([], None)


def test_article_zvideo_member_and_comments_match_the_data(mock: ZhihuMock) -> None:
    data = mock.data
    article = next(iter(data.articles.values()))
    item = content_item(body(mock, f"/api/v4/articles/{article.id}"), context())
    assert (item.title, item.created_time, item.updated_time) == (
        article.title,
        article.created,
        article.updated,
    )
    assert item.content_text == plain(article.content) and item.question_id is None
    zvideo = next(iter(data.zvideos.values()))
    video = content_item(body(mock, f"/api/v4/zvideos/{zvideo.id}"), context())
    assert (video.excerpt, video.created_time, video.content_url) == (
        zvideo.description,
        zvideo.created_at,
        f"{BASE}/zvideo/{zvideo.id}",
    )
    person = next(iter(data.people.values()))
    creator = creator_item(body(mock, f"/api/v4/members/{person.url_token}"), context())
    assert (creator.name, creator.ip_location, creator.follower_count, creator.answer_count) == (
        person.name,
        person.ip_location,
        person.follower_count,
        len(data.authored_by("answer", person.url_token)),
    )
    aid = next(a for a in data.answers if data.roots_of("answer", a))
    root = data.roots_of("answer", aid)[0]
    page = body(mock, f"/api/v4/comment_v5/answers/{aid}/root_comment?order=score&limit=20")
    found = {c["id"]: comment_item(c, "answer", aid, context()) for c in page["data"]}
    parsed = found[root.id]
    assert (parsed.content, parsed.parent_comment_id, parsed.ip_location, parsed.like_count) == (
        plain(root.content),
        None,
        root.ip_info,
        root.like_count,
    )
    assert parsed.sub_comment_count == len(data.children_of(root.id))


def test_search_results_lose_their_highlights(mock: ZhihuMock) -> None:
    keyword = "Python"
    page = body(mock, f"/api/v4/search_v3?t=general&q={keyword}&offset=0&limit=20")
    kinds = {entry["type"] for entry in page["data"]}
    assert "search_result" in kinds
    for entry in page["data"]:
        found = entry["object"]
        if entry["type"] != "search_result" or found["type"] not in ("answer", "article"):
            continue
        item = content_item(found, context(), highlighted=True)
        assert "<em>" not in item.title + item.excerpt
        if found["type"] == "answer":
            assert fields(item) == expected_answer(mock.data, found["id"])


def test_html_to_text() -> None:
    assert html_to_text('<p data-pid="a">C++ &amp; Rust &lt;3</p><p>b<br>c <b>d</b></p>') == (
        "C++ & Rust <3\nb\nc d"
    )
    assert html_to_text("") == ""


def test_privacy_hashes_ids_and_masks_names() -> None:
    privacy = Privacy(True, b"secret")
    person: Author = {
        "id": "abc",
        "url_token": "tok",
        "name": "张三😂",
        "link": "https://www.zhihu.com/people/tok",
        "avatar_url": "https://picx.zhimg.com/v2-a_l.jpg",
    }
    assert privacy.author(person) == {
        "id": hmac.new(b"secret", b"abc", hashlib.sha256).hexdigest(),
        "url_token": "tok",
        "name": "张*",
        "link": "https://www.zhihu.com/people/tok",
        "avatar_url": "",
    }
    assert Privacy(False, b"").author(person) == person
    assert privacy.name("") == "" and privacy.author_id("") == ""


def test_errors_are_classified() -> None:
    challenge = b'<html><meta id="zh-zse-ck" content="001_x"></html>'
    cases = {
        (403, b'{"error": {"code": 10003, "message": "bad"}}'): Problem.SIGNATURE,
        (401, b'{"error": {"code": 101, "message": "expired"}}'): Problem.LOGIN,
        (403, b'{"error": {"code": 40362, "message": "limited"}}'): Problem.RATE_LIMITED,
        (404, b'{"error": {"code": 404, "message": "no"}}'): Problem.NOT_FOUND,
        (403, challenge): Problem.CHALLENGE,
        (500, b"oops"): Problem.OTHER,
    }
    for (status, payload), problem in cases.items():
        found = classify(status, payload)
        assert found is not None and found.problem is problem
    assert classify(200, b'{"data": []}') is None
    assert classify(401, b"<html>401</html>").problem is Problem.LOGIN  # type: ignore[union-attr]
    redirects = {
        b"https://www.zhihu.com/signin?next=%2Fapi%2Fv4%2Fme": Problem.LOGIN,
        b"https://www.zhihu.com/account/unhappy?need_login=false": Problem.BLOCKED,
        b"/question/1/answer/2": None,  # an ordinary redirect: followed
    }
    for location, expected in redirects.items():
        found = classify(302, b"", location)
        assert (found.problem if found else None) is expected, location
    with pytest.raises(ParseError):
        content_item({"type": "question", "id": "1"}, context())


def test_nodes_share_one_generated_privacy_key(redis_url: str) -> None:
    first = shared_privacy_key(redis_url)
    assert len(first) == 64
    assert shared_privacy_key(redis_url) == first  # every node gets the same key
    assert shared_privacy_key("") != shared_privacy_key("")  # standalone: a key per run


@pytest.mark.parametrize(
    "repeated",
    [
        "https://www.zhihu.com/api/v4/questions/1/answers?limit=5&offset=5",
        "http://api.zhihu.test/api/v4/questions/1/answers?limit=5&offset=5",  # http://, a host
        "https://www.zhihu.com/api/v4/questions/1/answers?offset=5&li%6Dit=5",  # order, escapes
    ],
)
def test_a_next_url_that_is_the_page_again_ends_the_list(repeated: str) -> None:
    """Zhihu writes next URLs with http:// and its own host; the spider moves them onto the
    API's: a repeat written so was fetched again, dropped by the dedup, and the list ended
    without being recorded."""
    current = "https://www.zhihu.com/api/v4/questions/1/answers?limit=5&offset=5"
    body = {"data": [{"id": 1}], "paging": {"next": repeated, "is_end": False}}
    assert list_page(body, current).next_url is None
    onward = repeated.replace("offset=5", "offset=10")
    assert list_page({**body, "paging": {"next": onward}}, current).next_url == onward
