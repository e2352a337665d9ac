"""Settings given with ``-s`` or the environment parse as Scrapy's typed getters parse them.

Both give strings. Every list, dict, int, float and bool setting of ``settings.base``
is passed as a string (as ``-s`` passes it, through Scrapy's own argument parsing,
and as ``CRAWLER_SETTING_<NAME>`` in the environment): every component must then
build exactly the configuration it builds from the typed defaults.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
import scrapy
from scrapy.settings import Settings
from scrapy.spidermiddlewares.httperror import HttpErrorMiddleware
from scrapy.utils.conf import arglist_to_dict
from scrapy.utils.test import get_crawler

from crawler.addon import COMPONENTS, ClusterAddon
from crawler.cli.spiders import project_spiders
from crawler.extensions.cluster_logstats import ClusterLogStatsSettings
from crawler.extensions.ledger import LedgerSettings
from crawler.extensions.metrics import MetricsSettings
from crawler.frontier.keys import part_tag
from crawler.frontier.seed_settings import SeedSettings
from crawler.frontier.settings import FrontierSettings
from crawler.middlewares.sessions import SessionMiddlewareSettings
from crawler.middlewares.shared_cookies import SharedCookiesSettings
from crawler.pipelines.kafka_settings import KafkaPipelineSettings
from crawler.politeness.settings import PolitenessSettings
from crawler.sessions.settings import SessionSettings
from crawler.zhihu.settings import ZhihuSettings
from settings import base
from settings.resolve import SETTING_PREFIX, resolve_settings

CLUSTER = {"REDIS_URL": "redis://127.0.0.1:1/0", "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
# Components whose whole configuration is compared; each reads its settings once.
BUILDERS: dict[str, Callable[[Settings], Any]] = {
    "frontier": FrontierSettings.from_settings,
    "seeds": lambda s: SeedSettings.from_settings(s, "spider"),
    "politeness": PolitenessSettings.from_settings,
    "kafka": lambda s: KafkaPipelineSettings.from_crawler(SimpleNamespace(settings=s)),  # type: ignore[arg-type]
    "metrics": MetricsSettings.from_settings,
    "cookies": SharedCookiesSettings.from_settings,
    "ledger": LedgerSettings.from_settings,
    "logstats": ClusterLogStatsSettings.from_settings,
    "session middleware": SessionMiddlewareSettings.from_settings,
    "session store": SessionSettings.from_mapping,
    "zhihu": ZhihuSettings.from_settings,
}
TYPED = (bool, int, float, list, dict)
# Component lists and dicts Scrapy merges itself (getwithbase), not read by our components.
SCRAPY_COMPONENTS = {"ADDONS", "SPIDER_MIDDLEWARES", "DOWNLOADER_MIDDLEWARES", "EXTENSIONS"}
SCRAPY_COMPONENTS |= {"ITEM_PIPELINES", "SPIDER_MODULES", "DOWNLOAD_HANDLERS"}


def typed_defaults() -> dict[str, Any]:
    return {
        name: value
        for name, value in vars(base).items()
        if name.isupper() and isinstance(value, TYPED) and name not in SCRAPY_COMPONENTS
    }


def as_string(value: Any, *, json_lists: bool) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, dict) or (isinstance(value, list) and json_lists):
        return orjson.dumps(value).decode()
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)


def from_command_line(values: Mapping[str, str]) -> Settings:
    """Settings as ``scrapy crawl -s NAME=VALUE`` builds them (Scrapy's own parsing)."""
    settings = Settings(resolve_settings({}))
    settings.setdict(CLUSTER, priority="cmdline")
    settings.setdict(arglist_to_dict([f"{k}={v}" for k, v in values.items()]), priority="cmdline")
    return settings


def from_environment(values: Mapping[str, str]) -> Settings:
    environ = {f"{SETTING_PREFIX}{name}": value for name, value in values.items()}
    settings = Settings(resolve_settings({**environ, **CLUSTER}))
    return settings


def build_all(settings: Settings) -> dict[str, Any]:
    return {name: build(settings) for name, build in BUILDERS.items()}


@pytest.mark.parametrize("json_lists", [False, True], ids=["comma-lists", "json-lists"])
@pytest.mark.parametrize("source", [from_command_line, from_environment], ids=["-s", "env"])
def test_every_typed_setting_reads_the_same_from_strings(
    source: Callable[[Mapping[str, str]], Settings], json_lists: bool
) -> None:
    defaults = typed_defaults()
    assert {"POLITENESS_PENALTY_STATUSES", "ITEM_SCHEMA_DIRS", "SEEDS_DONT_FILTER"} <= set(defaults)
    strings = {name: as_string(value, json_lists=json_lists) for name, value in defaults.items()}
    native = Settings(resolve_settings(CLUSTER))
    assert build_all(source(strings)) == build_all(native)


@pytest.mark.parametrize("source", [from_command_line, from_environment], ids=["-s", "env"])
def test_penalty_statuses_are_status_codes(source: Callable[[Mapping[str, str]], Settings]) -> None:
    for given in ("429,503", " 429 , 503 ", "[429, 503]", '["429","503"]'):
        politeness = PolitenessSettings.from_settings(
            source({"POLITENESS_PENALTY_STATUSES": given})
        )
        assert politeness.penalty_statuses == frozenset({429, 503}), given
    with pytest.raises(ValueError, match=r"POLITENESS_PENALTY_STATUSES='429,abc' must be a list"):
        PolitenessSettings.from_settings(source({"POLITENESS_PENALTY_STATUSES": "429,abc"}))
    with pytest.raises(ValueError, match=r"POLITENESS_PENALTY_STATUSES='4290'"):
        PolitenessSettings.from_settings(source({"POLITENESS_PENALTY_STATUSES": "4290"}))


@pytest.mark.parametrize("source", [from_command_line, from_environment], ids=["-s", "env"])
def test_schema_dirs_take_a_json_list_and_refuse_missing_folders(
    source: Callable[[Mapping[str, str]], Settings], tmp_path: Path
) -> None:
    def kafka(value: str) -> KafkaPipelineSettings:
        settings = source({"ITEM_SCHEMA_DIRS": value})
        return KafkaPipelineSettings.from_crawler(SimpleNamespace(settings=settings))  # type: ignore[arg-type]

    folder = str(tmp_path)
    assert kafka(f'["builtin", "{folder}"]').schema_dirs == ("builtin", folder)
    assert kafka(f"builtin,{folder}").schema_dirs == ("builtin", folder)
    with pytest.raises(
        ValueError, match=r"ITEM_SCHEMA_DIRS=\['builtin', '/x'\]: /x is not a folder"
    ):
        kafka('["builtin","/x"]')
    with pytest.raises(ValueError, match=r"ITEM_SCHEMA_DIRS=.* is not a JSON array"):
        kafka('["builtin"')


def test_a_bad_environment_setting_name_is_refused() -> None:
    with pytest.raises(ValueError, match="CRAWLER_SETTING_lower: 'lower' is not a setting name"):
        resolve_settings({f"{SETTING_PREFIX}lower": "1"})


MINE = "tests.userproject.middlewares.ReplaceRequestMiddleware"


def test_a_projects_own_component_dicts_keep_the_projects_components() -> None:
    """A user's DOWNLOADER_MIDDLEWARES (or -s ITEM_PIPELINES...) replaces the whole dict in
    Scrapy: the lease, politeness and Kafka components must still be there."""
    settings = from_command_line(
        {
            "DOWNLOADER_MIDDLEWARES": f'{{"{MINE}": 500}}',
            "ITEM_PIPELINES": '{"tests.userproject.pipelines.IdentityPipeline": 300}',
            "SPIDER_MIDDLEWARES": '{"scrapy.spidermiddlewares.depth.DepthMiddleware": 50}',
            "EXTENSIONS": '{"crawler.extensions.metrics.PrometheusMetrics": null}',
        }
    )
    ClusterAddon().update_settings(settings)
    for name, components in COMPONENTS.items():
        given = {
            (path if isinstance(path, str) else f"{path.__module__}.{path.__qualname__}"): order
            for path, order in settings.getdict(name).items()
        }
        for path, order in components.items():
            expected = None if path.endswith("PrometheusMetrics") else order
            assert given[path] == expected, (name, path)
    assert settings.getdict("DOWNLOADER_MIDDLEWARES")[MINE] == 500


def test_the_cli_reads_spider_modules_given_as_one_comma_separated_string() -> None:
    """``CRAWLER_SETTING_SPIDER_MODULES=a,b`` names two modules, as ``-s`` does for nodes."""
    assert "hopper" in project_spiders({"SPIDER_MODULES": "crawler.spiders, tests.spiders"})
    assert project_spiders({"SPIDER_MODULES": ["crawler.spiders"]}) == ["pages", "zhihu"]


@pytest.mark.parametrize("source", [from_command_line, from_environment], ids=["-s", "env"])
def test_a_number_or_bool_setting_that_does_not_parse_is_refused_by_name(
    source: Callable[[Mapping[str, str]], Settings],
) -> None:
    scalars = sorted(n for n, v in typed_defaults().items() if isinstance(v, int | float))
    named: set[str] = set()
    unnamed: dict[str, str] = {}
    for name in scalars:
        settings = source({name: "x1"})
        for component, build in BUILDERS.items():
            try:
                build(settings)
            except ValueError as exc:
                if f"{name}='x1'" in str(exc):
                    named.add(name)
                else:
                    unnamed[name] = f"{component}: {exc}"
    assert unnamed == {}
    checked = {"FRONTIER_PREFETCH", "SEEDS_DONT_FILTER", "POLITENESS_RATE", "KAFKA_POLL_INTERVAL"}
    assert checked <= named


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_a_float_setting_that_is_not_finite_is_refused_by_name(bad: str) -> None:
    """NaN passes every range check (each comparison is false), infinity most: both failed
    later, in the crawl (a heartbeat loop crashing each second, a node that fetched nothing
    and said it finished)."""
    floats = sorted(n for n, v in typed_defaults().items() if isinstance(v, float))
    assert {"FRONTIER_LEASE_TIMEOUT", "POLITENESS_RATE", "KAFKA_POLL_INTERVAL"} <= set(floats)
    unrefused: list[str] = []
    for name in floats:
        settings = from_command_line({name: bad})
        refused = False
        for build in BUILDERS.values():
            try:
                build(settings)
            except ValueError as exc:
                refused = refused or f"{name}={bad!r}" in str(exc)
        if not refused:
            unrefused.append(name)
    assert unrefused == []


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"SEEDS_INVALID_KEY": ""}, "SEEDS_INVALID_KEY='' must not be empty"),
        ({"SEEDS_INVALID_KEY": "%(name)s:start_urls"}, "is the seed key: invalid seeds would be"),
        ({"REDIS_START_URLS_BATCH_SIZE": "0"}, r"REDIS_START_URLS_BATCH_SIZE, or the spider's"),
    ],
)
def test_seed_keys_and_batches_that_cannot_work_are_refused_by_their_names(
    given: dict[str, str], message: str
) -> None:
    """SEEDS_INVALID_KEY='' moved invalid seeds to a key named '', and the batch size was
    refused as SEEDS_BATCH_SIZE to a user who gave scrapy-redis's name (an audit)."""
    settings = from_command_line(given)
    ClusterAddon().update_settings(settings)
    with pytest.raises(ValueError, match=message):
        SeedSettings.from_settings(settings, "spider")


