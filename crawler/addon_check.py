"""Refuse a crawl whose ``ADDONS`` lost ``ClusterAddon`` (Scrapy imports only).

Every check and component of the project is put in place by ``ClusterAddon``: it chooses
cluster or standalone mode, refuses what cannot work, and adds the frontier, the Kafka
pipeline and the shared sessions. Scrapy's docs enable an add-on with ``ADDONS = {...}`` in
``settings.py``; written after ``from settings import *`` that replaces the project's dict, and
a spider's ``custom_settings`` may turn the add-on off (``None``). Without this check such a
node crawled alone on Scrapy's own scheduler, wrote nothing to Redis or Kafka and exited 0.
The project's ``crawl`` and ``runspider`` commands look at the settings each crawler will
apply (the project's, ``-s``, the spider's) before it starts; so they do at its reactor:
none (``reactorless_problem``), or another than asyncio's in cluster mode (``reactor_problem``,
which the add-on refuses too).
"""

from __future__ import annotations

from scrapy.settings import BaseSettings
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

CLUSTER_ADDON = "crawler.addon.ClusterAddon"


ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"


class NotStarted(Exception):
    """A crawl the project's ``crawl`` and ``runspider`` refuse before its crawler starts."""


class ClusterAddonMissing(NotStarted):
    """``ADDONS`` does not enable ``ClusterAddon``."""


def reactorless_problem(settings: BaseSettings) -> str | None:
    """Why this project cannot crawl on the settings' reactor: none at all (None: it can).
    Refused by the project's ``crawl`` and ``runspider``; Scrapy's test helpers build crawlers
    without a reactor to look at their settings, so the add-on lets them be."""
    if settings.getbool("TWISTED_REACTOR_ENABLED", True):
        return None
    # an audit: standalone, every download failed (NotSupported: the node's download handler
    # kept Twisted's HTTP handler) and the run exited 0 with 0 items; a traceback in cluster mode
    return (
        "TWISTED_REACTOR_ENABLED=False: this project runs on Twisted's asyncio reactor "
        "(Scrapy's default): the node's download handler, the frontier and the Kafka pipeline "
        "need it; remove the setting"
    )


def reactor_problem(settings: BaseSettings) -> str | None:
    """Why ``TWISTED_REACTOR`` cannot serve cluster mode (None: it can, or no ``REDIS_URL``).
    Checked again before the crawler starts: with another reactor Scrapy reports the add-on's
    refusal as Twisted's 'Unhandled error in Deferred', with two tracebacks."""
    reactor = settings.get("TWISTED_REACTOR")
    if not settings.get("REDIS_URL") or not reactor or reactor == ASYNCIO_REACTOR:
        return None
    return (
        f"TWISTED_REACTOR={reactor!r} with REDIS_URL set: cluster mode runs on asyncio "
        f"({ASYNCIO_REACTOR}); remove the setting, or unset REDIS_URL to crawl standalone with it"
    )


def _loaded(addon: object) -> object | None:
    """The add-on ``ADDONS`` names (None: it cannot be loaded)."""
    try:
        return load_object(addon) if isinstance(addon, str) else addon
    except (ImportError, AttributeError, NameError, ValueError):
        return None


def require_cluster_addon(settings: BaseSettings) -> None:
    """Raise ``ClusterAddonMissing`` saying what to write when ``ADDONS`` lacks ClusterAddon."""
    cluster_addon = load_object(CLUSTER_ADDON)
    enabled = build_component_list(settings["ADDONS"])
    loaded = [_loaded(addon) for addon in enabled]
    if None in loaded:  # Scrapy says why when it loads the add-ons: one may be ClusterAddon's
        return
    if any(isinstance(addon, type) and issubclass(addon, cluster_addon) for addon in loaded):
        return
    raise ClusterAddonMissing(
        f"ADDONS has no {CLUSTER_ADDON} (it is {dict(settings.getdict('ADDONS'))!r}): without it "
        "nothing of the cluster runs (no shared frontier, no Kafka, no checks) and each node "
        "would crawl alone. Add your add-ons to the project's instead of replacing them: "
        'ADDONS = {**ADDONS, "your.Addon": 10} after `from settings import *`; a spider\'s '
        "custom_settings or -s ADDONS replace the project's too, so give both there: "
        f'{{"{CLUSTER_ADDON}": 0, "your.Addon": 10}}; never set ClusterAddon to None'
    )
