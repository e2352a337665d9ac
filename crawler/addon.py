"""Scrapy add-on that picks cluster or standalone mode from the settings.

Cluster mode (``REDIS_URL`` set; a bad URL fails here, see
``crawler.redis_connection``): ``LeasingScheduler`` shares one Redis frontier
between nodes. Standalone mode: Scrapy's own scheduler.
Without ``KAFKA_BOOTSTRAP_SERVERS`` items go to a JSON Lines feed instead.
Every request leaves through ``crawler.download_handler`` (installed for every scheme
``DOWNLOAD_HANDLERS`` serves, the project's handlers beneath it): paced by the politeness
limiter as it leaves and, with ``BROWSER_ENABLED``, rendered on Debian's Chromium through
scrapy-playwright when marked for the browser (``BrowserRenderingMiddleware``).
Values are set at ``addon`` priority, so project, spider and command-line
settings still win. The project's middlewares, pipeline and
extensions (``COMPONENTS``) are added to the component dicts whatever dicts
a project or ``-s`` gives, so a user's own ``DOWNLOADER_MIDDLEWARES`` or
``ITEM_PIPELINES`` never silently drops the frontier's lease tracking,
politeness or Kafka.
"""

from __future__ import annotations

import logging

from scrapy.crawler import Crawler
from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings, default_settings
from scrapy.utils.misc import load_object
from scrapy.utils.python import without_none_values

from crawler import (
    browser_settings,
    feed_storage,
    node_files,
    scrapy_redis_compat,
    standalone_commands,
)
from crawler.addon_check import reactor_problem
from crawler.cluster_required import check_cluster_needs, check_places_taken
from crawler.component_orders import (
    check_downloader_middleware_orders,
    check_pipeline_orders,
    check_spider_middleware_orders,
)
from crawler.download_handler import PLAIN_HANDLERS
from crawler.frontier.settings import FrontierSettings
from crawler.kafka.bootstrap import check_bootstrap_servers
from crawler.node import resolve_crawl_id
from crawler.per_node_limits import closespider_counts, download_delay, per_node_limits
from crawler.redis_url import RedisConfig
from crawler.scrapy_redis_given import given, object_path
from crawler.scrapy_values import check_scrapy_values, whole_scrapy_integers
from crawler.session_spider import check_session_spider
from crawler.setting_names import misspelt, require_project_settings
from crawler.settings_values import component_path, get_bool

logger = logging.getLogger(__name__)
LEASING_SCHEDULER = "crawler.frontier.scheduler.LeasingScheduler"
NODE_DOWNLOAD_HANDLER = "crawler.download_handler.NodeDownloadHandler"
# Scrapy's scheduler queue settings -> the values whose order the frontier keeps
FIFO_DISK_QUEUES = tuple(
    f"scrapy.squeues.{kind}Fifo{store}Queue"
    for kind in ("Pickle", "Marshal")
    for store in ("Disk", "SQLite")
)
QUEUE_ORDERS = {
    # the frontier's order, and then the downloader-aware pick of a node's leases or not
    "SCHEDULER_PRIORITY_QUEUE": (
        "scrapy.pqueues.ScrapyPriorityQueue",
        "scrapy.pqueues.DownloaderAwarePriorityQueue",
    ),
    "SCHEDULER_MEMORY_QUEUE": ("scrapy.squeues.FifoMemoryQueue",),
    "SCHEDULER_DISK_QUEUE": FIFO_DISK_QUEUES,
    "SCHEDULER_START_MEMORY_QUEUE": (),
    "SCHEDULER_START_DISK_QUEUE": (),
}

SCRAPY_COOKIES = "scrapy.downloadermiddlewares.cookies.CookiesMiddleware"
SHARED_COOKIES = "crawler.middlewares.shared_cookies.SharedCookiesMiddleware"

# The project's components and their orders. They are added to these settings unless already
# there (a project, spider or -s dict of its own keeps them; listing one with None turns it
# off). Each raises NotConfigured where it does not apply (standalone, no Kafka, ...).
COMPONENTS: dict[str, dict[str, int | None]] = {
    "SPIDER_MIDDLEWARES": {
        "crawler.middlewares.lease_output.LeaseOutputMiddleware": 10,
        "crawler.middlewares.cluster_start.ClusterStartMiddleware": 20,
    },
    "DOWNLOADER_MIDDLEWARES": {
        "crawler.middlewares.browser.BrowserRenderingMiddleware": 5,
        "crawler.middlewares.lease_failures.LeaseFailureMiddleware": 10,
        "crawler.middlewares.redirect_scope.RedirectScopeMiddleware": 51,
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "crawler.middlewares.robots.SharedRobotsTxtMiddleware": 100,
        "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
        "crawler.middlewares.decompression.CappedDecompressionMiddleware": 590,
        SCRAPY_COOKIES: None,
        SHARED_COOKIES: 700,
        "crawler.middlewares.sessions.SharedSessionMiddleware": 720,
        "crawler.middlewares.politeness.ClusterRateLimitMiddleware": 950,
    },
    "ITEM_PIPELINES": {"crawler.pipelines.kafka.KafkaPipeline": 900},
    "EXTENSIONS": {
        "crawler.log_masking.CredentialMaskingLog": 5,
        "crawler.node_context.NodeContext": 0,
        "crawler.extensions.item_errors.ItemErrors": 490,
        "crawler.extensions.ledger.LedgerExtension": 500,
        "crawler.extensions.metrics.PrometheusMetrics": 510,
        "crawler.extensions.startup_log.StartupLog": 520,
        "crawler.extensions.cluster_logstats.ClusterLogStats": 530,
    },
}


