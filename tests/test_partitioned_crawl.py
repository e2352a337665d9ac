"""Nodes crawling a frontier split into parts (``FRONTIER_PARTITIONS``): linked local sites
whose pages mostly link to another site's part, a node SIGKILLed mid-crawl, status and purge
over every part, and a node started with another count refused before it takes any work."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis

from crawler.demo.site import Site
from crawler.extensions.ledger_layout import LedgerKeys
from crawler.frontier.keys import frontier_parts
from crawler.frontier.partitions import part_of
from crawler.kafka.reader import read_topic
from crawler.redis_connection import sync_client
from crawler.scope import site_of
from tests.cli_process import crawler_process, ok
from tests.cluster import logs, running_nodes, tracebacks, wait_for_exit, wait_for_log
from tests.faults import FAST_LEASES, assert_nothing_lost, sigkill
from tests.frontier_state import queued

PARTS = 4
PAGES = 60  # per site
SPIDER = "hopper"
TEST_SPIDERS = {"CRAWLER_SETTING_SPIDER_MODULES": "crawler.spiders,tests.spiders"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``crawler <args>`` in a project that has the test spiders."""
    return crawler_process(*args, env=TEST_SPIDERS)


@contextlib.contextmanager
def one_site_per_part(parts: int, pages: int = PAGES, delay: float = 0.05) -> Iterator[list[Site]]:
    """A slow local site in each part of a frontier of ``parts`` parts (their ports decide:
    sites are started until every part has one)."""
    with contextlib.ExitStack() as stack:
        chosen: dict[int, Site] = {}
        while len(chosen) < parts:
            site = stack.enter_context(Site(pages, delay=delay))
            chosen.setdefault(part_of(site_of(site.base_url), parts), site)
        yield [chosen[part] for part in range(parts)]


@pytest.fixture
def sites() -> Iterator[list[Site]]:
    """Slow enough (0.2 s a page, 30 pages/s for 3 nodes) to be looked at mid-crawl."""
    with one_site_per_part(PARTS, delay=0.2) as found:
        yield found


def node_settings(topic_template: str, partitions: int) -> dict[str, str]:
    return {
        **FAST_LEASES,
        "SPIDER_MODULES": "crawler.spiders,tests.spiders",
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "FRONTIER_PARTITIONS": str(partitions),
    }


class MultiSite:
    def __init__(self, sites: list[Site]) -> None:
        self.sites = sites
        self.pages = sum(site.pages for site in sites)

    def all_urls(self) -> set[str]:
        return {url for site in self.sites for url in site.all_urls()}


@pytest.mark.slow
def test_three_nodes_crawl_linked_sites_over_four_parts_and_a_sigkill_loses_nothing(
    redis_url: str,
    redis_client: redis.Redis,
    kafka_bootstrap: str,
    topic_template: str,
    sites: list[Site],
    tmp_path: Path,
) -> None:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    arguments = {"sites": ",".join(site.base_url for site in sites)}
    # few requests in flight per node: most of the frontier waits in the queues, to be seen
    settings = {
        **node_settings(topic_template, PARTS),
        "CONCURRENT_REQUESTS": "2",
        "FRONTIER_PREFETCH": "2",
    }
    with running_nodes(
        3, workdir=tmp_path, env=env, settings=settings, spider=SPIDER, arguments=arguments
    ) as nodes:
        deadline = time.monotonic() + 120
        while sum(sum(site.hits.values()) for site in sites) < PAGES:  # a quarter of the crawl
            assert time.monotonic() < deadline, logs(tmp_path)
            time.sleep(0.05)
        queue = orjson.loads(ok(cli("queue", SPIDER, "--json", "--redis", redis_url)))
        leased = orjson.loads(ok(cli("leases", SPIDER, "--json", "--redis", redis_url)))
        held = sigkill(nodes[0], "node-0", redis_url, SPIDER)
        codes = wait_for_exit(nodes, timeout=240)
    assert codes == [-signal.SIGKILL, 0, 0], logs(tmp_path)
    assert tracebacks(tmp_path) == [], logs(tmp_path)

    topic = topic_template.format(spider=SPIDER)
    total = MultiSite(sites)
    messages = read_topic(kafka_bootstrap, topic, expected=total.pages, timeout=90)
    urls = Counter(orjson.loads(message.value)["url"] for message in messages)
    # a start URL is dont_filter (Scrapy's default): fetched again when a page links to it, as
    # plain Scrapy does
    assert_nothing_lost(urls, total, [held, {f"{site.base_url}/" for site in sites}])

    parts = frontier_parts(SPIDER, PARTS)
    for part, (keys, site) in enumerate(zip(parts, sites, strict=True)):
        # each part holds exactly the pages of its site, and nothing is left
        assert redis_client.scard(keys.dupefilter) == PAGES, (part, site.base_url)
        assert (queued(redis_client, keys), redis_client.zcard(keys.leases)) == (0, 0)
    assert redis_client.get(parts[0].partitions) == str(PARTS).encode()

    (status,) = orjson.loads(ok(cli("status", SPIDER, "--json", "--redis", redis_url)))
    snapshot = status["snapshot"]
    assert (snapshot["queued"], snapshot["leased"], snapshot["dedup"]) == (0, 0, total.pages)
    assert {node["node"] for node in snapshot["nodes"]} >= {"node-0"}  # dead, in every part

    # mid-crawl, the operator views covered every part: the queue of every site, in one head
    assert len(queue["sites"]) >= 2 and queue["queued"] == sum(queue["sites"].values())
    assert len({row["site"] for row in queue["head"]}) >= 2
    assert leased["leases"] == sum(node["leases"] for node in leased["nodes"]) > 0
    after = orjson.loads(ok(cli("leases", SPIDER, "--json", "--redis", redis_url)))
    assert after["leases"] == 0

    purged = cli("purge", SPIDER, "--yes", "--json", "--redis", redis_url)
    assert purged.returncode == 0, purged.stderr
    left = [key for key in redis_client.scan_iter(match=f"{{{SPIDER}*")]
    assert left == [], left


