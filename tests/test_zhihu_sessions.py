"""End to end, one node on a small mock: what the site says of a session (a redirect to sign in
or to its soft-block page) and what an operator does to one mid-crawl (an import again)."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Protocol

import orjson
import pytest
from redis.asyncio import Redis as AsyncRedis

from crawler.sessions import RedisSessionStore, Session, SessionSettings
from crawler.sessions.providers import CHROMIUM
from tests.services import unavailable
from tests.test_zhihu_crawl import (
    SMALL,
    Expected,
    crawl_small,
    put_session,
    read_items,
    small_question,
    zhihu_topics,
)
from tests.zhihu_mock import MockConfig, ZhihuMock
from tests.zhihu_mock.messages import Request

__all__ = ["zhihu_topics"]  # the fixture, for this module's tests


class Crawl(Protocol):
    def __call__(self, mock: ZhihuMock, seeds: list[bytes | str], **extra: str) -> Counter[str]:
        """One node crawls ``seeds`` on ``mock`` (``extra``: settings) and exits: its stats."""


@pytest.fixture
def crawl(redis_url: str, kafka_bootstrap: str, zhihu_topics: str, tmp_path: Path) -> Crawl:
    def run(mock: ZhihuMock, seeds: list[bytes | str], **extra: str) -> Counter[str]:
        return crawl_small(
            mock,
            seeds,
            workdir=tmp_path,
            redis_url=redis_url,
            kafka=kafka_bootstrap,
            topics=zhihu_topics,
            **extra,
        )

    return run


def stored_session(redis_url: str, account: str = "tester") -> Session | None:
    async def get() -> Session | None:
        client = AsyncRedis.from_url(redis_url)
        try:
            return await RedisSessionStore(client, SessionSettings()).get("zhihu", account)
        finally:
            await client.aclose()

    return asyncio.run(get())


def test_a_session_imported_again_without_d_c0_gets_the_nodes_d_c0_back(
    crawl: Crawl, redis_url: str, kafka_bootstrap: str, zhihu_topics: str
) -> None:
    """The node fetched a d_c0 for the account, then the operator imported its session again
    with z_c0 alone (`crawler sessions import --cookie-header`), just as comment lists began to
    be challenged: the browser solved with the session's cookies, which had no d_c0, so no
    solve was ever accepted and every comment list gave up."""
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")
    lock = threading.Lock()
    imported: list[str] = []

    def import_again(request: Request) -> None:
        """At the first comment request, before any is answered (the others wait for it)."""
        with lock:
            if "/root_comment" in request.path and not imported:
                put_session(redis_url, mock.issue_session("tester"))  # z_c0 only
                imported.append(request.path)

    config = MockConfig(data=SMALL, challenge_paths=(r"/comment_v5/",), before_answer=import_again)
    with ZhihuMock(config) as mock:
        put_session(redis_url, mock.issue_session("tester"))  # no d_c0: the node fetches one
        url, expected = small_question(mock)
        found = crawl(
            mock,
            [url],
            ZHIHU_CREATORS="False",
            ZHIHU_CHALLENGE_BROWSER="True",
            ZHIHU_CHALLENGE_TIMEOUT="20",
        )
        assert imported, found
        assert [name for name in found if name.startswith("zhihu/challenge/failed")] == []
        assert found["zhihu/gave_up/challenge"] == 0, found
        assert found["zhihu/d_c0/guest"] == 1  # fetched once; the import did not need another
        assert found["zhihu/d_c0/restored"] >= 1, found
        assert mock.counters.challenges_solved == 1
        items = read_items(kafka_bootstrap, zhihu_topics, {"zhihu_comment": len(expected.comments)})
        assert {i["comment_id"] for i in items["zhihu_comment"]} == expected.comments
        session = stored_session(redis_url)
        assert session is not None and "d_c0" in {cookie.name for cookie in session.cookies}


def no_unparsed(found: Counter[str]) -> list[str]:
    return [name for name in found if name.startswith(("zhihu/parse_error/", "zhihu/other_error/"))]


def test_a_redirect_to_the_soft_block_page_rests_the_account_and_is_retried(
    crawl: Crawl, redis_url: str, kafka_bootstrap: str, zhihu_topics: str
) -> None:
    """Three comment calls are answered with a 302 to /account/unhappy?need_login=false: each
    marks the account risky (no session retries here), then the spider re-enqueues it. It was
    an unparsable page: dead-lettered, not retried, the account left healthy."""
    config = MockConfig(data=SMALL, soft_block_paths=(r"/root_comment",), soft_block_limit=3)
    with ZhihuMock(config) as mock:
        put_session(redis_url, mock.issue_session("tester"))
        url, expected = small_question(mock)
        found = crawl(
            mock,
            [url],
            ZHIHU_CREATORS="False",
            SESSIONS_COOLDOWN="0.2",
            SESSIONS_MAX_STRIKES="1000",
            SESSIONS_MAX_TRIES="0",
        )
        assert mock.counters.soft_blocks == 3
        assert no_unparsed(found) == [], found
        assert found["sessions/marked/risky"] == found["sessions/gave_up"] == 3, found
        assert found["zhihu/blocked/root_comment"] == found["zhihu/retry/blocked"] == 3, found
        assert mock.counters.requests["page_unhappy"] == 0  # never followed
        items = read_items(kafka_bootstrap, zhihu_topics, {"zhihu_comment": len(expected.comments)})
        assert {i["comment_id"] for i in items["zhihu_comment"]} == expected.comments


@pytest.mark.parametrize("refusal", ["redirect", "html"])
def test_an_expired_session_refused_without_a_code_logs_in_again(
    refusal: str, crawl: Crawl, redis_url: str, kafka_bootstrap: str, zhihu_topics: str
) -> None:
    """A 302 to the sign-in page, or a bare HTML 401, for an expired z_c0: the session is
    expired (the default rule), one log-in, the crawl goes on. They were a parse error and
    an other_error, and the session stayed healthy."""
    now = [time.time()]
    config = MockConfig(
        data=SMALL, session_lifetime=60.0, clock=lambda: now[0], login_refusal=refusal
    )
    with ZhihuMock(config) as mock:
        put_session(redis_url, mock.issue_session("tester"))
        now[0] += 120  # the issued session is past its lifetime
        url, expected = small_question(mock)
        found = crawl(
            mock,
            [url, orjson.dumps({"keyword": "Python"})],  # search wants a login
        )
        assert mock.counters.errors[101] >= 1
        assert mock.counters.logins == {"tester": 1}
        assert found["sessions/marked/expired"] >= 1, found
        assert no_unparsed(found) == [], found
        assert mock.counters.requests["page_signin"] == 0  # never followed
        items = read_items(kafka_bootstrap, zhihu_topics, {"zhihu_comment": len(expected.comments)})
        assert expected.comments <= {i["comment_id"] for i in items["zhihu_comment"]}


def test_an_answer_seed_follows_the_redirect_to_its_long_url(
    crawl: Crawl, redis_url: str, kafka_bootstrap: str, zhihu_topics: str
) -> None:
    """/answer/{id} answers a 301 to /question/{q}/answer/{id}: followed, the answer crawled
    (the spider saw the 301 itself: a parse error, no item)."""
    with ZhihuMock(MockConfig(data=SMALL, answer_redirect=True)) as mock:
        put_session(redis_url, mock.issue_session("tester"))
        aid = next(iter(mock.data.answers))
        seed = f"{mock.base_url}/answer/{aid}"
        expected = Expected(mock.data)
        expected.add("answer", aid, seed)
        found = crawl(
            mock,
            [seed],
            ZHIHU_CREATORS="False",
        )
        assert no_unparsed(found) == [], found
        assert found["zhihu/items/answer"] == 1, found
        wanted = {"zhihu_content": 1, "zhihu_comment": len(expected.comments)}
        items = read_items(kafka_bootstrap, zhihu_topics, wanted)
        assert [i["content_id"] for i in items["zhihu_content"]] == [aid]
        assert {i["comment_id"] for i in items["zhihu_comment"]} == expected.comments
