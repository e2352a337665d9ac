"""Profile for a developer's machine: verbose enough to follow a crawl, polite to local sites."""

from __future__ import annotations

LOG_LEVEL = "INFO"
ROBOTSTXT_OBEY = False  # local demo and test sites have no robots.txt
