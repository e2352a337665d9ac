"""Scrapy's commands that look at pages run standalone, whatever ``REDIS_URL`` says.

``scrapy fetch``, ``view``, ``parse``, ``shell``, ``check`` and ``bench`` download a page or
two to show them; in cluster mode their requests went through the shared frontier (where
``fetch``'s own callback, a function, cannot be stored: it printed nothing) and took the
spider's start claim, so the next ``scrapy crawl`` of the crawl crawled nothing. The
project's versions of them (``crawler.commands``) set ``CRAWLER_STANDALONE_COMMAND`` to
their name, and ``ClusterAddon`` then turns ``REDIS_URL`` and ``KAFKA_BOOTSTRAP_SERVERS``
off for the run.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)
SETTING = "CRAWLER_STANDALONE_COMMAND"
SERVICES = ("REDIS_URL", "KAFKA_BOOTSTRAP_SERVERS")


def marked(command: type[Any], name: str) -> dict[str, Any]:
    """``command``'s default settings with the mark of a standalone command ``name``."""
    return {**command.default_settings, SETTING: name}


def apply(settings: BaseSettings) -> None:
    """Turn the cluster off for a command marked standalone."""
    name = settings.get(SETTING)
    if not name:
        return
    given = [service for service in SERVICES if settings.get(service)]
    for service in SERVICES:
        settings.set(service, "", priority="cmdline")
    if given:
        logger.info(
            "scrapy %s runs standalone: %s not used (it would go through the shared frontier)",
            name,
            " and ".join(given) + (" are" if len(given) > 1 else " is"),
        )
