"""scrapy-redis's settings and spider classes: honoured, mapped to ours, or refused at start.

``ClusterAddon`` calls :func:`apply` before any component reads a setting.
A scrapy-redis name either keeps its meaning here (mapped onto the setting
that does it, at the priority it was given), or stops the start with a
message that names what to use instead. Nothing is silently ignored. The
table of every name is in docs/migrating-from-scrapy-redis.md.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from scrapy.settings import BaseSettings

from crawler.scrapy_redis_given import given, object_path, refuse, setting_priority
from crawler.scrapy_redis_url import redis_url_setting
from crawler.settings_values import get_bool, get_float

# scrapy-redis name -> our setting with the same meaning
ALIASES = {
    "REDIS_START_URLS_KEY": "SEEDS_KEY",
    "REDIS_START_URLS_BATCH_SIZE": "SEEDS_BATCH_SIZE",
}

# scrapy-redis settings whose meaning cannot hold here -> what to do instead
REFUSED = {
    "SCHEDULER_QUEUE_KEY": "the frontier's keys are fixed ({<spider>}:queue:<score> ...; "
    "docs/redis-keys.md)",
    "SCHEDULER_DUPEFILTER_KEY": "the frontier's keys are fixed ({<spider>}:dupefilter ...; "
    "docs/redis-keys.md)",
    "DUPEFILTER_KEY": "the frontier's keys are fixed ({<spider>}:dupefilter ...; "
    "docs/redis-keys.md)",
    "SCHEDULER_SERIALIZER": "requests are stored as JSON, never pickled: remove it",
    "SCHEDULER_DUPEFILTER_CLASS": "choose the dedup with FRONTIER_DUPEFILTER "
    "(exact, compact, bloom)",
    "REDIS_CLS": "the node builds its own Redis clients from REDIS_URL: remove it",
    "REDIS_DECODE_RESPONSES": "the node builds its own Redis clients from REDIS_URL: remove it",
}

# the other scrapy-redis settings ``apply`` maps or checks (and the spider's idle close reads)
MAPPED = frozenset(
    {
        "REDIS_HOST",
        "REDIS_PORT",
        "REDIS_DB",
        "REDIS_PARAMS",
        "REDIS_ENCODING",
        "REDIS_START_URLS_AS_SET",
        "REDIS_START_URLS_AS_ZSET",
        "REDIS_ITEMS_KEY",
        "REDIS_ITEMS_SERIALIZER",
        "SCHEDULER_PERSIST",
        "SCHEDULER_FLUSH_ON_START",
        "SCHEDULER_IDLE_BEFORE_CLOSE",
        "SCHEDULER_QUEUE_CLASS",
        "STATS_KEY",
        "MAX_IDLE_TIME_BEFORE_CLOSE",
    }
)
PRIORITY_QUEUES = {
    "scrapy_redis.queue.PriorityQueue",
    "scrapy_redis.queue.SpiderPriorityQueue",
}
SCRAPY_REDIS_SCHEDULER = "scrapy_redis.scheduler.Scheduler"
REDIS_PIPELINE = "scrapy_redis.pipelines.RedisPipeline"
REDIS_STATS = "scrapy_redis.stats.RedisStatsCollector"


def apply(settings: BaseSettings) -> None:
    """Map or refuse every scrapy-redis setting in ``settings`` (changes it in place)."""
    for name, instead in REFUSED.items():
        if given(settings, name):
            raise refuse(name, settings.get(name), instead)
    _scheduler(settings)
    _aliases(settings)
    _seed_type(settings)
    redis_url_setting(settings)
    _items_key(settings)
    _stats_key(settings)
    idle = (
        get_float(settings, "SCHEDULER_IDLE_BEFORE_CLOSE")
        if given(settings, "SCHEDULER_IDLE_BEFORE_CLOSE")
        else 0.0
    )
    if idle < 0:
        raise ValueError(f"SCHEDULER_IDLE_BEFORE_CLOSE={idle} must be >= 0")
    if idle > 0 and given(settings, "FRONTIER_IDLE_POLL"):
        poll = get_float(settings, "FRONTIER_IDLE_POLL")
        if poll != idle:
            raise ValueError(
                f"SCHEDULER_IDLE_BEFORE_CLOSE={idle} and FRONTIER_IDLE_POLL={poll} disagree: "
                "they are the same setting here (how long an empty lease waits), give one"
            )
    if idle > 0:  # scrapy-redis: how long an empty queue pop waits
        settings.set(
            "FRONTIER_IDLE_POLL",
            idle,
            priority=setting_priority(settings, "SCHEDULER_IDLE_BEFORE_CLOSE"),
        )


def _scheduler(settings: BaseSettings) -> None:
    if object_path(settings.get("SCHEDULER")) == SCRAPY_REDIS_SCHEDULER:
        raise refuse(
            "SCHEDULER",
            SCRAPY_REDIS_SCHEDULER,
            "remove it: with REDIS_URL set, LeasingScheduler shares the frontier and loses "
            "nothing when a node dies",
        )
    if given(settings, "SCHEDULER_FLUSH_ON_START") and get_bool(
        settings, "SCHEDULER_FLUSH_ON_START"
    ):
        raise refuse(
            "SCHEDULER_FLUSH_ON_START",
            settings.get("SCHEDULER_FLUSH_ON_START"),
            "nodes never wipe shared state: run `crawler purge <spider>` with the nodes stopped "
            "before starting",
        )
    if given(settings, "SCHEDULER_PERSIST") and not get_bool(settings, "SCHEDULER_PERSIST"):
        raise refuse(
            "SCHEDULER_PERSIST",
            settings.get("SCHEDULER_PERSIST"),
            "the frontier always persists (nodes never delete it): run `crawler purge <spider>` "
            "when a crawl is over",
        )
    queue = object_path(settings.get("SCHEDULER_QUEUE_CLASS"))
    if given(settings, "SCHEDULER_QUEUE_CLASS") and queue not in PRIORITY_QUEUES:
        raise refuse(
            "SCHEDULER_QUEUE_CLASS",
            queue,
            "the frontier is a priority queue (higher priority first, then first in first "
            "out): order requests with their priority (e.g. DEPTH_PRIORITY)",
        )
    dupefilter = object_path(settings.get("DUPEFILTER_CLASS"))
    if dupefilter.startswith("scrapy_redis."):
        raise refuse(
            "DUPEFILTER_CLASS",
            dupefilter,
            "remove it: the frontier deduplicates in Redis (FRONTIER_DUPEFILTER)",
        )


def _aliases(settings: BaseSettings) -> None:
    for theirs, ours in ALIASES.items():
        if not given(settings, theirs):
            continue
        if given(settings, ours) and str(settings.get(ours)) != str(settings.get(theirs)):
            raise ValueError(
                f"{theirs}={settings.get(theirs)!r} and {ours}={settings.get(ours)!r} disagree: "
                f"they are the same setting, give one"
            )
        settings.set(ours, settings.get(theirs), priority=setting_priority(settings, theirs))


def _seed_type(settings: BaseSettings) -> None:
    flags = {"REDIS_START_URLS_AS_SET": "set", "REDIS_START_URLS_AS_ZSET": "zset"}
    chosen = [flag for flag in flags if given(settings, flag) and get_bool(settings, flag)]
    if len(chosen) > 1:
        raise ValueError(
            "REDIS_START_URLS_AS_SET and REDIS_START_URLS_AS_ZSET are both true: choose one "
            "(or SEEDS_TYPE=set|zset)"
        )
    for flag in chosen:
        if given(settings, "SEEDS_TYPE") and settings.get("SEEDS_TYPE") != flags[flag]:
            raise ValueError(
                f"{flag}=True and SEEDS_TYPE={settings.get('SEEDS_TYPE')!r} disagree: they say "
                "the same thing, give one"
            )
        settings.set("SEEDS_TYPE", flags[flag], priority=setting_priority(settings, flag))


def _stats_key(settings: BaseSettings) -> None:
    stats_class = settings.get("STATS_CLASS")
    redis_stats = object_path(stats_class) == REDIS_STATS
    if redis_stats and settings.get("REDIS_URL"):
        raise refuse(
            "STATS_CLASS",
            stats_class,
            "it keeps one stats hash for all the nodes, as text: the crawl ledger, `crawler "
            "status` and each node's own figures read nothing from it (0 pages, NOT STARTED). "
            "Remove it: the crawl ledger {<spider>}:ledger:<crawl id> sums every node's stats "
            "(`crawler status --json`)",
        )
    if not redis_stats and given(settings, "STATS_KEY"):
        raise refuse(
            "STATS_KEY",
            settings.get("STATS_KEY"),
            f"it only applies to STATS_CLASS={REDIS_STATS!r}, which is not set (the crawl "
            "ledger {<spider>}:ledger:<crawl id> sums every node's stats: `crawler status`)",
        )


def _items_key(settings: BaseSettings) -> None:
    given_pipelines = settings.getdict("ITEM_PIPELINES").items()
    pipelines = {object_path(key): value for key, value in given_pipelines}
    if pipelines.get(REDIS_PIPELINE) is not None:
        return
    for name in ("REDIS_ITEMS_KEY", "REDIS_ITEMS_SERIALIZER"):
        if given(settings, name):
            raise refuse(
                name,
                settings.get(name),
                f"it only applies to {REDIS_PIPELINE}, which is not in ITEM_PIPELINES "
                "(items go to Kafka: KAFKA_TOPIC_TEMPLATE)",
            )


# scrapy-redis methods this class does not call: overriding one would be silently ignored.
SCRAPY_REDIS_METHODS = {
    "setup_redis": "nothing: the spider connects itself",
    "next_requests": "make_request_from_data(data)",
    "schedule_next_requests": "make_request_from_data(data)",
    "fetch_data": "SEEDS_TYPE / REDIS_START_URLS_AS_SET / _AS_ZSET",
    "pop_list_queue": "SEEDS_TYPE",
    "pop_priority_queue": "SEEDS_TYPE",
    "count_size": "nothing: the node counts the shared queue itself",
    "spider_idle": "max_idle_time / MAX_IDLE_TIME_BEFORE_CLOSE",
}


def _check_overrides(spidercls: type) -> None:
    """Refuse a spider that overrides a scrapy-redis method this class never calls, or reads
    scrapy-redis's ``self.server``, which it does not have."""
    for name, instead in SCRAPY_REDIS_METHODS.items():
        if hasattr(spidercls, name):
            raise ValueError(
                f"spider {spidercls.__name__} defines {name}(), a scrapy-redis method that "
                f"crawler.spiders.base.RedisSpider never calls: use {instead} instead "
                "(docs/migrating-from-scrapy-redis.md)"
            )
    if "server" not in dir(spidercls) and _reads_self_server(spidercls):
        raise ValueError(
            f"spider {spidercls.__name__} reads self.server, scrapy-redis's Redis client of the "
            "spider, which crawler.spiders.base.RedisSpider does not have (every page would "
            "fail): make your own, e.g. `spider.server = redis.Redis.from_url(crawler.settings"
            "['REDIS_URL'])` in from_crawler (docs/migrating-from-scrapy-redis.md)"
        )


