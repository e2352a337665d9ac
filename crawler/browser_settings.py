"""How ``ClusterAddon`` hands the browser settings (``BROWSER_*``) to scrapy-playwright
(``PLAYWRIGHT_*``), and what it refuses at start.

- ``BROWSER_ENABLED=False`` while the project's ``DOWNLOAD_HANDLERS`` names scrapy-playwright's
  handler for a scheme is refused: that handler renders the scheme's browser requests whatever
  the setting says.
- ``PLAYWRIGHT_BROWSER_TYPE`` other than ``chromium`` is refused: nodes launch
  ``BROWSER_EXECUTABLE``, a Chromium.
- ``PLAYWRIGHT_LAUNCH_OPTIONS``: ``{"executable_path": BROWSER_EXECUTABLE, "headless": true}``
  merged with yours, at your setting's priority (your keys win); a persistent context of
  ``PLAYWRIGHT_CONTEXTS`` (a ``user_data_dir``) gets the same unless it names them.
- ``PLAYWRIGHT_MAX_PAGES_PER_CONTEXT`` and ``PLAYWRIGHT_MAX_CONTEXTS`` from
  ``BROWSER_MAX_PAGES`` and ``BROWSER_MAX_CONTEXTS``; a project or ``-s`` value of
  scrapy-playwright's own setting that differs is used when given at the same priority or
  higher, else replaced, with a WARNING either way.
"""

from __future__ import annotations

import logging
from typing import Any

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

from crawler.download_handler import PLAIN_HANDLERS, missing_browser, renders
from crawler.settings_values import get_bool, get_dict, get_int

logger = logging.getLogger(__name__)

ADDON = SETTINGS_PRIORITIES["addon"]


def apply(settings: BaseSettings) -> None:
    """Set scrapy-playwright's settings from the browser settings (after ``PLAIN_HANDLERS``
    is known); a ``ValueError`` names what cannot work."""
    if not get_bool(settings, "BROWSER_ENABLED"):
        _check_disabled(settings)
        return
    pages, contexts = (
        get_int(settings, "BROWSER_MAX_PAGES"),
        get_int(settings, "BROWSER_MAX_CONTEXTS"),
    )
    if pages < 1 or contexts < 0:
        raise ValueError(
            f"BROWSER_MAX_PAGES={pages} must be >= 1 and BROWSER_MAX_CONTEXTS={contexts} "
            ">= 0 (0: no limit)"
        )
    browser_type = settings.get("PLAYWRIGHT_BROWSER_TYPE")
    if browser_type is not None and str(browser_type).lower() != "chromium":
        raise ValueError(
            f"PLAYWRIGHT_BROWSER_TYPE={browser_type!r}: nodes render with Chromium "
            f"(BROWSER_EXECUTABLE={settings.get('BROWSER_EXECUTABLE')!r}, Debian's chromium "
            "package); remove PLAYWRIGHT_BROWSER_TYPE, or set BROWSER_ENABLED=False and take "
            "scrapy-playwright out of DOWNLOAD_HANDLERS to render nothing"
        )
    # scrapy-playwright looks the type up as given: "Chromium" passed the check and failed
    given = settings.getpriority("PLAYWRIGHT_BROWSER_TYPE") or 0
    settings.set("PLAYWRIGHT_BROWSER_TYPE", "chromium", max(given, ADDON))
    _launch_options(settings)
    _limit(settings, "BROWSER_MAX_PAGES", "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT", pages)
    if contexts:  # a spider naming more contexts than that waits for one to be closed
        _limit(settings, "BROWSER_MAX_CONTEXTS", "PLAYWRIGHT_MAX_CONTEXTS", contexts)


def _check_disabled(settings: BaseSettings) -> None:
    schemes = sorted(
        scheme for scheme, path in get_dict(settings, PLAIN_HANDLERS).items() if renders(path)
    )
    if schemes:
        raise ValueError(
            f"BROWSER_ENABLED=False, but DOWNLOAD_HANDLERS names scrapy-playwright's handler "
            f"for {', '.join(schemes)}: it renders their browser requests whatever "
            "BROWSER_ENABLED says; take it out of DOWNLOAD_HANDLERS to download them without "
            "a browser, or leave BROWSER_ENABLED on"
        )


def _launch_options(settings: BaseSettings) -> None:
    launch: dict[str, Any] = {
        "executable_path": settings.get("BROWSER_EXECUTABLE"),
        "headless": True,
        **get_dict(settings, "PLAYWRIGHT_LAUNCH_OPTIONS"),  # yours win
    }
    given = settings.getpriority("PLAYWRIGHT_LAUNCH_OPTIONS") or 0
    settings.set("PLAYWRIGHT_LAUNCH_OPTIONS", launch, max(given, ADDON))
    # a persistent context (user_data_dir) is launched from its own arguments alone
    named = get_dict(settings, "PLAYWRIGHT_CONTEXTS")
    persistent = {
        name: {**{key: launch[key] for key in ("executable_path", "headless")}, **given_kwargs}
        for name, given_kwargs in named.items()
        if isinstance(given_kwargs, dict) and "user_data_dir" in given_kwargs
    }
    if persistent:
        priority = max(settings.getpriority("PLAYWRIGHT_CONTEXTS") or 0, given)
        settings.set("PLAYWRIGHT_CONTEXTS", {**named, **persistent}, priority)
    if why := missing_browser(launch):
        logger.warning("%s", why)


def _limit(settings: BaseSettings, ours: str, theirs: str, value: int) -> None:
    """scrapy-playwright's ``theirs`` from our ``ours`` (``value``), unless a project or -s
    gave ``theirs`` another value at ``ours``'s priority or higher: then that one is used."""
    given_priority = settings.getpriority(theirs)
    if given_priority is None or given_priority <= ADDON:
        settings.set(theirs, value, "addon")
        return
    given = get_int(settings, theirs)
    if given == value:
        return
    ours_priority = settings.getpriority(ours) or 0
    if given_priority >= ours_priority:
        logger.warning(
            "%s=%d is used, not %s=%d (given at the same priority or higher); give one of them",
            theirs,
            given,
            ours,
            value,
        )
        return
    logger.warning("%s=%d replaces %s=%d (given at a lower priority)", ours, value, theirs, given)
    settings.set(theirs, value, ours_priority)
