"""The middleware and callback cases of the conformance suite, each against standalone Scrapy.

Downloader middlewares that replace the request or the response, retries, redirect
chains, ``dont_filter``, errbacks that yield items and requests, callbacks that yield
nothing, raise mid-generator or yield a request whose meta JSON cannot hold.
"""

from __future__ import annotations

import re
import time
import uuid
from functools import partial
from pathlib import Path

import orjson
import pytest
import redis

from crawler.frontier.keys import FrontierKeys
from crawler.frontier.pending import pending_requests_sync
from tests.cluster import logs, running_nodes, wait_for_exit, wait_for_log
from tests.services import need_chromium
from tests.user_crawl import USER_SETTINGS, ClusterRun, cluster, compare_with_standalone, pipelines
from tests.user_site import UserSite

PAGES = 16
MIDDLEWARES = "tests.userproject.middlewares."


def user_extension(name: str) -> dict[str, str]:
    """The settings that add ``tests.userproject.extensions.<name>``."""
    return {"EXTENSIONS": orjson.dumps({f"tests.userproject.extensions.{name}": 500}).decode()}


def compare(
    tmp_path: Path,
    redis_url: str,
    kafka_bootstrap: str,
    *,
    spider: str = "u_start_urls",
    arguments: dict[str, str] | None = None,
    settings: dict[str, str] | None = None,
    fail_once: bool = False,
    same_hits: bool = True,
    label: str = "",
    stragglers: bool = False,
    nodes: int = 2,
    login: bool = False,
    delay: float = 0.05,
) -> tuple[ClusterRun, list[str], dict[str, int]]:
    cases = " ".join(f"{k}={v}" for k, v in (arguments or {}).items())
    result = compare_with_standalone(
        f"{spider} {label or cases}",
        spider,
        tmp_path,
        redis_url=redis_url,
        kafka_bootstrap=kafka_bootstrap,
        pages=PAGES,
        settings={"ITEM_PIPELINES": pipelines("NewDictPipeline"), **(settings or {})},
        arguments=arguments,
        fail_once=fail_once,
        stragglers=stragglers,
        nodes=nodes,
        login=login,
        delay=delay,
    )
    if same_hits:  # every page as often as standalone Scrapy fetched it
        assert result.hits == result.reference_hits
    return result.run, result.reference, result.hits