def refused_node(
    redis_url: str,
    kafka_bootstrap: str,
    topic_template: str,
    workdir: Path,
    parts: int = 2,
    more: dict[str, str] | None = None,
) -> str:
    """One node of ``parts`` parts on a site (and the settings ``more``): it is refused,
    fetches nothing and exits 1; its log."""
    with Site(5) as site:
        env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
        with running_nodes(
            1,
            workdir=workdir,
            env=env,
            settings={**node_settings(topic_template, parts), **(more or {})},
            spider=SPIDER,
            arguments={"sites": site.base_url},
        ) as nodes:
            log = workdir / "node-0.log"
            assert wait_for_log(log, "Node refused", timeout=60), logs(workdir)
            assert wait_for_exit(nodes, timeout=60) == [1]  # a supervisor sees it failed
        assert sum(site.hits.values()) == 0
    return (workdir / "node-0.log").read_text()


def test_a_node_with_another_partition_count_is_refused_before_it_takes_work(
    redis_url: str,
    redis_client: redis.Redis,
    kafka_bootstrap: str,
    topic_template: str,
    tmp_path: Path,
) -> None:
    redis_client.set(frontier_parts(SPIDER, 1)[0].partitions, PARTS)  # a crawl in 4 parts
    text = refused_node(redis_url, kafka_bootstrap, topic_template, tmp_path)
    assert (
        "the frontier of 'hopper' is split into 4 parts (FRONTIER_PARTITIONS when its crawl "
        "started), but this node has FRONTIER_PARTITIONS=2" in text
    )
    assert "'finish_reason': 'frontier_partitions_changed'" in text
    assert "'frontier/refused/partitions': 1" in text
    for keys in frontier_parts(SPIDER, 2):
        assert queued(redis_client, keys) == 0
    assert redis_client.get(frontier_parts(SPIDER, 1)[0].partitions) == str(PARTS).encode()


def test_a_node_sending_items_to_other_topics_than_its_crawl_s_is_refused(
    redis_url: str,
    redis_client: redis.Redis,
    kafka_bootstrap: str,
    topic_template: str,
    tmp_path: Path,
) -> None:
    """Two nodes of one crawl with different KAFKA_TOPIC_TEMPLATE split its items over two
    topics without a word: a consumer of the crawl's topic missed 42% of it (an audit)."""
    keys = LedgerKeys.for_crawl(SPIDER, "default")
    redis_client.set(keys.item_topics, "first-hopper-items")  # the crawl's first node's
    redis_client.hset(keys.node_topics, "node-9", "first-hopper-items")
    run = frontier_parts(SPIDER, 1)[0].node_run("node-9")
    redis_client.set(run, "its-run 0", px=120_000)  # node-9 runs
    text = refused_node(redis_url, kafka_bootstrap, topic_template, tmp_path, parts=1)
    given = topic_template.replace("{spider}", SPIDER)
    assert (
        "crawl 'default' of 'hopper' sends its items to the topics of "
        f"KAFKA_TOPIC_TEMPLATE='first-hopper-items' (live nodes: node-9), and this node's is "
        f"{given!r}" in text
    )
    assert "'finish_reason': 'item_topics_changed'" in text
    assert "'frontier/refused/item_topics': 1" in text
    assert redis_client.get(keys.item_topics) == b"first-hopper-items"
    # once no node sending there runs (a later run of the crawl), the new template takes over
    redis_client.delete(run)
    with Site(5) as site:
        env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
        with running_nodes(
            1,
            workdir=tmp_path / "later",
            env=env,
            settings=node_settings(topic_template, 1),
            spider=SPIDER,
            arguments={"sites": site.base_url},
        ) as nodes:
            assert wait_for_exit(nodes, timeout=120) == [0], logs(tmp_path / "later")
    said = logs(tmp_path / "later", tail=0)
    assert (
        "Crawl 'default' of 'hopper': no node that sends its items where they went until now "
        "runs (the topics of KAFKA_TOPIC_TEMPLATE='first-hopper-items')" in said
    )
    assert redis_client.get(keys.item_topics) == given.encode()


