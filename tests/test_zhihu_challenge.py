"""One ``__zse_ck`` solve per account for the cluster (real Redis); Chromium on the mock's page.

The resolver tests stand in a counting solver for the browser; each "node" has its own Redis
client, store and lease, as separate processes would.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from urllib.parse import urlsplit

import pytest
from redis.asyncio import Redis

from crawler.middlewares.session_http import browser_cookies
from crawler.sessions import Cookie, RedisSessionStore, Session, SessionSettings
from crawler.sessions.providers import CHROMIUM
from crawler.zhihu.challenge import (
    ZSE_CK,
    ChallengeFailed,
    ChallengeLease,
    ChallengeResolver,
    Outcome,
    zse_ck_of,
)
from crawler.zhihu.challenge_browser import BrowserChallengeSolver
from tests.services import unavailable
from tests.zhihu_mock import DataConfig, MockConfig, QuestionSpec, ZhihuMock
from tests.zhihu_mock.client import MockClient

LEASE_KEY = "{zhihu}:zse_ck_lease:tester"
TINY = DataConfig(seed=3, questions=(QuestionSpec(3, 10),), people=4, articles=1, zvideos=1)


class CountingSolver:
    """Takes ``seconds``, then returns ``__zse_ck=v<n>`` (or raises ``fail``); checks the lease."""

    def __init__(self, redis_url: str, seconds: float, fail: str | None = None) -> None:
        self.redis_url = redis_url
        self.seconds = seconds
        self.fail = fail
        self.calls = 0
        self.lease_ttls: list[int] = []

    async def solve(self, url: str, session: Session) -> Cookie:
        self.calls += 1
        client = Redis.from_url(self.redis_url)
        self.lease_ttls.append(await client.pttl(LEASE_KEY))
        await client.aclose()
        await asyncio.sleep(self.seconds)
        if self.fail:
            raise ChallengeFailed(self.fail, "stand-in failure")
        return Cookie(ZSE_CK, f"v{self.calls}")


@asynccontextmanager
async def nodes(
    redis_url: str, solver: CountingSolver, count: int, wait: float = 5.0
) -> AsyncIterator[list[ChallengeResolver]]:
    async with AsyncExitStack() as stack:
        resolvers = []
        for _ in range(count):
            client = Redis.from_url(redis_url)
            stack.push_async_callback(client.aclose)
            store = RedisSessionStore(client, SessionSettings())
            resolvers.append(ChallengeResolver(store, ChallengeLease(client, 20.0), solver, wait))
        yield resolvers


async def put_session(redis_url: str, *cookies: Cookie) -> None:
    client = Redis.from_url(redis_url)
    store = RedisSessionStore(client, SessionSettings())
    await store.put(Session("zhihu", "tester", (Cookie("d_c0", "A1|2"), *cookies)), 3600)
    await client.aclose()


async def stored_zse_ck(redis_url: str) -> str | None:
    client = Redis.from_url(redis_url)
    session = await RedisSessionStore(client, SessionSettings()).get("zhihu", "tester")
    exists = await client.exists(LEASE_KEY)
    await client.aclose()
    assert session is not None and not exists  # the lease is always released
    return zse_ck_of(session.cookies)


async def resolve_all(
    resolvers: Sequence[ChallengeResolver], sent: str | None, stagger: float = 0.0
) -> list[Outcome | str]:
    async def one(index: int, resolver: ChallengeResolver) -> Outcome | str:
        await asyncio.sleep(index * stagger)
        try:
            return await resolver.resolve("zhihu", "tester", "http://zhihu/x", sent)
        except ChallengeFailed as exc:
            return exc.reason

    return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(resolvers))))


def test_one_of_five_nodes_solves_and_the_others_share_its_cookie(redis_url: str) -> None:
    solver = CountingSolver(redis_url, seconds=0.5)

    async def body() -> list[Outcome | str]:
        await put_session(redis_url)
        async with nodes(redis_url, solver, 5) as resolvers:
            return await resolve_all(resolvers, sent=None)

    outcomes = asyncio.run(body())
    assert sorted(outcomes) == sorted([Outcome.SOLVED] + [Outcome.SHARED] * 4)
    assert solver.calls == 1
    assert 10_000 < solver.lease_ttls[0] <= 20_000  # the lease was held while solving
    assert asyncio.run(stored_zse_ck(redis_url)) == "v1"


def test_only_a_request_that_sent_the_current_cookie_solves_again(redis_url: str) -> None:
    solver = CountingSolver(redis_url, seconds=0.0)

    async def body() -> list[Outcome | str]:
        await put_session(redis_url, Cookie(ZSE_CK, "old"))
        async with nodes(redis_url, solver, 1) as (resolver,):
            sent_before = await resolve_all([resolver], sent=None)  # sent before "old" existed
            expired = await resolve_all([resolver], sent="old")  # "old" itself was refused
            return sent_before + expired

    assert asyncio.run(body()) == [Outcome.SHARED, Outcome.SOLVED]
    assert solver.calls == 1
    assert asyncio.run(stored_zse_ck(redis_url)) == "v1"


def test_after_a_failed_solve_waiting_nodes_give_up_without_a_browser_of_their_own(
    redis_url: str,
) -> None:
    solver = CountingSolver(redis_url, seconds=1.0, fail="timeout")

    async def body() -> tuple[list[Outcome | str], list[Outcome | str]]:
        await put_session(redis_url)
        async with nodes(redis_url, solver, 3) as resolvers:
            first = await resolve_all(resolvers, sent=None, stagger=0.25)
            solver.fail = None
            later = await resolve_all(resolvers[:1], sent=None)  # the lease is free again
            return first, later

    first, later = asyncio.run(body())
    assert first == ["timeout", "other_node", "other_node"]
    assert later == [Outcome.SOLVED]
    assert solver.calls == 2
    assert asyncio.run(stored_zse_ck(redis_url)) == "v2"


def test_a_node_waits_at_most_its_wait_for_a_stuck_solve(redis_url: str) -> None:
    solver = CountingSolver(redis_url, seconds=0.0)

    async def body() -> tuple[list[Outcome | str], float]:
        await put_session(redis_url)
        async with nodes(redis_url, solver, 1, wait=0.4) as (resolver,):
            assert isinstance(resolver.lease, ChallengeLease)
            token = await resolver.lease.acquire("zhihu", "tester")  # a node that hangs
            assert token is not None
            started = time.monotonic()
            outcome = await resolve_all([resolver], sent=None)
            elapsed = time.monotonic() - started
            assert await resolver.lease.release("zhihu", "tester", token)
            return outcome, elapsed

    outcome, elapsed = asyncio.run(body())
    assert outcome == ["wait_timeout"]
    assert 0.4 <= elapsed < 2.0
    assert solver.calls == 0


def test_no_session_no_solve(redis_url: str) -> None:
    solver = CountingSolver(redis_url, seconds=0.0)

    async def body() -> list[Outcome | str]:
        async with nodes(redis_url, solver, 1) as resolvers:
            return await resolve_all(resolvers, sent=None)

    assert asyncio.run(body()) == ["no_session"]
    assert solver.calls == 0


# --- Chromium on the mock's challenge page -----------------------------------------------------


def need_chromium() -> None:
    if shutil.which(CHROMIUM) is None:
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")


def solver(timeout: float, executable: str = CHROMIUM) -> BrowserChallengeSolver:
    return BrowserChallengeSolver(executable, timeout, "Mozilla/5.0 test", browser_cookies)


def session_of(client: MockClient, host: str, *extra: Cookie) -> Session:
    cookies = tuple(Cookie(n, v, domain=host) for n, v in client.cookies.items())
    return Session("zhihu", "tester", (*cookies, *extra))


def test_chromium_solves_the_challenge_with_the_sessions_d_c0() -> None:
    need_chromium()
    with ZhihuMock(MockConfig(data=TINY, challenge_paths=(r"/answers/",))) as mock:
        client = MockClient(mock.base_url).guest()
        client.cookies["z_c0"] = mock.issue_session("tester")
        path = f"/api/v4/answers/{next(iter(mock.data.answers))}"
        host = urlsplit(mock.base_url).hostname or ""
        stale = Cookie(ZSE_CK, "001_0_0", domain=host)  # left out: the page starts unsolved
        cookie = asyncio.run(
            solver(20).solve(mock.base_url + path, session_of(client, host, stale))
        )
        assert cookie.name == ZSE_CK and cookie.value != stale.value
        client.cookies[ZSE_CK] = cookie.value
        assert client.get(path).json()["id"] == path.rsplit("/", 1)[1]
        assert (mock.counters.challenges, mock.counters.challenges_solved) == (1, 1)


def test_chromium_failures_have_a_reason() -> None:
    need_chromium()
    with ZhihuMock(MockConfig(data=TINY)) as mock:  # nothing challenged: no cookie ever comes
        client = MockClient(mock.base_url).guest()
        url = f"{mock.base_url}/api/v4/answers/{next(iter(mock.data.answers))}"
        session = session_of(client, urlsplit(url).hostname or "")
        with pytest.raises(ChallengeFailed, match="within 2 s") as caught:
            asyncio.run(solver(2).solve(url, session))
        assert caught.value.reason == "timeout"
        with pytest.raises(ChallengeFailed) as caught:
            asyncio.run(solver(2, "/nonexistent/chromium").solve(url, session))
        assert caught.value.reason == "no_browser"