@pytest.mark.parametrize("how", ["login", "cookies", "jar"])
def test_a_login_made_on_one_node_holds_on_every_node(
    how: str, tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """Scrapy's cookie jar was each node's own: a spider that logged in (a login page's
    cookie, or one given once with ``cookies=``) had the pages another node leased fetched
    without it, and scraped "Please log in" as content (an audit: 7 of 30 items), silently."""
    arguments = {"how": "cookies"} if how == "cookies" else {"jar": "user1"} if how == "jar" else {}
    run, reference, _ = compare(
        tmp_path,
        redis_url,
        kafka_bootstrap,
        spider="u_login",
        arguments=arguments,
        label=f"logged in ({how})",
        login=True,
        # slow nodes on a slow site (a quarter second a page): the crawl outlasts a node's
        # start, so each leases some of the pages (at 0.05 s, the first node started crawled
        # all 17 before the other leased: CI)
        settings={"CONCURRENT_REQUESTS": "1"},
        delay=0.25,
    )
    assert not [item for item in run.items if "Please log in" in item]
    assert sorted(run.items) == sorted(reference)
    assert len(reference) == PAGES
    scraped = [
        re.search(r"'item_scraped_count': (\d+)", path.read_text())
        for path in sorted(run.workdir.glob("node-*.log"))
    ]
    assert all(scraped), "a node scraped no page: the test shows nothing"


@pytest.mark.parametrize("how", ["login", "js"])
def test_a_login_a_browser_made_on_one_node_holds_in_every_node_s_browser(
    how: str, tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """A rendered page's cookies are its browser context's (Chromium ignores a Cookie header
    set for a request): the login cookie one node's browser got (the login page's Set-Cookie,
    or one its script set) was missing in the other node's browser, which rendered "Please
    log in" as content (an audit: 2 of 10 pages), with no word."""
    need_chromium()
    run, reference, _ = compare(
        tmp_path,
        redis_url,
        kafka_bootstrap,
        spider="u_login",
        arguments={"how": how, "render": "1"},
        label=f"logged in, rendered ({how})",
        login=True,
        settings={"CONCURRENT_REQUESTS": "1", "BROWSER_ENABLED": "True"},
        same_hits=False,  # Chromium asks for /favicon.ico as it likes
    )
    assert not [item for item in run.items if "Please log in" in item]
    assert sorted(run.items) == sorted(reference)
    # a link through a redirect (/r/<n>) is a page of its own: the browser follows it
    assert len(set(reference)) == PAGES
    rendered = [
        re.search(r"'playwright/page_count': (\d+)", path.read_text())
        for path in sorted(run.workdir.glob("node-*.log"))
    ]
    assert all(rendered), "a node rendered no page: the test shows nothing"


def test_seeds_pushed_for_a_plain_spider_are_said_to_be_unread(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis
) -> None:
    """``lpush <spider>:start_urls`` for a plain Spider: the node crawled its start_urls, never
    read the seed, and said nothing (an audit; ``crawler seed`` refuses such a spider)."""
    redis_client.lpush("u_start:start_urls", "http://127.0.0.1:9/")
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {**USER_SETTINGS, "MAX_IDLE_TIME_BEFORE_CLOSE": "1", "FEEDS": "{}"}
    with (
        UserSite(2) as site,
        running_nodes(
            1,
            workdir=tmp_path,
            env=env,
            settings=settings,
            spider="u_start",
            arguments={"site": site.base_url},
        ) as nodes,
    ):
        assert wait_for_exit(nodes, timeout=60) == [0], logs(tmp_path)
    log = (tmp_path / "node-0.log").read_text()
    assert "1 seeds wait in u_start:start_urls, but u_start is not fed from Redis" in log
    assert "'seeds/unread': 1" in log


def test_a_redis_spider_s_start_urls_give_the_items_standalone_scrapy_gives(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """Scrapy makes start URLs ``dont_filter``: a page linking back to one fetches it again.
    The cluster put a Redis-fed spider's start URLs through the shared dedup (made on every
    node, one kept) and the link back was taken for the start page: an item fewer than
    standalone (an audit: 50 of 51). Each is now kept once a crawl under a fingerprint of its
    own, and the page's own fingerprint stays free for the link back."""
    run, reference, _ = compare(
        tmp_path,
        redis_url,
        kafka_bootstrap,
        spider="u_redis_start_urls",
        settings={"MAX_IDLE_TIME_BEFORE_CLOSE": "2"},
    )
    assert sorted(run.items) == sorted(reference)
    start = [item for item in reference if orjson.loads(item).get("page") == 1]
    assert len(start) == 2, reference  # the start page, and the same page linked back to


def test_a_start_that_raises_crawls_what_it_gave_and_the_nodes_close(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """Scrapy logs the error and crawls on with the requests start() gave; so does the cluster,
    whose nodes then close on idle (they waited forever for the start requests to be written)."""
    run, reference, _ = compare(
        tmp_path, redis_url, kafka_bootstrap, spider="u_start", arguments={"fail": "1"}
    )
    assert sorted(run.items) == sorted(reference)
    assert "start() of crawl 'default' raised after 1 start requests" in run.logs()


@pytest.mark.parametrize(
    "middleware", ["ReplaceRequestMiddleware", "NewRequestMiddleware", "NewResponseMiddleware"]
)
def test_downloader_middlewares_that_replace(
    middleware: str, tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    settings = {"DOWNLOADER_MIDDLEWARES": orjson.dumps({MIDDLEWARES + middleware: 500}).decode()}
    run, reference, hits = compare(
        tmp_path,
        redis_url,
        kafka_bootstrap,
        settings=settings,
        label=middleware,
        stragglers=middleware == "NewRequestMiddleware",
    )
    assert sorted(run.items) == sorted(reference)
    assert set(hits) == {f"/p/{i}.html" for i in range(PAGES)}


def test_requests_a_request_scheduled_handler_drops_release_their_parent_page(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """Scrapy drops a request whose ``request_scheduled`` handler raised ``IgnoreRequest`` before
    the scheduler sees it: its parent's lease waited for the idle sweep, so a busy node held
    every page it crawled, and a stop or a crash had them all fetched again."""
    settings = user_extension("DropsRedirectLinks")
    run, reference, hits = compare(
        tmp_path, redis_url, kafka_bootstrap, settings=settings, label="DropsRedirectLinks"
    )
    assert sorted(run.items) == sorted(reference)
    assert set(hits) == {f"/p/{i}.html" for i in range(PAGES)}


def test_a_request_dropped_handler_hears_of_every_duplicate_as_in_standalone_scrapy(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """Scrapy sends ``request_dropped`` for each request its scheduler refuses as seen; the
    cluster sent it only for those a node's own seen-cache dropped, not for those the shared
    dedup dropped in Redis (an audit: 0 against 13 filtered)."""
    settings = user_extension("CountsDroppedRequests")
    run, reference, _ = compare(
        tmp_path, redis_url, kafka_bootstrap, settings=settings, label="CountsDroppedRequests"
    )
    assert sorted(run.items) == sorted(reference)
    standalone = (tmp_path / "standalone" / "standalone.log").read_text()
    for log in (standalone, run.logs()):
        filtered = sum(map(int, re.findall(r"'dupefilter/filtered': (\d+)", log)))
        heard = sum(map(int, re.findall(r"'user/request_dropped/page': (\d+)", log)))
        assert filtered > 0
        assert (heard, "user/request_dropped/other" in log) == (filtered, False), log[-3000:]


def test_a_replacement_the_frontier_cannot_store_fails_its_lease(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """Standalone Scrapy fetches the replacement from memory; the cluster cannot store it. Its
    lease was finished as done (no record, the page silently missing): it fails, with why."""
    settings = {
        "DOWNLOADER_MIDDLEWARES": orjson.dumps(
            {MIDDLEWARES + "UnstorableReplaceMiddleware": 500}
        ).decode()
    }
    run, reference, _ = compare(
        tmp_path,
        redis_url,
        kafka_bootstrap,
        settings=settings,
        same_hits=False,
        nodes=1,
        label="UnstorableReplaceMiddleware",
    )
    assert not any('"page":1,' in item for item in run.items)
    assert any('"page":1,' in item for item in reference)
    client = redis.Redis.from_url(redis_url)
    failed = [orjson.loads(v) for v in client.hvals(FrontierKeys.for_spider("u_start_urls").failed)]
    client.close()
    assert [record["reason"] for record in failed] == ["frontier/unserializable"]
    assert "meta key 'handle' is not JSON serializable" in failed[0]["error"]
    assert failed[0]["request"]["url"].endswith("/p/1.html")
    assert run.ledger["failed"] == 1


def test_retries_and_redirect_chains(tmp_path: Path, redis_url: str, kafka_bootstrap: str) -> None:
    run, reference, hits = compare(
        tmp_path, redis_url, kafka_bootstrap, fail_once=True, label="500 once, then retried"
    )
    assert sorted(run.items) == sorted(reference)
    assert set(hits.values()) == {2}  # a 500, then the retry


@pytest.mark.parametrize(
    "case", ["errback", "nothing", "dont_filter", "engine_copy", "raise", "other_host"]
)
def test_callbacks(case: str, tmp_path: Path, redis_url: str, kafka_bootstrap: str) -> None:
    run, reference, _ = compare(
        tmp_path, redis_url, kafka_bootstrap, spider="u_cases", arguments={"case": case}
    )
    assert sorted(run.items) == sorted(reference)
    if case == "errback":
        assert any('"error":"DownloadConnectionRefusedError"' in item for item in run.items)
        assert any('"again":true' in item for item in run.items)  # the errback's request
    if case == "other_host":
        assert any("//localhost:" in item for item in run.items)
    if case == "raise":
        client = redis.Redis.from_url(redis_url)
        failed = [orjson.loads(v) for v in client.hvals(FrontierKeys.for_spider("u_cases").failed)]
        client.close()
        assert {record["reason"] for record in failed} == {"spider_exception/ValueError"}
        # what an operator reads before retrying, without searching the nodes' logs
        # each failure once (a callback's exception reaches the lease by two ways)
        assert all(
            re.fullmatch(r"the parser broke on page \d+", record["error"]) for record in failed
        ), failed
        assert len(failed) == run.ledger["failed"] == sum(1 for i in range(PAGES) if i % 5 == 4)


def test_requests_a_spider_idle_handler_crawls_are_fetched_on_a_single_node(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """Work in phases: the node stays open for what its spider_idle handler handed to
    engine.crawl() while those requests travel to Redis and back (it closed with them queued)."""
    run, reference, _ = compare(
        tmp_path,
        redis_url,
        kafka_bootstrap,
        spider="u_cases",
        arguments={"case": "idle_more"},
        nodes=1,
    )
    assert sum('"again":true' in item for item in reference) == 5
    assert sorted(run.items) == sorted(reference)
    # with dont_filter every node would fetch them (each runs its idle handlers): said
    assert run.logs().count("A spider_idle handler scheduled <GET") == 1
    assert "'cluster_idle/dont_filter': 5" in run.logs()


@pytest.mark.parametrize("case", ["idle_count", "idle_count_strong"])
def test_a_spider_idle_handler_is_called_when_the_cluster_is_idle_not_when_its_node_is(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str, case: str
) -> None:
    """Scrapy calls spider_idle handlers once the crawl is over; a node called them each time
    it ran dry while others crawled (work in phases ran its phases early, out of order), and
    still did so for a handler connected with ``weak=False``."""
    run, reference, _ = compare(
        tmp_path, redis_url, kafka_bootstrap, spider="u_cases", arguments={"case": case}
    )
    assert sorted(run.items) == sorted(reference)
    assert re.findall(r"spider_idle handler calls: (\d+)", run.logs()) == ["1", "1"]


def test_a_link_to_a_local_file_is_not_read(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """A crawled page cannot make a node read its own files (and send them to Kafka)."""
    run, reference, _ = compare(
        tmp_path, redis_url, kafka_bootstrap, spider="u_cases", arguments={"case": "local_file"}
    )
    assert sorted(run.items) == sorted(reference)
    (refused,) = [item for item in run.items if "file://" in item]
    assert '"error":"NotSupported"' in refused  # the errback's item: the file was not read
    client = redis.Redis.from_url(redis_url)
    failed = [orjson.loads(v) for v in client.hvals(FrontierKeys.for_spider("u_cases").failed)]
    client.close()
    assert [(r["reason"], r["request"]["url"]) for r in failed] == [
        ("download/NotSupported", "file:///etc/hostname")
    ]


def test_close_spider_from_a_callback_closes_its_node_and_records_the_page_failed(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """The page's output ends at the raise while the other nodes crawl on: it was recorded
    done, so links it had not yielded yet were lost without a word and ``crawler status``
    said finished (an audit); now a failure record with the reason, which an operator can
    retry."""
    run, _, _ = compare(
        tmp_path,
        redis_url,
        kafka_bootstrap,
        spider="u_cases",
        arguments={"case": "close"},
        same_hits=False,
    )
    assert any('"page":3' in item for item in run.items)  # its item was delivered
    client = redis.Redis.from_url(redis_url)
    failed = [orjson.loads(v) for v in client.hvals(FrontierKeys.for_spider("u_cases").failed)]
    client.close()
    assert [(r["reason"], r["error"], r["request"]["url"].rsplit("/", 1)[-1]) for r in failed] == [
        ("spider_exception/CloseSpider", "enough", "3.html")
    ]
    assert run.ledger.get("failed", 0) == 1
    log = "".join(p.read_text() for p in (tmp_path / "cluster").glob("node-*.log"))
    assert "Closing spider (enough)" in log


def test_an_item_in_meta_comes_back_as_that_item(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    run, reference, _ = compare(
        tmp_path, redis_url, kafka_bootstrap, spider="u_cases", arguments={"case": "item_meta"}
    )
    # the tuple comes back a list, as from any JSON store, and is warned about
    as_json = [item.replace('"Note","tuple"]', '"Note","list"]') for item in reference]
    assert sorted(run.items) == sorted(as_json)
    assert all('"kinds":["PageItem","Note","list"]' in item for item in run.items)
    log = "".join(p.read_text() for p in (tmp_path / "cluster").glob("node-*.log"))
    assert "holds a tuple" in log and "holds a PageItem" not in log and "a Note" not in log


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("bad_meta", "meta key 'handle' is not JSON serializable"),
        ("cyclic_meta", "meta key 'tree' holds a dict that contains itself"),
        ("item_request", "its class tests.userproject.cases.ItemRequest cannot be rebuilt"),
        ("lambda_callback", "its callback <lambda> is not a method of the spider"),
    ],
)
def test_a_request_json_cannot_hold_fails_its_parent_and_the_node_goes_on(
    case: str, why: str, tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    run, reference, _ = compare(
        tmp_path,
        redis_url,
        kafka_bootstrap,
        spider="u_cases",
        arguments={"case": case},
        same_hits=False,
    )
    # standalone Scrapy crawls the request from memory; the cluster cannot store it
    assert sorted(run.items) == sorted(item for item in reference if "?x" not in item)
    client = redis.Redis.from_url(redis_url)
    failed = [orjson.loads(v) for v in client.hvals(FrontierKeys.for_spider("u_cases").failed)]
    client.close()
    assert [record["reason"] for record in failed] == ["frontier/unserializable"]
    assert why in failed[0]["error"]
    assert failed[0]["request"]["url"].endswith("/p/0.html")
    log = "".join(p.read_text() for p in (tmp_path / "cluster").glob("node-*.log"))
    assert why in log
    assert "Traceback" not in log


def test_a_later_run_says_that_start_raised_in_an_earlier_one(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """The start requests are marked written after start() raised (a node running at the same
    time would only fail alike); a later run, start() fixed, does not run it again and says
    why only what it gave is in the frontier, and what to do."""
    with UserSite(PAGES) as site:
        cluster(
            "u_start",
            site,
            tmp_path / "failing",
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            nodes=1,
            arguments={"fail": "1"},
        )
        env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
        settings = {**USER_SETTINGS, "MAX_IDLE_TIME_BEFORE_CLOSE": "0"}
        arguments = {"site": site.base_url}
        workdir = tmp_path / "fixed"
        with running_nodes(
            1, workdir=workdir, env=env, settings=settings, spider="u_start", arguments=arguments
        ) as nodes:
            assert wait_for_exit(nodes, timeout=60) == [0], logs(workdir)
    log = (workdir / "node-0.log").read_text()
    assert "start() of crawl 'default' raised after 1 start requests in an earlier run" in log
    assert "crawler purge u_start" in log


def test_close_spider_in_start_closes_the_node_and_a_later_run_runs_start(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """``CloseSpider`` from start() is a wish to stop, as from a callback: no error, and the
    start is not marked written (it was, as if start() had failed: no later run crawled)."""
    with UserSite(PAGES) as site:
        one_node = partial(
            cluster, "u_start", site, redis_url=redis_url, kafka_bootstrap=kafka_bootstrap, nodes=1
        )
        closed = one_node(tmp_path / "closed", arguments={"close": "1"})
        assert "'finish_reason': 'start_closed'" in closed.logs()
        assert "] ERROR:" not in closed.logs()
        again = one_node(tmp_path / "again")
    assert len(again.items) == PAGES


def test_a_plain_spider_run_again_on_a_finished_crawl_is_told_what_crawls_it_again(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """The WARNING of a node that starts on a frontier that remembers every page named
    ``crawler seed --recrawl``, which refuses a spider that reads no seeds (an audit)."""
    with UserSite(PAGES) as site:
        one_node = partial(
            cluster, "u_start", site, redis_url=redis_url, kafka_bootstrap=kafka_bootstrap, nodes=1
        )
        assert len(one_node(tmp_path / "first").items) == PAGES
        again = one_node(tmp_path / "again")
    assert again.items == []
    said = re.search(r"'u_start' has nothing queued and remembers (\d+) URLs seen", again.logs())
    assert said is not None and int(said[1]) >= PAGES, again.logs()
    assert "start() runs once a crawl (CRAWLER_CRAWL_ID)" in again.logs()
    assert "To crawl them again: crawler purge u_start\n" in again.logs()
    assert "crawler seed" not in again.logs()
    assert "start() set up" not in again.logs()  # Scrapy's own steps set nothing up


def test_a_node_that_starts_as_its_crawl_ends_says_so_at_info(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, kafka_bootstrap: str
) -> None:
    """A node started beside the writer of a small crawl that was over before it looked
    warned that the crawl had nothing left and to run ``crawler purge`` (an audit: 3 of 23
    two-node runs of 40-page crawls), and that it remembered URLs seen: while another node of
    the crawl runs, it says at INFO that the crawl is done, and which nodes run it."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    settings = {
        **USER_SETTINGS,
        "KAFKA_TOPIC_TEMPLATE": f"user-{uuid.uuid4().hex[:10]}-{{spider}}",
        "MAX_IDLE_TIME_BEFORE_CLOSE": "60",  # the writer stays up, idle, once the crawl is done
    }
    parts = [FrontierKeys.for_spider("u_start")]
    with UserSite(PAGES) as site:
        arguments = {"site": site.base_url}
        run = partial(running_nodes, 1, env=env, spider="u_start", arguments=arguments)
        with run(workdir=tmp_path / "writer", settings=settings) as writer:
            assert wait_for_log(tmp_path / "writer" / "node-0.log", "Wrote ", 60)
            deadline = time.monotonic() + 60
            while sum(pending_requests_sync(redis_client, parts)) and time.monotonic() < deadline:
                time.sleep(0.2)
            late_settings = {**settings, "MAX_IDLE_TIME_BEFORE_CLOSE": "0"}
            per_node = [{"CRAWLER_NODE_ID": "late"}]
            with run(workdir=tmp_path / "late", settings=late_settings, per_node=per_node) as late:
                assert wait_for_exit(late, timeout=60) == [0], logs(tmp_path / "late")
            assert writer[0].poll() is None
    log = (tmp_path / "late" / "node-0.log").read_text()
    assert re.findall(r"\[crawler\.[\w.]+\] WARNING: .*", log) == [], log
    assert (
        "INFO: Crawl 'default' is done (nothing queued or leased; node-0, the node that wrote "
        "its start requests, runs now): this node has nothing to crawl" in log
    ), log
    assert "INFO: The frontier of 'u_start' has nothing queued and remembers" in log, log


def test_nodes_started_together_on_a_crawl_that_ended_a_while_ago_warn(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, kafka_bootstrap: str
) -> None:
    """Two nodes run together on a finished crawl (compose scaled again): each saw the other
    beat and said at INFO that the crawl was done, and none warned that the run crawls nothing
    (a review). What tells a crawl that ended as a node started is that the node that wrote
    its start requests runs: here it is gone."""
    with UserSite(PAGES) as site:
        again = partial(
            cluster, "u_start", site, redis_url=redis_url, kafka_bootstrap=kafka_bootstrap
        )
        assert len(again(tmp_path / "first", nodes=1).items) == PAGES
        (claim,) = redis_client.keys("{u_start}:start:*")
        redis_client.hset(claim, "node", "a-pod-long-gone")  # new pods have new names
        later = again(tmp_path / "later", nodes=2)
    log = later.logs()
    assert log.count("WARNING: Crawl 'default' has nothing left") == 2, log
    assert log.count("WARNING: The frontier of 'u_start' has nothing queued and remembers") == 2


def test_a_node_that_does_not_run_start_says_what_start_set_up_on_the_writer(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """start() runs on the node that writes the start requests only: what it set up on its
    spider (``self.session`` of a login, a ``request_scheduled`` handler) was missing on the
    other nodes without a word (11 of 40 pages failed with an AttributeError, 13 of 40
    requests went unstamped: an audit). They say it, naming where to set it up instead."""
    with UserSite(PAGES) as site:
        one_node = partial(
            cluster,
            "u_start",
            site,
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            nodes=1,
            arguments={"setup": "1"},
        )
        first = one_node(tmp_path / "first")
        other = one_node(tmp_path / "other")
    assert len(first.items) == PAGES
    assert "start() set up" not in first.logs()
    assert (
        "start() set up a handler of request_scheduled, self.session on the node that wrote "
        "this crawl's start requests" in other.logs()
    )
    assert "'start/set_up_elsewhere': 1" in other.logs()


def test_a_crawl_an_earlier_version_started_says_what_it_cannot_tell(
    tmp_path: Path, redis_url: str, redis_client: redis.Redis, kafka_bootstrap: str
) -> None:
    """A node of an earlier version wrote the start requests and recorded nothing of what
    start() set up: a node of this version said nothing and its callbacks failed (an audit of
    a rolling upgrade: 24 AttributeErrors); it says it cannot tell, and where to set it up."""
    with UserSite(PAGES) as site:
        one_node = partial(
            cluster, "u_start", site, redis_url=redis_url, kafka_bootstrap=kafka_bootstrap, nodes=1
        )
        one_node(tmp_path / "first")
        (claim,) = redis_client.keys("{u_start}:start:*")
        redis_client.hdel(claim, "set_up")  # as a node of 317eb68 finishes a claim
        later = one_node(tmp_path / "later")
    assert "start requests recorded nothing of what start() set up" in later.logs()


def test_a_node_with_other_spider_arguments_than_the_start_writer_is_warned(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """start() runs once per crawl, with the arguments of the node that wrote it: a later node
    given others (-a) crawled nothing of its own and said only that start() had run."""
    with UserSite(PAGES) as site:
        one_node = partial(
            cluster, "u_start", site, redis_url=redis_url, kafka_bootstrap=kafka_bootstrap, nodes=1
        )
        one_node(tmp_path / "first")
        other = one_node(tmp_path / "other", arguments={"category": "b"})
    assert "were written by a node whose spider arguments were" in other.logs()
    assert "'category': 'b'" in other.logs()


def test_a_node_whose_spider_has_other_start_urls_than_the_start_writer_is_warned(
    tmp_path: Path, redis_url: str, kafka_bootstrap: str
) -> None:
    """A redeploy that added start URLs resumed the crawl with an INFO line only: its new
    start URLs were never crawled (an audit)."""
    with UserSite(PAGES) as site:
        one_node = partial(
            cluster,
            "u_start_urls",
            site,
            redis_url=redis_url,
            kafka_bootstrap=kafka_bootstrap,
            nodes=1,
        )
        first = one_node(tmp_path / "first")
        again = one_node(tmp_path / "again")
        other = one_node(tmp_path / "other", arguments={"more": "3"})
    assert "other start_urls" not in first.logs() + again.logs()
    assert "whose spider had other start_urls (1 URLs) than this node's (2)" in other.logs()
    # a run of a finished crawl said at INFO only that start() had run, and crawled nothing
    # (an audit: a user re-running `scrapy crawl` as with plain Scrapy got nothing, exit 0)
    nothing_left = "WARNING: Crawl 'default' has nothing left (nothing queued or leased)"
    assert nothing_left not in first.logs()
    assert nothing_left in again.logs()
    assert "crawler purge u_start_urls" in again.logs()
