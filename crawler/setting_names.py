"""Setting names that look misspelt: one a user gave (``-s``, ``custom_settings``, the
environment's ``CRAWLER_SETTING_<NAME>``) that no component reads but that resembles one
Scrapy or this project reads.

Scrapy passes any name on, so a misspelt one left the default in place without a word; a
user's own code may read names of its own, so only a close resemblance is named (a WARNING at
start, by ``ClusterAddon``), never refused.
"""

from __future__ import annotations

import difflib
import functools
import importlib

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings, default_settings

from crawler.scrapy_redis_compat import ALIASES, REFUSED

RESEMBLANCE = 0.9  # difflib's ratio from which a name is taken for a misspelling
PROJECT_MODULES = ("settings.base", "settings.dev", "settings.prod")


@functools.cache
def known_names() -> frozenset[str]:
    """Names Scrapy's defaults, the project's settings and the scrapy-redis mapping know."""
    modules = [default_settings, *map(importlib.import_module, PROJECT_MODULES)]
    names = {name for module in modules for name in dir(module) if name.isupper()}
    return frozenset(names | set(ALIASES) | set(REFUSED))


def misspelt(settings: BaseSettings) -> list[tuple[str, str]]:
    """(given, the known name it resembles) for each name given above Scrapy's defaults."""
    known = known_names()
    found = []
    for name in sorted(settings.attributes):
        if name in known or (settings.getpriority(name) or 0) <= SETTINGS_PRIORITIES["default"]:
            continue
        if close := difflib.get_close_matches(name, known, n=1, cutoff=RESEMBLANCE):
            found.append((name, close[0]))
    return found