class ClusterAddon:
    def __init__(self, crawler: Crawler | None = None) -> None:
        self.crawler = crawler
        self.spidercls = crawler.spidercls if crawler is not None else None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ClusterAddon:
        return cls(crawler)

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        """The process's settings, before any crawler: Scrapy reads REACTOR_THREADPOOL_MAXSIZE
        and DNSCACHE_SIZE from them (a value refused is refused with the crawler's)."""
        whole_scrapy_integers(settings, refuse=False)

    def update_settings(self, settings: BaseSettings) -> None:
        require_project_settings(settings)
        check_scrapy_values(settings)
        for misspelt_name, meant in misspelt(settings):
            logger.warning(
                "Setting %s resembles %s, and nothing reads %s: misspelt? (%s keeps its "
                "value; ignore this if your own code reads %s)",
                misspelt_name,
                meant,
                misspelt_name,
                meant,
                misspelt_name,
            )
        scrapy_redis_compat.apply(settings)  # scrapy-redis names: mapped or refused
        resolve_crawl_id(settings.get("CRAWLER_CRAWL_ID"))  # a ValueError naming it
        standalone_commands.apply(settings)  # scrapy fetch, shell, ...: never cluster mode
        for setting, components in COMPONENTS.items():
            for path, order in components.items():
                settings.setdefault_in_component_priority_dict(setting, load_object(path), order)
        ClusterAddon._cookie_jars(settings, cluster=bool(settings.get("REDIS_URL")))
        check_places_taken(settings)
        if self.spidercls is not None:
            scrapy_redis_compat.check_spider_class(self.spidercls)
            check_session_spider(self.spidercls, settings)
        feed_storage.use_node_uri_params(settings)
        if settings.get("REDIS_URL"):
            RedisConfig.from_url(settings.get("REDIS_URL"))  # raises ValueError naming REDIS_URL
            self._cluster(settings)
            feed_storage.lock_local_feeds(settings)
            if problem := node_files.job_dir_problem(settings.get("JOBDIR") or ""):
                raise ValueError(problem)
        self._download_handlers(settings)
        browser_settings.apply(settings)
        if settings.get("KAFKA_BOOTSTRAP_SERVERS"):
            check_bootstrap_servers(str(settings.get("KAFKA_BOOTSTRAP_SERVERS")))
            check_pipeline_orders(settings)
        if not (
            settings.get("KAFKA_BOOTSTRAP_SERVERS")
            or settings.getdict("FEEDS")
            or settings.get(standalone_commands.SETTING)  # shows pages, writes no feed
        ):
            feed = settings.get("CRAWLER_STANDALONE_FEED")
            if feed:
                settings.set(
                    "FEEDS",
                    {feed: {"format": "jsonlines", "encoding": "utf-8"}},
                    priority="addon",
                )

    def _cluster(self, settings: BaseSettings) -> None:
        """LeasingScheduler; a scheduler or dupefilter chosen elsewhere would lose its
        guarantees (or be ignored), so it stops the start."""
        if problem := reactor_problem(settings):
            raise ValueError(problem)
        scheduler = settings.get("SCHEDULER")
        chosen = (settings.getpriority("SCHEDULER") or 0) > 0
        if chosen and object_path(scheduler) != LEASING_SCHEDULER:  # a path, or the class
            raise ValueError(
                f"SCHEDULER={scheduler!r} with REDIS_URL set: cluster mode needs "
                f"{LEASING_SCHEDULER} (leases, shared dedup); remove the setting, or unset "
                "REDIS_URL to crawl standalone with it"
            )
        dupefilter = settings.get("DUPEFILTER_CLASS")
        if object_path(dupefilter) != default_settings.DUPEFILTER_CLASS:
            raise ValueError(
                f"DUPEFILTER_CLASS={dupefilter!r} with REDIS_URL set: LeasingScheduler "
                "deduplicates in Redis and would ignore it; choose FRONTIER_DUPEFILTER "
                "(exact, compact, bloom) and FRONTIER_DEDUP_TTL instead (no dedup, as "
                "BaseDupeFilter gives: dont_filter=True on the requests to crawl again)"
            )
        ClusterAddon._queues(settings)
        # the spider exists by now (Crawler.crawl makes it first): -a download_delay=2 too
        spider = getattr(self.crawler, "spider", None) or self.spidercls
        download_delay(settings, spider)
        closespider_counts(settings)
        per_node_limits(settings, spider)
        check_spider_middleware_orders(settings)
        check_downloader_middleware_orders(settings)
        check_cluster_needs(settings)
        if get_bool(settings, "SCHEDULER_DEBUG"):
            logger.info(
                "SCHEDULER_DEBUG is not read in cluster mode: a request the frontier cannot "
                "store is always logged, and counted in frontier/unserializable"
            )
        settings.set("SCHEDULER", LEASING_SCHEDULER, priority="addon")
        # a ValueError naming the setting, before Scrapy opens anything
        frontier = FrontierSettings.from_settings(settings)
        if spider is not None and getattr(spider, "name", None):
            frontier.check_spider(str(spider.name))

    @staticmethod
    def _cookie_jars(settings: BaseSettings, *, cluster: bool) -> None:
        """Scrapy's CookiesMiddleware listed by the project gives its place to the shared one
        (beside it, its per-node jar wrote the Cookie header last); kept, and said in cluster
        mode, when the project turned the shared one off."""
        middlewares = settings.getdict("DOWNLOADER_MIDDLEWARES")
        listed = {component_path(key): key for key in middlewares}
        if middlewares.get(listed.get(SCRAPY_COOKIES)) is None:
            return
        if SHARED_COOKIES in listed and middlewares[listed[SHARED_COOKIES]] is None:
            if cluster and get_bool(settings, "COOKIES_ENABLED"):
                logger.warning(
                    "DOWNLOADER_MIDDLEWARES turns %s off and %s on: its cookie jars are each "
                    "node's own (a login made on one node is not sent by the others); remove "
                    "both entries to share them (docs/settings.md)",
                    SHARED_COOKIES,
                    SCRAPY_COOKIES,
                )
            return
        order = middlewares.pop(listed[SCRAPY_COOKIES])
        middlewares.pop(listed.get(SHARED_COOKIES), None)
        middlewares[SCRAPY_COOKIES] = None
        middlewares[SHARED_COOKIES] = order
        priority = settings.getpriority("DOWNLOADER_MIDDLEWARES") or 0
        settings.set("DOWNLOADER_MIDDLEWARES", middlewares, priority)
        logger.info(
            "%s takes the place of %s (order %s) listed in DOWNLOADER_MIDDLEWARES: the same "
            "jars, shared by the nodes in cluster mode",
            SHARED_COOKIES,
            SCRAPY_COOKIES,
            order,
        )

    @staticmethod
    def _queues(settings: BaseSettings) -> None:
        """Scrapy's queue settings the frontier does not read: one that asks for another order
        than the frontier's (priority, then first in first out) stops the start."""
        for name, kept in QUEUE_ORDERS.items():
            if not given(settings, name):
                continue
            path = component_path(settings.get(name))
            if path not in kept:
                raise ValueError(
                    f"{name}={path!r} with REDIS_URL set: the shared frontier leases the highest "
                    "Request.priority first, first in first out within a priority, for every "
                    "request (start requests too); remove the setting (DEPTH_PRIORITY=1 gives "
                    "breadth-first order, -1 depth-first), or unset REDIS_URL to crawl "
                    "standalone with it"
                )

    @staticmethod
    def _download_handlers(settings: BaseSettings) -> None:
        """The node's download handler for every scheme a handler serves, whoever set them
        (at their priority: a project's or -s dict is merged, not replaced); the handlers it
        replaces go beneath it (``CRAWLER_DOWNLOAD_HANDLERS``)."""
        if settings.get(PLAIN_HANDLERS) is not None:  # the add-on ran on these settings
            return
        serving = without_none_values(settings.getwithbase("DOWNLOAD_HANDLERS"))
        plain = {
            scheme: path
            for scheme, path in serving.items()
            if component_path(path) != NODE_DOWNLOAD_HANDLER
        }
        settings.set(PLAIN_HANDLERS, plain, "addon")
        given = settings.getpriority("DOWNLOAD_HANDLERS") or 0
        settings.set(
            "DOWNLOAD_HANDLERS",
            {
                **settings.getdict("DOWNLOAD_HANDLERS"),
                **dict.fromkeys(serving, NODE_DOWNLOAD_HANDLER),
            },
            max(given, SETTINGS_PRIORITIES["addon"]),
        )
