"""Refuse a crawl whose ``ADDONS`` lost ``ClusterAddon`` (Scrapy imports only).

Every check and component of the project is put in place by ``ClusterAddon``: it chooses
cluster or standalone mode, refuses what cannot work, and adds the frontier, the Kafka
pipeline and the shared sessions. Scrapy's docs enable an add-on with ``ADDONS = {...}`` in
``settings.py``; written after ``from settings import *`` that replaces the project's dict, and
a spider's ``custom_settings`` may turn the add-on off (``None``). Without this check such a
node crawled alone on Scrapy's own scheduler, wrote nothing to Redis or Kafka and exited 0.
The project's ``crawl`` and ``runspider`` commands look at the settings each crawler will
apply (the project's, ``-s``, the spider's) before it starts.
"""

from __future__ import annotations

from scrapy.settings import BaseSettings
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

CLUSTER_ADDON = "crawler.addon.ClusterAddon"


class ClusterAddonMissing(Exception):
    """``ADDONS`` does not enable ``ClusterAddon``."""


def _is_cluster_addon(addon: object, cluster_addon: type) -> bool:
    """``ClusterAddon`` or a project's subclass of it (one that cannot be loaded is not: Scrapy
    says why when it loads the add-ons)."""
    try:
        loaded = load_object(addon) if isinstance(addon, str) else addon
    except (ImportError, AttributeError, NameError, ValueError):
        return False
    return isinstance(loaded, type) and issubclass(loaded, cluster_addon)


def require_cluster_addon(settings: BaseSettings) -> None:
    """Raise ``ClusterAddonMissing`` saying what to write when ``ADDONS`` lacks ClusterAddon."""
    cluster_addon = load_object(CLUSTER_ADDON)
    enabled = build_component_list(settings["ADDONS"])
    if any(_is_cluster_addon(addon, cluster_addon) for addon in enabled):
        return
    raise ClusterAddonMissing(
        f"ADDONS has no {CLUSTER_ADDON} (it is {dict(settings.getdict('ADDONS'))!r}): without it "
        "nothing of the cluster runs (no shared frontier, no Kafka, no checks) and each node "
        "would crawl alone. Add your add-ons to the project's instead of replacing them: "
        'ADDONS = {**ADDONS, "your.Addon": 10} after `from settings import *`; a spider\'s '
        "custom_settings or -s ADDONS replace the project's too, so give both there: "
        f'{{"{CLUSTER_ADDON}": 0, "your.Addon": 10}}; never set ClusterAddon to None'
    )
