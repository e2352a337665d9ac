"""``scrapy runspider``, exiting 1 when the node was refused (``crawler.exit_status``)."""

from __future__ import annotations

from scrapy.commands import runspider

from crawler.exit_status import ExitOnRefusal


class Command(ExitOnRefusal, runspider.Command):
    pass
