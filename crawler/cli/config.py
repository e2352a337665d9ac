"""Where the CLI finds Redis, Kafka and the spool: flags, else the project settings (the
module ``SCRAPY_SETTINGS_MODULE`` or ``scrapy.cfg`` names, as the nodes read it)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from typing import Any

from scrapy.settings import Settings
from scrapy.utils.conf import closest_scrapy_cfg, get_config

from crawler.cli.spiders import spider_facts
from crawler.frontier.admin import FrontierAdmin
from crawler.kafka.config import security_setting
from crawler.redis_checks import topology_problem
from crawler.redis_connection import AsyncRedis, SyncRedis, async_client, sync_client
from crawler.redis_outage import REDIS_FAILURES
from crawler.redis_url import RedisConfig
from crawler.scrapy_redis_url import redis_url_setting
from crawler.settings_values import get_float
from settings.resolve import resolve_settings, uppercase_names


def settings_module() -> tuple[str, str]:
    """The settings module ``scrapy crawl`` would read here, and where it is named:
    ``SCRAPY_SETTINGS_MODULE``, else the closest ``scrapy.cfg``'s ``[settings]`` (its folder put
    on the path, as Scrapy does; the commands read only the variable, and seeds went where no
    node read). ("", "") for none."""
    module = os.environ.get("SCRAPY_SETTINGS_MODULE", "").strip()
    project = os.environ.get("SCRAPY_PROJECT", "default")
    config = get_config()
    if module or not config.has_option("settings", project):
        return module, "SCRAPY_SETTINGS_MODULE" if module else ""
    closest = closest_scrapy_cfg()
    if closest and str(Path(closest).parent) not in sys.path:
        sys.path.append(str(Path(closest).parent))
    return config.get(
        "settings", project
    ).strip(), f"{closest or 'scrapy.cfg'} [settings] {project}"


def project_settings() -> dict[str, Any]:
    """The settings the nodes read: the module ``settings_module`` names (a project of the
    user's, which begins with ``from settings import *``), else this project's, with the
    environment's overrides."""
    module, named_in = settings_module()
    if not module or module == "settings":
        return resolve_settings(os.environ)
    try:
        return uppercase_names(importlib.import_module(module))
    except ImportError as exc:
        raise SystemExit(
            f"settings module {module!r} ({named_in}) cannot be imported: {exc}"
        ) from exc


def add_kafka_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        default=None,
        help="Kafka bootstrap servers (default: KAFKA_BOOTSTRAP_SERVERS)",
    )


def kafka_security() -> dict[str, Any]:
    """The ``security.*``, ``sasl.*`` and ``ssl.*`` keys of ``KAFKA_PRODUCER_CONFIG``, for
    every Kafka client a command makes (as the nodes' clients take them)."""
    try:
        return security_setting(project_settings())
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc


def kafka_bootstrap(args: argparse.Namespace) -> str:
    bootstrap = args.bootstrap or project_settings()["KAFKA_BOOTSTRAP_SERVERS"]
    if not bootstrap:
        raise SystemExit("no Kafka: give --bootstrap or set KAFKA_BOOTSTRAP_SERVERS")
    return str(bootstrap)


def add_spool_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spider", help="spider whose spool to use")
    parser.add_argument("--dir", default=None, help="spool folder (default: KAFKA_SPOOL_DIR)")


def spool_dir(args: argparse.Namespace) -> Path:
    """The spider's folder in ``--dir`` (which must exist: a mistyped one would look like an
    empty spool) or ``KAFKA_SPOOL_DIR``."""
    if args.dir is not None and not Path(args.dir).is_dir():
        raise SystemExit(
            f"--dir {args.dir}: not a folder (give the KAFKA_SPOOL_DIR of the nodes of this "
            "host: they make it when they start)"
        )
    return Path(args.dir or project_settings()["KAFKA_SPOOL_DIR"]) / str(args.spider)


def add_redis_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--redis", default=None, help="Redis URL (default: REDIS_URL)")


def redis_config(args: argparse.Namespace) -> RedisConfig:
    """Redis as ``--redis`` or ``REDIS_URL`` names it; a bad URL ends the command."""
    setting = "--redis" if args.redis else "REDIS_URL"
    try:
        return RedisConfig.from_url(redis_url(args), setting)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


# seconds a command waits for one Redis answer (a frozen Redis, which keeps its sockets, held a
# command until it came back)
CLI_TIMEOUT = 30.0


def no_answer(config: RedisConfig, exc: Exception) -> SystemExit:
    """The end of a command whose Redis does not answer."""
    return SystemExit(f"Redis at {config.display} does not answer: {exc}")


def checked_config(args: argparse.Namespace) -> RedisConfig:
    """The command's Redis, unless its URL names another topology than the server's or
    credentials the server refuses (``crawler.redis_checks``: the command ends saying so)."""
    config = redis_config(args)
    if problem := topology_problem(config):
        raise SystemExit(problem)
    return config


def redis_client(args: argparse.Namespace) -> SyncRedis:
    config = checked_config(args)
    client: SyncRedis | None = None
    try:
        client = sync_client(
            config, socket_timeout=CLI_TIMEOUT, socket_connect_timeout=5, retries=1
        )
        client.ping()
    except REDIS_FAILURES as exc:
        if client is not None:
            client.close()
        raise no_answer(config, exc) from exc
    return client


async def async_redis_client(args: argparse.Namespace) -> AsyncRedis:
    """``redis_client`` for asyncio commands: a client of Redis that answered a ping."""
    config = checked_config(args)
    client: AsyncRedis | None = None
    try:
        client = async_client(config, socket_connect_timeout=5)
        await client.ping()
    except REDIS_FAILURES as exc:
        if client is not None:
            await client.aclose()
        raise no_answer(config, exc) from exc
    return client


def frontier_admin(client: SyncRedis, spider: str) -> FrontierAdmin:
    """A ``FrontierAdmin`` with the spider's seed keys (its ``redis_key``, else ``SEEDS_KEY``)
    and the key templates and node ttl of the project settings."""
    project = project_settings()
    facts = spider_facts(spider, project)
    settings = Settings(project)
    return FrontierAdmin(
        client,
        spider,
        seeds_key=facts.seeds_key,
        invalid_key=facts.invalid_key,
        politeness_key=settings["POLITENESS_KEY"],
        node_ttl=get_float(settings, "FRONTIER_LEASE_TIMEOUT"),
        heartbeat_interval=get_float(settings, "FRONTIER_HEARTBEAT_INTERVAL"),
    )


def redis_url(args: argparse.Namespace) -> str:
    """``--redis``, else the project's Redis as its nodes reach it (``REDIS_URL``, or
    scrapy-redis's ``REDIS_HOST``/``REDIS_PORT``/``REDIS_PARAMS`` mapped to it)."""
    url = args.redis
    if not url:
        settings = Settings(project_settings())
        try:
            redis_url_setting(settings)
        except ValueError as exc:
            raise SystemExit(str(exc)) from exc
        url = settings["REDIS_URL"]
    if not url:
        raise SystemExit("no Redis: give --redis or set REDIS_URL")
    return str(url)
