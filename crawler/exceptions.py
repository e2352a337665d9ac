"""Exceptions the project's components raise to each other through Scrapy."""

from __future__ import annotations

from scrapy.exceptions import DropItem


class ItemRequeued(DropItem):
    """An item that could be neither delivered nor spooled: its request is crawled again.

    Raised by ``KafkaPipeline``; ``LeaseOutputMiddleware`` returns the request's
    lease to the queue with ``reason`` (a stat suffix such as ``kafka/spool_error``).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