def test_a_list_setting_given_a_json_object_is_refused_by_name() -> None:
    """A list is comma-separated or a JSON array; an object was split on its commas."""
    lists = sorted(n for n, v in typed_defaults().items() if isinstance(v, list | tuple))
    assert "SEEDS_ALLOWED_META" in lists
    unrefused: list[str] = []
    for name in lists:
        settings = from_command_line({name: '{"a": 1, "b": 2}'})
        refused = False
        for build in BUILDERS.values():
            try:
                build(settings)
            except ValueError as exc:
                refused = refused or name in str(exc)
        if not refused:
            unrefused.append(name)
    assert unrefused == []


@pytest.mark.parametrize("bad", ["notjson", "[1]"])
@pytest.mark.parametrize("source", [from_command_line, from_environment], ids=["-s", "env"])
def test_a_dict_setting_that_is_not_an_object_is_refused_by_name(
    source: Callable[[Mapping[str, str]], Settings], bad: str
) -> None:
    dicts = sorted(n for n, v in typed_defaults().items() if isinstance(v, dict))
    assert {"KAFKA_PRODUCER_CONFIG", "KAFKA_TOPIC_CONFIG", "POLITENESS_SITE_RATES"} <= set(dicts)
    wrong: dict[str, str] = {}
    for name in dicts:
        settings = source({name: bad})
        for component, build in BUILDERS.items():
            try:
                build(settings)
            except ValueError as exc:
                if name not in str(exc):
                    wrong[name] = f"{component}: {exc}"
            except Exception as exc:  # noqa: BLE001  # any other error is the defect
                wrong[name] = f"{component}: {type(exc).__name__}: {exc}"
    assert wrong == {}