@pytest.mark.parametrize("without", ["bootstrap servers", "the pipeline"])
def test_a_node_without_kafka_on_a_crawl_sending_to_kafka_is_refused(
    redis_url: str,
    redis_client: redis.Redis,
    kafka_bootstrap: str,
    topic_template: str,
    tmp_path: Path,
    without: str,
) -> None:
    """A node of a crawl whose nodes send its items to Kafka, started without
    KAFKA_BOOTSTRAP_SERVERS (one machine's environment forgot it), crawled its share of the
    pages into its local feed: the crawl's consumers missed them, and nothing said so. So
    with the servers given and KafkaPipeline off (a review)."""
    keys = LedgerKeys.for_crawl(SPIDER, "default")
    redis_client.set(keys.item_topics, "first-hopper-items")
    redis_client.hset(keys.node_topics, "node-9", "first-hopper-items")
    redis_client.set(frontier_parts(SPIDER, 1)[0].node_run("node-9"), "its-run 0", px=120_000)
    if without == "the pipeline":
        off = {"ITEM_PIPELINES": '{"crawler.pipelines.kafka.KafkaPipeline": null}'}
        text = refused_node(redis_url, kafka_bootstrap, topic_template, tmp_path, 1, off)
    else:
        text = refused_node(redis_url, "", topic_template, tmp_path, parts=1)
    assert (
        "crawl 'default' of 'hopper' sends its items to the topics of "
        "KAFKA_TOPIC_TEMPLATE='first-hopper-items' (live nodes: node-9), and this node sends "
        "none to Kafka (KAFKA_BOOTSTRAP_SERVERS empty, or KafkaPipeline off)" in text
    )
    assert "'frontier/refused/item_topics': 1" in text


def test_two_nodes_crawl_three_parts_on_three_cluster_masters_exactly_once(
    redis_cluster_url: str, kafka_bootstrap: str, topic_template: str, tmp_path: Path
) -> None:
    cluster = sync_client(redis_cluster_url)
    assert isinstance(cluster, redis.RedisCluster)
    parts = frontier_parts(SPIDER, 3)
    masters = {cluster.get_node_from_key(keys.queue_levels).name for keys in parts}  # type: ignore[no-untyped-call]
    assert len(masters) == 3  # the hash tags {hopper}, {hopper#1}, {hopper#2} fall apart
    env = {"REDIS_URL": redis_cluster_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    with one_site_per_part(3, pages=40) as sites:
        arguments = {"sites": ",".join(site.base_url for site in sites)}
        with running_nodes(
            2,
            workdir=tmp_path,
            env=env,
            settings=node_settings(topic_template, 3),
            spider=SPIDER,
            arguments=arguments,
        ) as nodes:
            assert wait_for_exit(nodes, timeout=180) == [0, 0], logs(tmp_path)
    assert tracebacks(tmp_path) == [], logs(tmp_path)
    total = MultiSite(sites)
    messages = read_topic(
        kafka_bootstrap, topic_template.format(spider=SPIDER), expected=total.pages, timeout=60
    )
    urls = Counter(orjson.loads(message.value)["url"] for message in messages)
    assert set(urls) == total.all_urls()
    # once each, but the roots: fetched as start requests (dont_filter, so not recorded,
    # as in plain Scrapy) and again when the site before links to them
    assert {url: n for url, n in urls.items() if n > 1} == {site.url(0): 2 for site in sites}
    for keys in parts:
        assert cluster.scard(keys.dupefilter) == 40  # one site per part, on its own master
    cluster.close()


def test_a_frontier_check_that_fails_for_good_refuses_the_node_not_hangs_it(
    redis_url: str,
    redis_client: redis.Redis,
    kafka_bootstrap: str,
    topic_template: str,
    tmp_path: Path,
) -> None:
    """An error of the start's frontier check that is no outage (here the crawl's record of
    its part count is of another Redis type) ended the check's task: the node waited for its
    result for ever, crawling nothing (an audit met it with a cluster not yet reachable)."""
    redis_client.rpush(frontier_parts(SPIDER, 1)[0].partitions, "4")
    text = refused_node(redis_url, kafka_bootstrap, topic_template, tmp_path)
    assert "Node refused: checking the frontier failed: ResponseError: WRONGTYPE" in text
    assert "'frontier/refused/refused': 1" in text
