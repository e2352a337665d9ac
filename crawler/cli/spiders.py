"""What the commands need to know of a spider's class: its topics, its session platform and
where its seeds are.

Spiders are looked up with Scrapy's spider loader in the project's ``SPIDER_MODULES``;
a spider's ``custom_settings`` override the project's topic templates and seed keys, as
they do on the nodes. Commands that take a spider name refuse one the project does not have
(``require_spider``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings
    from scrapy.spiderloader import SpiderLoaderProtocol


@dataclass(frozen=True, slots=True)
class SpiderFacts:
    topic_template: str  # KAFKA_TOPIC_TEMPLATE
    dlq_template: str  # KAFKA_DLQ_TOPIC_TEMPLATE
    session_platform: str | None  # the class's session_platform
    seeds_key: str  # its redis_key, else SEEDS_KEY
    invalid_key: str  # SEEDS_INVALID_KEY
    seeds_type: object  # SEEDS_TYPE as set (crawler.frontier.seed_settings.seed_source reads it)
    settings: BaseSettings  # the project's, as the spider's nodes read them


@functools.cache
def _loader(modules: tuple[str, ...]) -> SpiderLoaderProtocol:
    # Scrapy and the spider modules load only here: the other commands start without them.
    from scrapy.settings import Settings  # noqa: PLC0415
    from scrapy.spiderloader import get_spider_loader  # noqa: PLC0415

    return get_spider_loader(Settings({"SPIDER_MODULES": list(modules)}))


def _modules(settings: Mapping[str, Any]) -> tuple[str, ...]:
    """``SPIDER_MODULES`` as Scrapy's ``getlist`` reads it: a list, or a comma-separated
    string (as ``CRAWLER_SETTING_SPIDER_MODULES`` gives it)."""
    value = settings["SPIDER_MODULES"]
    names = value.split(",") if isinstance(value, str) else value
    return tuple(name.strip() for name in names if name.strip())


def project_spiders(settings: Mapping[str, Any]) -> list[str]:
    """The spider names of the project (``SPIDER_MODULES``)."""
    return sorted(_loader(_modules(settings)).list())


def require_spider(name: str, settings: Mapping[str, Any]) -> None:
    """Refuse a spider name the project does not have (a typo would strand seeds or show
    an empty crawl as finished): ``SystemExit`` naming the spiders it has."""
    known = project_spiders(settings)
    if name not in known:
        raise SystemExit(
            f"crawler: no spider {name!r} in this project (SPIDER_MODULES); "
            f"its spiders: {', '.join(known) or 'none'}. A spider run with `scrapy runspider "
            f"FILE`: `scrapy purge {name}` purges it, and the commands take it once its module "
            "is in SPIDER_MODULES (CRAWLER_SETTING_SPIDER_MODULES=crawler.spiders,<module>, "
            "with its directory on PYTHONPATH)"
        )


def spider_class(name: str, settings: Mapping[str, Any]) -> type[Any]:
    """The class of a spider of the project (``require_spider`` checked the name)."""
    spider: type[Any] = _loader(_modules(settings)).load(name)
    return spider


def settings_as_nodes_read_them(
    settings: BaseSettings, spider_class: type[Any] | None
) -> BaseSettings:
    """A copy of ``settings`` with the spider's ``custom_settings`` applied and scrapy-redis's
    setting names mapped (``REDIS_START_URLS_KEY``...), as a node of the spider reads them."""
    from crawler import scrapy_redis_compat  # noqa: PLC0415 - imports Scrapy

    values = settings.copy()
    if spider_class is not None:
        spider_class.update_settings(values)
    scrapy_redis_compat.apply(values)
    return values


def _spider_class_or_none(name: str, settings: Mapping[str, Any]) -> type[Any] | None:
    try:
        return spider_class(name, settings)
    except KeyError:
        return None


def spider_facts(name: str, settings: Mapping[str, Any]) -> SpiderFacts:
    """What the commands need of spider ``name``, from the project's ``settings`` as its
    nodes read them (its ``custom_settings`` applied, when the project has the spider)."""
    # these import Scrapy: only the commands that need a spider's facts load it
    from scrapy.settings import Settings  # noqa: PLC0415

    from crawler.frontier.seed_settings import seed_key_names  # noqa: PLC0415

    spider_class = _spider_class_or_none(name, settings)
    platform = getattr(spider_class, "session_platform", None)
    values = settings_as_nodes_read_them(Settings(dict(settings)), spider_class)
    seeds_key, invalid_key = seed_key_names(values, spider_class or name)
    return SpiderFacts(
        topic_template=str(values["KAFKA_TOPIC_TEMPLATE"]),
        dlq_template=str(values["KAFKA_DLQ_TOPIC_TEMPLATE"]),
        session_platform=str(platform) if platform else None,
        seeds_key=seeds_key,
        invalid_key=invalid_key,
        seeds_type=values.get("SEEDS_TYPE"),
        settings=values,
    )
