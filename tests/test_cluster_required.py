"""What cluster mode needs on, turned off by a project: refused at start, naming what to do.

An audit with a project of its own: LeaseOutputMiddleware turned off in SPIDER_MIDDLEWARES was
accepted without a word (a SIGKILLed node's pages were crawled again: 19 duplicates where the
same run with it on had 1), and so were stats that record nothing (DummyStatsCollector,
DOWNLOADER_STATS=False, CoreStats off: `crawler status` read 0 pages, 0 done while pages were
crawled, and the metrics' pages counter stayed at 0). A project's own components replacing
Scrapy's (robots.txt, decompression) turned off left neither on.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import scrapy
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.utils.test import get_crawler

from settings.resolve import resolve_settings
from tests.test_scrapy_redis_compat import project

CLUSTER = {"REDIS_URL": "redis://h:1/0"}
OFF_IN_CLUSTER = [
    (
        "SPIDER_MIDDLEWARES",
        "crawler.middlewares.lease_output.LeaseOutputMiddleware",
        "finishes each page's lease once its output is written",
    ),
    (
        "SPIDER_MIDDLEWARES",
        "crawler.middlewares.cluster_start.ClusterStartMiddleware",
        "lets one node of the crawl run start()",
    ),
    (
        "DOWNLOADER_MIDDLEWARES",
        "crawler.middlewares.lease_failures.LeaseFailureMiddleware",
        "fails a page's lease when its download fails",
    ),
    (
        "DOWNLOADER_MIDDLEWARES",
        "crawler.middlewares.politeness.ClusterRateLimitMiddleware",
        "POLITENESS_ENABLED=False",
    ),
    ("EXTENSIONS", "crawler.extensions.ledger.LedgerExtension", "crawler status"),
    ("EXTENSIONS", "scrapy.extensions.corestats.CoreStats", "item_scraped_count"),
]


@pytest.mark.parametrize(("setting", "component", "said"), OFF_IN_CLUSTER)
def test_a_component_cluster_mode_needs_turned_off_is_refused(
    setting: str, component: str, said: str
) -> None:
    name = component.rsplit(".", 1)[1]
    with pytest.raises(ValueError, match=rf"{setting} turns {name} off with REDIS_URL set") as e:
        project({**CLUSTER, setting: {component: None}})
    assert said in str(e.value)
    project({setting: {component: None}})  # standalone: none of it is needed


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"STATS_CLASS": "scrapy.statscollectors.DummyStatsCollector"}, "records nothing"),
        ({"DOWNLOADER_STATS": False}, "downloader/response_count"),
    ],
)
def test_stats_the_crawl_ledger_reads_turned_off_are_refused(
    values: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        project({**CLUSTER, **values})
    project(values)


@pytest.mark.parametrize(
    ("ours", "scrapys", "off_anyway"),
    [
        (
            "crawler.middlewares.robots.SharedRobotsTxtMiddleware",
            "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware",
            {"ROBOTSTXT_OBEY": False},
        ),
        (
            "crawler.middlewares.decompression.CappedDecompressionMiddleware",
            "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware",
            {"COMPRESSION_ENABLED": False},
        ),
    ],
)
def test_a_component_in_the_place_of_scrapy_s_turned_off_leaves_scrapy_s_or_is_refused(
    ours: str, scrapys: str, off_anyway: dict[str, Any]
) -> None:
    name, scrapy_name = ours.rsplit(".", 1)[1], scrapys.rsplit(".", 1)[1]
    on = {"ROBOTSTXT_OBEY": True}
    for values in (on, {**on, **CLUSTER}):
        with pytest.raises(ValueError, match=rf"turns {name} off, and {scrapy_name} with it"):
            project({**values, "DOWNLOADER_MIDDLEWARES": {ours: None}})
        project({**values, "DOWNLOADER_MIDDLEWARES": {ours: None, scrapys: 100}})
    project({**on, **off_anyway, "DOWNLOADER_MIDDLEWARES": {ours: None}})


def test_a_download_delay_of_0_given_in_cluster_mode_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Scrapy's 0 is no delay; the cluster paces every site at POLITENESS_RATE all the same
    (an audit: -s DOWNLOAD_DELAY=0 crawled at 4 pages/s, plain Scrapy at 65, not a word)."""
    with caplog.at_level(logging.WARNING, logger="crawler.per_node_limits"):
        project({**CLUSTER, "DOWNLOAD_DELAY": 0})
    assert "DOWNLOAD_DELAY=0 (no delay) is given" in caplog.text
    assert "POLITENESS_RATE=4" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crawler.per_node_limits"):
        project({**CLUSTER, "DOWNLOAD_DELAY": 0, "POLITENESS_RATE": 50})  # the rate is given
        project({**CLUSTER})  # Scrapy's default 0: nothing given
        project({"DOWNLOAD_DELAY": 0})  # standalone
    assert "DOWNLOAD_DELAY" not in caplog.text


def test_scheduler_debug_is_said_to_be_not_read(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="crawler.addon"):
        project({**CLUSTER, "SCHEDULER_DEBUG": True})
    assert "SCHEDULER_DEBUG is not read in cluster mode" in caplog.text


