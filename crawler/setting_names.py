"""Setting names that look misspelt: one a user gave (``-s``, ``custom_settings``, the
environment's ``CRAWLER_SETTING_<NAME>``) that no component reads but that resembles one
Scrapy, this project, scrapy-redis (which the project maps) or scrapy-playwright reads.

Scrapy passes any name on, so a misspelt one left the default in place without a word; a
user's own code may read names of its own, so only a close resemblance is named (a WARNING at
start, by ``ClusterAddon``), never refused: a known name in lower case, difflib's ratio from
``RESEMBLANCE``, or one letter off a known name of 8 or more.
"""

from __future__ import annotations

import difflib
import functools
import importlib

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings, default_settings

from crawler.scrapy_redis_compat import ALIASES, MAPPED, REFUSED

RESEMBLANCE = 0.9  # difflib's ratio from which a name is taken for a misspelling
PROJECT_MODULES = ("settings.base", "settings.dev", "settings.prod")
# set by the project's own commands and add-on, never by a user
INTERNAL = (
    "CRAWLER_DOWNLOAD_HANDLERS",
    "CRAWLER_SPIDER_ARGUMENTS",
    "CRAWLER_STANDALONE_COMMAND",
    "CRAWLER_USER_FEED_URI_PARAMS",
)
# scrapy-playwright's, which the add-on passes on (and sets some of)
PLAYWRIGHT = (
    "PLAYWRIGHT_ABORT_REQUEST",
    "PLAYWRIGHT_BROWSER_PROVIDER",
    "PLAYWRIGHT_BROWSER_TYPE",
    "PLAYWRIGHT_CDP_KWARGS",
    "PLAYWRIGHT_CDP_URL",
    "PLAYWRIGHT_CONNECT_KWARGS",
    "PLAYWRIGHT_CONNECT_URL",
    "PLAYWRIGHT_CONTEXTS",
    "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT",
    "PLAYWRIGHT_DOWNLOAD_TIMEOUT",
    "PLAYWRIGHT_LAUNCH_OPTIONS",
    "PLAYWRIGHT_MAX_CONTEXTS",
    "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT",
    "PLAYWRIGHT_PROCESS_REQUEST_HEADERS",
    "PLAYWRIGHT_RESTART_DISCONNECTED_BROWSER",
)


@functools.cache
def known_names() -> frozenset[str]:
    """Names Scrapy's defaults, the project's settings, the scrapy-redis mapping and
    scrapy-playwright know."""
    modules = [default_settings, *map(importlib.import_module, PROJECT_MODULES)]
    names = {name for module in modules for name in dir(module) if name.isupper()}
    return frozenset(names | set(ALIASES) | set(REFUSED) | MAPPED | set(INTERNAL) | set(PLAYWRIGHT))


def misspelt(settings: BaseSettings) -> list[tuple[str, str]]:
    """(given, the known name it resembles) for each name given above Scrapy's defaults."""
    known = known_names()
    found = []
    for name in sorted(settings.attributes):
        if name in known or (settings.getpriority(name) or 0) <= SETTINGS_PRIORITIES["default"]:
            continue
        if name.upper() in known:  # Scrapy reads upper-case names only
            found.append((name, name.upper()))
        elif close := difflib.get_close_matches(name, known, n=1, cutoff=RESEMBLANCE) or [
            other for other in sorted(known) if one_edit_apart(name, other)
        ]:
            found.append((name, close[0]))
    return found


def one_edit_apart(given: str, known: str) -> bool:
    """Whether ``given`` is ``known`` with one letter changed, added, dropped or two swapped,
    for names of 8 letters or more (``REDIS_URI``: difflib's ratio stays under
    ``RESEMBLANCE`` for short names)."""
    if len(known) < 8 or abs(len(given) - len(known)) > 1 or given == known:
        return False
    if len(given) == len(known):
        diffs = [i for i, (a, b) in enumerate(zip(given, known, strict=True)) if a != b]
        if len(diffs) == 1:
            return True
        first, second = diffs[:2] if len(diffs) == 2 else (0, 0)
        return (
            len(diffs) == 2
            and second == first + 1
            and given[first] == known[second]
            and (given[second] == known[first])
        )
    shorter, longer = sorted((given, known), key=len)
    return any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))


# names only this project's settings define: one missing means they are not loaded
PROJECT_MARKERS = ("SEEDS_TYPE", "FRONTIER_PARTITIONS", "KAFKA_TOPIC_TEMPLATE")


def require_project_settings(settings: BaseSettings) -> None:
    """Refuse settings that are not this project's: a Scrapy project's own settings module
    gives none of its defaults (nor reads REDIS_URL and the rest from the environment)."""
    missing = [name for name in PROJECT_MARKERS if name not in settings]
    if missing:
        raise ValueError(
            f"this project's settings are not loaded ({', '.join(missing)} unset): run from the "
            "project's directory (its scrapy.cfg names the settings package `settings`) with your "
            "spiders' module in SPIDER_MODULES (e.g. CRAWLER_SETTING_SPIDER_MODULES="
            "crawler.spiders,myproject.spiders); a settings module of your own must begin with "
            "`from settings import *`, which also reads REDIS_URL, KAFKA_BOOTSTRAP_SERVERS and "
            "CRAWLER_SETTING_<NAME> from the environment"
        )
