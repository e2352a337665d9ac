"""End to end, one node on a small mock: what the site says of a session (a redirect to sign in
or to its soft-block page) and what an operator does to one mid-crawl (an import again)."""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path

from redis.asyncio import Redis as AsyncRedis

from crawler.sessions import RedisSessionStore, Session, SessionSettings
from crawler.sessions.providers import CHROMIUM
from tests.services import unavailable
from tests.test_zhihu_crawl import (
    SMALL,
    crawl_small,
    put_session,
    read_items,
    small_question,
    zhihu_topics,
)
from tests.zhihu_mock import MockConfig, ZhihuMock
from tests.zhihu_mock.messages import Request

__all__ = ["zhihu_topics"]  # the fixture, for this module's tests


def stored_session(redis_url: str, account: str = "tester") -> Session | None:
    async def get() -> Session | None:
        client = AsyncRedis.from_url(redis_url)
        try:
            return await RedisSessionStore(client, SessionSettings()).get("zhihu", account)
        finally:
            await client.aclose()

    return asyncio.run(get())


def test_a_session_imported_again_without_d_c0_gets_the_nodes_d_c0_back(
    redis_url: str, kafka_bootstrap: str, zhihu_topics: str, tmp_path: Path
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
        found = crawl_small(
            mock,
            [url],
            workdir=tmp_path,
            redis_url=redis_url,
            kafka=kafka_bootstrap,
            topics=zhihu_topics,
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
