"""Why a node may not use its spider's frontier (no Scrapy imports).

The first frontier step of a node (``PartitionedFrontier.claim``) checks the crawl's
partition count and the frontier's storage layout; a node that does not fit is refused
before it reads a seed or writes a request: ``frontier/refused/<stat>``, an ERROR log
saying what to do, and the spider closes with ``finish_reason``
(``crawler.frontier.admission``).
"""

from __future__ import annotations


class FrontierRefused(Exception):
    """This node may not read or write its spider's frontier."""

    stat = "refused"  # the stat frontier/refused/<stat>
    finish_reason = "frontier_refused"  # the spider's finish reason
