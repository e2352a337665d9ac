"""Scrapy settings package (``scrapy.cfg``: ``default = settings``).

Values come from ``settings.base``, then the profile named by ``CRAWLER_PROFILE``,
then environment overrides; see ``settings.resolve`` and docs/settings.md.
"""

from __future__ import annotations

import os

from settings.resolve import resolve_settings

globals().update(resolve_settings(os.environ))
