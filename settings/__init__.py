"""Scrapy settings package (``scrapy.cfg``: ``default = settings``).

Values come from ``settings.base``, then the profile named by ``CRAWLER_PROFILE``,
then environment overrides; see ``settings.resolve`` and docs/settings.md.
"""

from __future__ import annotations

import os

from settings.resolve import resolve_settings

# Scrapy's cookie middleware asks tldextract for the Public Suffix List, which downloads it at
# first use (a traceback on every node start where there is no internet). Nodes use the list
# bundled with tldextract unless the environment names sources of its own.
os.environ.setdefault("TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS", "")

try:
    globals().update(resolve_settings(os.environ))
except ValueError as exc:  # a profile or CRAWLER_SETTING_ name that is not one: say so, once
    raise SystemExit(f"settings: {exc}") from None
