"""Resolve the settings module's values: base, then profile, then environment.

Besides the variables of ``ENV_OVERRIDES``, any setting can be given in the
environment as ``CRAWLER_SETTING_<NAME>=<value>`` (a string, read by each
component through Scrapy's typed getters exactly like ``-s NAME=<value>``).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

PROFILE_ENV = "CRAWLER_PROFILE"
DEFAULT_PROFILE = "dev"
PROFILES = {"dev": "settings.dev", "prod": "settings.prod"}

# Environment variable -> setting it overrides (strings, used as given unless ENV_READERS has
# a reader for the variable).
ENV_OVERRIDES = {
    "REDIS_URL": "REDIS_URL",
    "KAFKA_BOOTSTRAP_SERVERS": "KAFKA_BOOTSTRAP_SERVERS",
    "CRAWLER_NODE_ID": "CRAWLER_NODE_ID",
    "CRAWLER_CRAWL_ID": "CRAWLER_CRAWL_ID",
    "CRAWLER_LOG_LEVEL": "LOG_LEVEL",
    "METRICS_HOST": "METRICS_HOST",
}
SETTING_PREFIX = "CRAWLER_SETTING_"  # CRAWLER_SETTING_<NAME>=<value> sets NAME


def uppercase_names(module: ModuleType) -> dict[str, Any]:
    return {name: getattr(module, name) for name in dir(module) if name.isupper()}


def _log_level(given: str) -> str:
    """``CRAWLER_LOG_LEVEL`` in any case (Python's logging takes only upper-case names)."""
    level = given.strip().upper()
    if level not in logging.getLevelNamesMapping():
        raise ValueError(
            f"CRAWLER_LOG_LEVEL={given!r} is not a log level; choose one of "
            "DEBUG, INFO, WARNING, ERROR, CRITICAL"
        )
    return level


# Variables of ENV_OVERRIDES read as more than their text (a ValueError names the variable).
ENV_READERS: dict[str, Callable[[str], str]] = {"CRAWLER_LOG_LEVEL": _log_level}


def resolve_settings(environ: Mapping[str, str]) -> dict[str, Any]:
    """Return every setting for the profile and environment given."""
    profile = environ.get(PROFILE_ENV, DEFAULT_PROFILE).strip() or DEFAULT_PROFILE
    if profile not in PROFILES:
        raise ValueError(
            f"{PROFILE_ENV}={profile!r} is not a profile; choose one of {sorted(PROFILES)}"
        )
    values = uppercase_names(importlib.import_module("settings.base"))
    values.update(uppercase_names(importlib.import_module(PROFILES[profile])))
    values["CRAWLER_PROFILE"] = profile
    for variable, setting in ENV_OVERRIDES.items():
        if variable in environ:
            read = ENV_READERS.get(variable)
            values[setting] = environ[variable] if read is None else read(environ[variable])
    for variable, value in environ.items():
        name = variable.removeprefix(SETTING_PREFIX)
        if variable.startswith(SETTING_PREFIX) and name:
            if name != name.upper() or not name.replace("_", "").isalnum():
                raise ValueError(f"{variable}: {name!r} is not a setting name")
            values[name] = value
    return values
