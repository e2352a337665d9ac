"""What a project may not turn off: refused at start, with what to do instead (``ClusterAddon``).

In cluster mode the frontier's own components (its lease middlewares, the start claim) carry
its guarantees (without ``NodeContext`` the scheduler stops the start, saying it needs it), and
the crawl ledger (``crawler status``) and the metrics read the stats Scrapy's ``CoreStats`` and
downloader stats record: turned off, leases were finished only when a node went idle (a node
killed meanwhile had every page it crawled crawled again) and ``crawler status`` read 0 pages
(an audit). A component of the project's that takes the place of Scrapy's own (robots.txt,
decompression) turned off, without Scrapy's given back, leaves neither on, in either mode.
"""

from __future__ import annotations

from scrapy.settings import BaseSettings
from scrapy.statscollectors import DummyStatsCollector
from scrapy.utils.misc import load_object

from crawler.settings_values import get_bool

STANDALONE = "remove the entry, or unset REDIS_URL to crawl standalone"
# setting -> component -> what it does in cluster mode, and what to do instead of turning it off
NEEDED_IN_CLUSTER = {
    "SPIDER_MIDDLEWARES": {
        "crawler.middlewares.lease_output.LeaseOutputMiddleware": (
            "finishes each page's lease once its output is written (without it leases are "
            "finished only when the node goes idle: a node killed meanwhile has every page it "
            f"crawled crawled again); {STANDALONE}"
        ),
        "crawler.middlewares.cluster_start.ClusterStartMiddleware": (
            "lets one node of the crawl run start() (without it every node runs it, and its "
            f"items and dont_filter requests come once a node); {STANDALONE}"
        ),
    },
    "DOWNLOADER_MIDDLEWARES": {
        "crawler.middlewares.lease_failures.LeaseFailureMiddleware": (
            "fails a page's lease when its download fails (without it such a page counts done, "
            f"with no failure record for `crawler failed`); {STANDALONE}"
        ),
        "scrapy.downloadermiddlewares.stats.DownloaderStats": (
            "counts downloader/response_count and downloader/request_count, which the crawl "
            "ledger (`crawler status`: pages, the rates, the ETA) and the metrics read; "
            f"{STANDALONE}"
        ),
        "crawler.middlewares.politeness.ClusterRateLimitMiddleware": (
            "paces each site for all the nodes together (POLITENESS_RATE); remove the entry, "
            "and give POLITENESS_ENABLED=False to turn the cluster-wide limit off"
        ),
    },
    "EXTENSIONS": {
        "crawler.extensions.ledger.LedgerExtension": (
            "adds the node's counts to the crawl ledger, which `crawler status` and `crawler "
            "top` read; remove the entry (LEDGER_ENABLED=False turns it off)"
        ),
        "scrapy.extensions.corestats.CoreStats": (
            "counts item_scraped_count and response_received_count, which the crawl ledger "
            "(`crawler status`: items) and the metrics (crawler_pages_total, the "
            f"CrawlerStalled alert) read; {STANDALONE}"
        ),
    },
}
# the project's component -> (Scrapy's, whose place it takes; the setting that turns both off)
IN_THE_PLACE_OF = {
    "crawler.middlewares.robots.SharedRobotsTxtMiddleware": (
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware",
        "ROBOTSTXT_OBEY",
    ),
    "crawler.middlewares.decompression.CappedDecompressionMiddleware": (
        "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware",
        "COMPRESSION_ENABLED",
    ),
}


def _enabled(settings: BaseSettings, setting: str) -> list[object]:
    """The enabled components of a component setting, as given (a class, or the object its
    path names: a class made in a function has no path to load it again by)."""
    return [
        load_object(key) if isinstance(key, str) else key
        for key, order in settings.get_component_priority_dict_with_base(setting).items()
        if order is not None
    ]


def _on(enabled: list[object], component: str) -> bool:
    """Whether ``component``, or a subclass of it, is among ``enabled``."""
    needed = load_object(component)
    return any(isinstance(found, type) and issubclass(found, needed) for found in enabled)


def _records_nothing(stats_class: object) -> bool:
    """Whether ``STATS_CLASS`` is Scrapy's DummyStatsCollector, or a subclass that keeps its
    counters doing nothing (a factory, or a collector of its own, records as it will)."""
    return (
        isinstance(stats_class, type)
        and issubclass(stats_class, DummyStatsCollector)
        and stats_class.inc_value is DummyStatsCollector.inc_value
    )


def check_cluster_needs(settings: BaseSettings) -> None:
    """Raise ValueError, naming the setting, for what cluster mode needs and ``settings``
    turn off."""
    for setting, components in NEEDED_IN_CLUSTER.items():
        enabled = _enabled(settings, setting)
        for component, why in components.items():
            if not _on(enabled, component):
                name = component.rsplit(".", 1)[1]
                raise ValueError(
                    f"{setting} turns {name} off with REDIS_URL set: in cluster mode it {why}"
                )
    stats_class = settings.get("STATS_CLASS")
    if _records_nothing(load_object(stats_class)):
        raise ValueError(
            f"STATS_CLASS={stats_class!r} records nothing, with REDIS_URL set: the crawl ledger "
            "sums every node's stats (`crawler status`: done, pages, rates) and the metrics "
            f"read them; remove it, or unset REDIS_URL to crawl standalone"
        )
    if not get_bool(settings, "DOWNLOADER_STATS"):
        raise ValueError(
            "DOWNLOADER_STATS=False with REDIS_URL set: the crawl ledger counts pages from "
            "downloader/response_count (`crawler status`: pages, the rates, the ETA) and the "
            "metrics requests from downloader/request_count; remove it, or unset REDIS_URL to "
            "crawl standalone"
        )


def check_places_taken(settings: BaseSettings) -> None:
    """Raise ValueError for a project component in the place of Scrapy's turned off, with
    Scrapy's not given back, while what they do is on."""
    switched_on = {
        ours: get_bool(settings, switch) for ours, (_, switch) in IN_THE_PLACE_OF.items()
    }
    if not any(switched_on.values()):
        return
    enabled = _enabled(settings, "DOWNLOADER_MIDDLEWARES")
    for ours, (scrapys, switch) in IN_THE_PLACE_OF.items():
        if not switched_on[ours] or _on(enabled, ours) or _on(enabled, scrapys):
            continue
        name, scrapy_name = ours.rsplit(".", 1)[1], scrapys.rsplit(".", 1)[1]
        order = settings.getdict("DOWNLOADER_MIDDLEWARES_BASE").get(scrapys)
        raise ValueError(
            f"DOWNLOADER_MIDDLEWARES turns {name} off, and {scrapy_name} with it ({name} takes "
            f"its place): nothing would do its work though {switch}=True; remove the entry, "
            f"give {scrapy_name} an order ({scrapys!r}: {order}) to use Scrapy's own, or set "
            f"{switch}=False"
        )
