"""Profile for production nodes: robots.txt obeyed, quieter logs, safer timeouts."""

from __future__ import annotations

LOG_LEVEL = "INFO"
ROBOTSTXT_OBEY = True
AUTOTHROTTLE_ENABLED = False  # the cluster-wide limiter adapts instead
RETRY_TIMES = 3
KAFKA_FLUSH_TIMEOUT = 60.0