@pytest.mark.parametrize(
    ("values", "jitter"),
    [
        ({"DOWNLOAD_DELAY_JITTER": 0}, 0.0),
        ({"DOWNLOAD_DELAY_JITTER": 0.2}, 0.2),
        ({}, 0.5),  # Scrapy's default
        ({"RANDOMIZE_DOWNLOAD_DELAY": False}, 0.0),  # deprecated, given above the jitter's
        ({"RANDOMIZE_DOWNLOAD_DELAY": False, "DOWNLOAD_DELAY_JITTER": 0.3}, 0.3),  # equal: jitter
    ],
)
def test_a_delay_s_jitter_spreads_the_cluster_s_requests_as_scrapy_s(
    values: dict[str, Any], jitter: float
) -> None:
    """An audit: DOWNLOAD_DELAY_JITTER (Scrapy 2.19's, in the place of RANDOMIZE_DOWNLOAD_DELAY)
    was not read: with 0 the cluster still spread each request by +-50% (0.26-0.75 s gaps for
    a 0.5 s delay where Scrapy kept 0.50)."""
    settings = project({**CLUSTER, "DOWNLOAD_DELAY": 0.5, **values})
    assert settings.getfloat("POLITENESS_JITTER") == jitter


def test_a_jitter_the_limiter_cannot_keep_is_said(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="crawler.per_node_limits"):
        settings = project({**CLUSTER, "DOWNLOAD_DELAY": 0.5, "DOWNLOAD_DELAY_JITTER": 1.5})
        assert settings.getfloat("POLITENESS_JITTER") == 0.99
        assert "DOWNLOAD_DELAY_JITTER=1.5: the cluster's limiter spreads" in caplog.text
        slots = {"a.test": {"delay": 0.5, "jitter": 0}}
        project({**CLUSTER, "DOWNLOAD_SLOTS": slots})
        assert "DOWNLOAD_SLOTS jitter of a.test is not kept per site" in caplog.text


class PerSiteLimit(scrapy.Spider):
    name = "per_site_limit"
    max_concurrent_requests = 1


class NoDownloads(scrapy.Spider):
    name = "no_downloads"
    max_concurrent_requests = 0


def test_a_spider_s_max_concurrent_requests_is_checked_as_the_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An audit: Scrapy copies the deprecated max_concurrent_requests attribute onto
    CONCURRENT_REQUESTS_PER_DOMAIN after the add-ons: a limit of 1 held per node without the
    WARNING the setting gets, and 0 started a node that never downloaded, held its lease and
    ignored a SIGINT instead of being refused."""
    logstats = "crawler.extensions.cluster_logstats.ClusterLogStats"  # needs a reactor
    settings = {**resolve_settings({}), **CLUSTER, "EXTENSIONS": {logstats: None}}
    deprecated = pytest.warns(ScrapyDeprecationWarning, match="'max_concurrent_requests'")
    with caplog.at_level(logging.WARNING, logger="crawler.per_node_limits"), deprecated:
        get_crawler(PerSiteLimit, settings)
    assert "CONCURRENT_REQUESTS_PER_DOMAIN=1 counts per node in cluster mode" in caplog.text
    with pytest.raises(ValueError, match="CONCURRENT_REQUESTS_PER_DOMAIN=0 must be >= 1"):
        get_crawler(NoDownloads, settings)


def _made_here() -> tuple[type, type]:
    """A middleware and an extension class made in a function: Scrapy takes such classes as
    component keys, and their import paths cannot be imported."""

    class Middleware:
        def process_request(self, request: object) -> None:
            return None

    class Extension:
        pass

    return Middleware, Extension


def make_stats(crawler: object) -> object:
    """A STATS_CLASS that is a factory: Scrapy only calls it."""
    from scrapy.statscollectors import MemoryStatsCollector

    return MemoryStatsCollector(crawler)  # type: ignore[arg-type]


def test_components_given_as_classes_and_a_stats_factory_are_accepted() -> None:
    """A review: the checks loaded each component again from its import path (a class made in
    a function has none: ModuleNotFoundError at start, in either mode) and took STATS_CLASS
    for a class (a factory: TypeError)."""
    middleware, extension = _made_here()
    for values in ({}, CLUSTER):
        project({**values, "DOWNLOADER_MIDDLEWARES": {middleware: 543}})
        project({**values, "EXTENSIONS": {extension: 100}})
    project({**CLUSTER, "STATS_CLASS": f"{__name__}.make_stats"})


def test_downloader_stats_turned_off_as_a_middleware_is_refused() -> None:
    """A review: DownloaderStats turned off counts no downloader/response_count either."""
    stats = "scrapy.downloadermiddlewares.stats.DownloaderStats"
    with pytest.raises(ValueError, match="DOWNLOADER_MIDDLEWARES turns DownloaderStats off"):
        project({**CLUSTER, "DOWNLOADER_MIDDLEWARES": {stats: None}})
    project({"DOWNLOADER_MIDDLEWARES": {stats: None}})
