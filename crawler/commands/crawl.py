"""``scrapy crawl``, exiting 1 when the node was refused (``crawler.exit_status``)."""

from __future__ import annotations

from scrapy.commands import crawl

from crawler.exit_status import ExitOnRefusal


class Command(ExitOnRefusal, crawl.Command):
    pass