def _reads_self_server(spidercls: type) -> bool:
    """Whether the spider's own classes (not this project's) read ``self.server`` and never
    set it (their source, where Python has it)."""
    uses: list[ast.Attribute] = []
    for cls in spidercls.__mro__:
        if cls.__module__.startswith(("crawler.", "scrapy")) or cls is object:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError, SyntaxError):  # no source: nothing to say
            continue
        uses += [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and node.attr == "server"
            and isinstance(node.value, ast.Name)
            and node.value.id in {"self", "spider"}
        ]
    return bool(uses) and not any(isinstance(node.ctx, ast.Store) for node in uses)


def check_spider_class(spidercls: type) -> None:
    """Refuse spiders built on scrapy-redis's own classes (they pop seeds and never see our
    frontier's guarantees; ours take the same attributes), and spiders whose only start is
    ``start_requests()``, which Scrapy 2.19 never calls."""
    own_start = next((c for c in spidercls.__mro__ if "start" in vars(c)), None)
    own_requests = next((c for c in spidercls.__mro__ if "start_requests" in vars(c)), None)
    if (
        own_requests is not None
        and (
            own_start is None
            or spidercls.__mro__.index(own_start) > spidercls.__mro__.index(own_requests)
        )
        and not own_requests.__module__.startswith("scrapy_redis")
    ):
        raise ValueError(
            f"spider {spidercls.__name__} defines start_requests(), which Scrapy 2.19 never "
            "calls (it would crawl nothing): rename it to `async def start(self)` and yield "
            "the same requests (a RedisSpider: also `async for r in super().start(): yield r`)"
        )
    if getattr(spidercls, "reads_redis_seeds", False):
        _check_overrides(spidercls)
    for base in spidercls.__mro__:
        if base.__module__.startswith("scrapy_redis"):
            ours = "RedisCrawlSpider" if "Crawl" in base.__name__ else "RedisSpider"
            raise ValueError(
                f"spider {spidercls.__name__} is built on {base.__module__}.{base.__name__}: "
                f"change the import to `from crawler.spiders.base import {ours}` (same "
                "attributes and make_request_from_data; docs/migrating-from-scrapy-redis.md)"
            )