def test_a_scrapy_boolean_setting_that_does_not_parse_is_refused_by_name() -> None:
    """Scrapy's own getbool said only "Supported values for boolean settings are ...", from
    whichever component read it first (ROBOTSTXT_OBEY: the shared robots middleware)."""
    # TELNETCONSOLE_ENABLED's default is 1, not True: it was checked by neither list (an audit)
    for name in ("ROBOTSTXT_OBEY", "COOKIES_ENABLED", "HTTPCACHE_ENABLED", "TELNETCONSOLE_ENABLED"):
        settings = from_command_line({name: "maybe"})
        with pytest.raises(ValueError, match=f"{name}='maybe' is not a boolean"):
            ClusterAddon().update_settings(settings)


def test_scrapy_s_allowed_status_codes_given_as_text_are_read_as_numbers() -> None:
    """``-s HTTPERROR_ALLOWED_CODES=403`` gave Scrapy ``["403"]``, which no status (an int) is
    in: a 403 still went to the errback, here as in plain Scrapy (an audit), silently."""
    for given in ("403,404", '["403", 404]', "[403, 404]"):
        settings = from_command_line({"HTTPERROR_ALLOWED_CODES": given})
        ClusterAddon().update_settings(settings)
        assert settings.getlist("HTTPERROR_ALLOWED_CODES") == [403, 404]
        assert settings.getpriority("HTTPERROR_ALLOWED_CODES") == 40
        allowed = HttpErrorMiddleware(settings).handle_httpstatus_list
        assert 403 in allowed
    with pytest.raises(ValueError, match="HTTPERROR_ALLOWED_CODES='forbidden' is not an integer"):
        ClusterAddon().update_settings(from_command_line({"HTTPERROR_ALLOWED_CODES": "forbidden"}))


