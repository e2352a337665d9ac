"""Signals the project's components send each other through ``crawler.signals``."""

from __future__ import annotations

#: Sent (with ``send_catch_log_async``) to wait until every request this node handed to
#: ``LeasingScheduler`` is stored in Redis; the scheduler's handler returns when it is.
frontier_flush = object()
