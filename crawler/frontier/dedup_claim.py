"""A crawl's dedup mode and request fingerprinter, recorded: a node of another is refused (no
Scrapy imports).

Each mode keeps what it has seen in keys of its own (``crawler.frontier.dedup``): a node of
another mode knows nothing the others recorded, and crawls it all again. The first node of a
crawl records its mode in ``{<spider>}:dedup_mode``; a node of another is refused, with what to
do, as one of another part count is (``crawler.frontier.partitions``). A crawl from before the
record whose keys are another mode's refuses it too. So with the fingerprinter
(``REQUEST_FINGERPRINTER_CLASS``, ``{<spider>}:fingerprinter``): one of another class gives every
request another fingerprint, and a redeploy that changed it had every page crawled again.
``crawler purge`` ends the crawl.
"""

from __future__ import annotations

from crawler.frontier.client import FrontierClient
from crawler.frontier.partitions import record_once
from crawler.frontier.refusal import CrawlSettingChanged

# the dedup's storage (its Lua snippet) -> the settings that choose it
MODES = {
    "dedup_set": "FRONTIER_DUPEFILTER=exact",
    "dedup_zset": "FRONTIER_DUPEFILTER=exact with a FRONTIER_DEDUP_TTL",
    "dedup_compact": "FRONTIER_DUPEFILTER=compact",
    "dedup_bloom": "FRONTIER_DUPEFILTER=bloom",
}


class DedupChanged(CrawlSettingChanged):
    """A node's dedup mode is not the one the spider's crawl started with: it would not know
    what the others recorded, and crawl it all again."""

    stat = "dedup"
    finish_reason = "frontier_dedup_changed"

    def __init__(self, spider: str, stored: str, wanted: str) -> None:
        super().__init__(
            spider,
            f"deduplicates with {stored} (what its nodes recorded is there)",
            MODES.get(wanted, wanted),
            "the crawl's dedup settings",
        )


class FingerprinterChanged(CrawlSettingChanged):
    """A node's request fingerprinter is not the one the spider's crawl started with: its
    fingerprints are not those the crawl recorded, and it would crawl every page again."""

    stat = "fingerprinter"
    finish_reason = "frontier_fingerprinter_changed"

    def __init__(self, spider: str, stored: str, wanted: str) -> None:
        super().__init__(
            spider,
            f"fingerprints requests with {stored} (what its nodes recorded is by those)",
            f"REQUEST_FINGERPRINTER_CLASS={wanted}",
            f"REQUEST_FINGERPRINTER_CLASS={stored}",
        )


async def claim_fingerprinter(part: FrontierClient, spider: str, fingerprinter: str) -> None:
    """Record ``fingerprinter`` (a class's import path) as the crawl's unless one is; raise
    ``FingerprinterChanged`` when another one is."""
    stored = await record_once(part.redis, part.keys.fingerprinter, fingerprinter)
    if stored != fingerprinter:
        raise FingerprinterChanged(spider, stored, fingerprinter)


async def claim_dedup_mode(part: FrontierClient, spider: str) -> None:
    """Record ``part``'s dedup mode as the crawl's (``part``: the frontier's part 0) unless one
    is recorded; raise ``DedupChanged`` when another one is, or when keys of another mode
    hold a crawl from before the record."""
    mine, key = part.dedup.snippet, part.keys.dedup_mode
    if not await part.redis.exists(key):
        others = await part.other_dedup_keys()
        if others:
            raise DedupChanged(spider, f"keys of another dedup mode ({', '.join(others)})", mine)
    stored = await record_once(part.redis, key, mine)
    if stored != mine:
        raise DedupChanged(spider, MODES.get(stored, stored), mine)