def test_a_spiders_download_delay_that_is_no_number_is_refused_by_name() -> None:
    class Paced(scrapy.Spider):
        name = "paced"
        download_delay = "abc"  # as `scrapy crawl paced -a download_delay=abc` sets it

    with pytest.warns(scrapy.exceptions.ScrapyDeprecationWarning, match="download_delay"):
        addon = ClusterAddon(get_crawler(Paced))  # Scrapy's own warning about the attribute
    with pytest.raises(ValueError, match=r"download_delay='abc' .*must be a number"):
        addon.update_settings(from_command_line(CLUSTER))


def test_the_log_level_variable_takes_any_case_and_names_itself_when_wrong() -> None:
    assert resolve_settings({"CRAWLER_LOG_LEVEL": "debug"})["LOG_LEVEL"] == "DEBUG"
    with pytest.raises(ValueError, match="CRAWLER_LOG_LEVEL='LOUD' is not a log level"):
        resolve_settings({"CRAWLER_LOG_LEVEL": "LOUD"})


def test_a_reactor_other_than_asyncio_stops_a_cluster_node_at_start() -> None:
    """-s TWISTED_REACTOR=...EPollReactor crawled standalone but, with REDIS_URL, logged
    CRITICAL tracebacks ending in 'Engine slot not assigned' after the spider opened."""
    settings = from_command_line({"TWISTED_REACTOR": "twisted.internet.epollreactor.EPollReactor"})
    with pytest.raises(ValueError, match=r"TWISTED_REACTOR='twisted.internet.epollreactor"):
        ClusterAddon().update_settings(settings)
    fine = from_command_line(
        {"TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor"}
    )
    ClusterAddon().update_settings(fine)


