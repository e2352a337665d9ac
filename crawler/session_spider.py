"""A spider's ``session_platform`` checked at start (``ClusterAddon``): a platform name the
session keys can hold, and ``SharedSessionMiddleware`` on to serve it. A spider with sessions
turned off (``SESSIONS_ENABLED=False``, or the middleware set to None in
``DOWNLOADER_MIDDLEWARES``) fetched every page without the log-in, without a word."""

from __future__ import annotations

from scrapy.settings import BaseSettings

from crawler.component_orders import enabled_components
from crawler.sessions.keys import check_names
from crawler.settings_values import get_bool

SESSION_MIDDLEWARE = "crawler.middlewares.sessions.SharedSessionMiddleware"


def check_session_spider(spidercls: type, settings: BaseSettings) -> None:
    """Raise ValueError saying what to do when ``spidercls``'s ``session_platform`` cannot be
    served."""
    platform = getattr(spidercls, "session_platform", None)
    if not platform:
        return
    name = getattr(spidercls, "name", spidercls.__name__)
    try:
        check_names(str(platform))
    except ValueError as exc:
        raise ValueError(f"spider {name}'s session_platform: {exc}") from None
    if not get_bool(settings, "SESSIONS_ENABLED"):
        off = "SESSIONS_ENABLED is False"
    elif SESSION_MIDDLEWARE not in enabled_components(settings, "DOWNLOADER_MIDDLEWARES"):
        off = f"DOWNLOADER_MIDDLEWARES turns {SESSION_MIDDLEWARE} off"
    else:
        return
    raise ValueError(
        f"spider {name} sets session_platform={platform!r} but {off}: every page would be "
        "fetched without its log-in. Turn the shared sessions on, or take session_platform "
        "off the spider to crawl without them"
    )