@pytest.mark.parametrize(
    ("values", "said"),
    [
        # a KeyError traceback at the first spill ("Scraper close failure")
        ({"FRONTIER_BACKLOG_TOPIC": "{nope}"}, "FRONTIER_BACKLOG_TOPIC='{nope}'"),
        # two spiders read each other's spilled requests: pages lost, a crawl never finished
        ({"FRONTIER_BACKLOG_TOPIC": "shared-backlog"}, "its own backlog topic"),
        # "not ready ... retrying" every second, nothing spilled, the bound ignored
        ({"FRONTIER_BACKLOG_TOPIC": "bad topic {spider}"}, "which Kafka cannot name"),
        # a template no spider name mends: renaming the spider is not the advice
        (
            {"FRONTIER_BACKLOG_TOPIC": "bad topic {spider}"},
            "whatever the spider's name: change FRONTIER_BACKLOG_TOPIC",
        ),
        ({"FRONTIER_SEEN_FEED": "True", "FRONTIER_SEEN_TOPIC": "{x}"}, "FRONTIER_SEEN_TOPIC"),
    ],
)
def test_a_frontier_topic_kafka_cannot_use_stops_the_start(
    values: dict[str, str], said: str
) -> None:
    settings = from_command_line(
        {"FRONTIER_QUEUE_MAX": "5", "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9", **values}
    )
    with pytest.raises(ValueError, match=re.escape(said)):
        ClusterAddon().update_settings(settings)


def test_a_spider_whose_backlog_topic_kafka_cannot_name_stops_the_start() -> None:
    class Shop(scrapy.Spider):
        name = "shop:books"

    settings = from_command_line(
        {"FRONTIER_QUEUE_MAX": "5", "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9"}
    )
    with pytest.raises(
        ValueError, match="FRONTIER_BACKLOG_TOPIC gives spider 'shop:books'"
    ) as said:
        ClusterAddon(get_crawler(Shop)).update_settings(settings)
    assert str(said.value).endswith(": rename the spider, or change FRONTIER_BACKLOG_TOPIC")


@pytest.mark.parametrize(
    ("name", "values"),
    [
        # the node hung at start for good, deaf to SIGTERM (part tags searched for ever)
        ("shop_{x}", {"FRONTIER_PARTITIONS": "4"}),
        # on a Redis Cluster its seed reader crashed every second (CROSSSLOT), nothing crawled
        ("shop_x}y", {"REDIS_URL": "redis+cluster://127.0.0.1:7000"}),
    ],
)
def test_a_spider_name_with_a_brace_is_refused_where_it_breaks_the_hash_tags(
    name: str, values: dict[str, str]
) -> None:
    """An audit: ``{`` and ``}`` end a Redis Cluster hash tag, and every key of a spider's
    frontier carries its name in one (``{<spider>}:queue``)."""
    spider = type("Braced", (scrapy.Spider,), {"name": name})
    settings = from_command_line({"KAFKA_TOPIC_TEMPLATE": "shop-items", **values})
    with pytest.raises(ValueError, match=re.escape(f"spider {name!r} has a brace")) as said:
        ClusterAddon(get_crawler(spider)).update_settings(settings)
    assert "rename the spider" in str(said.value)
    plain = from_command_line({"KAFKA_TOPIC_TEMPLATE": "shop-items"})
    ClusterAddon(get_crawler(spider)).update_settings(plain)  # one Redis, one part: it works


def test_a_spider_name_with_a_hash_is_refused_in_cluster_mode() -> None:
    """Part n of a spider's frontier in parts is ``{<spider>#<n>}``: a spider named
    ``axq#1`` crawled in part 1 of spider ``axq`` (2 parts), their pages and items mixed, and
    ``crawler purge axq`` deleted the other's dedup and records (an audit)."""
    spider = type("Hashed", (scrapy.Spider,), {"name": "axq#1"})
    settings = from_command_line({"KAFKA_TOPIC_TEMPLATE": "shop-items", **CLUSTER})
    with pytest.raises(ValueError, match=re.escape("spider 'axq#1' has a '#'")) as said:
        ClusterAddon(get_crawler(spider)).update_settings(settings)
    assert "spider 'axq' with FRONTIER_PARTITIONS" in str(said.value)
    assert "rename the spider" in str(said.value)


def test_no_part_tag_is_searched_for_ever() -> None:
    with pytest.raises(ValueError, match="has a brace"):
        part_tag("shop_{x}", 1, 4)
