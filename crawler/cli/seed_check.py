"""What ``crawler seed`` knows of each seed before it pushes it: new, crawled before, invalid.

The spider is built as a node builds it (Scrapy's ``Crawler``, the project's
settings, the spider's ``custom_settings``) without crawling, so each seed goes
through the spider's own ``make_request_from_data`` and the crawl's request
fingerprinter, exactly as on the nodes; the fingerprints are then looked up in the
frontier's dedup without recording any (``lua/seen.lua``). A seed is *crawled
before* when every request it makes was seen: a ``dont_filter`` seed (the
default) is fetched again, but the pages it leads to that were crawled are
skipped; a filtered one is dropped. ``--recrawl`` forgets what the crawl saw.
"""

from __future__ import annotations

import codecs
import logging
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.misc import build_from_crawler, load_object

from crawler.frontier.dedup import DedupStep
from crawler.frontier.partitions import part_of, spider_parts
from crawler.frontier.request_store import dedup_fingerprint
from crawler.frontier.seed_settings import SeedSettings
from crawler.frontier.seeds import InvalidSeed
from crawler.frontier.settings import FrontierSettings
from crawler.redis_connection import SyncRedis
from crawler.scope import site_of
from crawler.spiders.base import RedisSpider, invalid_seed


class Outcome(StrEnum):
    NEW = "new"
    SEEN = "seen"  # every request it makes was crawled (or queued) before
    INVALID = "invalid"
    SKIPPED = "skipped"  # make_request_from_data makes no request of it (a node skips it too)


@dataclass(frozen=True, slots=True)
class SeedReport:
    seed: str
    outcome: Outcome
    data: bytes = b""  # the seed as it is pushed (new and seen): in the spider's encoding
    urls: list[str] = field(default_factory=list)
    refetched: bool = False  # seen, but dont_filter: its page is fetched again
    reason: str = ""  # invalid: the short reason (as in seeds/invalid/<reason>)
    error: str = ""

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"seed": self.seed, "outcome": self.outcome.value}
        if self.outcome is Outcome.INVALID:
            found |= {"reason": self.reason, "error": self.error}
        elif self.outcome is not Outcome.SKIPPED:
            found |= {"urls": self.urls, "refetched": self.refetched}
        return found


# scrapy-redis's connection settings, which REDIS_URL takes the place of
CONNECTION = frozenset({"REDIS_HOST", "REDIS_PORT", "REDIS_DB", "REDIS_PARAMS"})


class NotASeedSpider(SystemExit):
    pass


class SeedChecker:
    """One spider of the project, built to turn raw seeds into requests and fingerprints."""

    def __init__(self, spider_class: type[Any], settings: dict[str, Any], redis_url: str) -> None:
        if not issubclass(spider_class, RedisSpider):
            raise NotASeedSpider(
                f"crawler: spider {spider_class.name!r} reads no seeds from Redis (it is not a "
                "crawler.spiders.base.RedisSpider): nothing would take them. Its start requests "
                "are written once per crawl (CRAWLER_CRAWL_ID); to feed it seeds, derive it from "
                "crawler.spiders.base.RedisSpider or RedisCrawlSpider"
            )
        # redis_url is what the command reaches, REDIS_HOST / PORT / DB / PARAMS folded in
        given = {name: value for name, value in settings.items() if name not in CONNECTION}
        crawler = Crawler(spider_class, Settings({**given, "REDIS_URL": redis_url}))
        crawler.stats = MemoryStatsCollector(crawler)
        crawler.request_fingerprinter = build_from_crawler(
            load_object(crawler.settings["REQUEST_FINGERPRINTER_CLASS"]), crawler
        )
        logging.getLogger("scrapy").setLevel(logging.WARNING)
        self.crawler = crawler
        self.spider: RedisSpider = spider_class.from_crawler(crawler)
        self.dedup = FrontierSettings.from_settings(crawler.settings).dedup
        encoding = self.seed_settings.encoding
        # a lone surrogate goes as it is in UTF-8: the nodes then refuse it as not UTF-8
        self._errors = "surrogatepass" if codecs.lookup(encoding).name == "utf-8" else "strict"

    @property
    def seed_settings(self) -> SeedSettings:
        return self.spider.seed_settings

    def requests(self, data: bytes) -> list[Request]:
        """The requests of a seed as pushed, as a node makes them (none: the spider skips it)."""
        try:
            return self.spider.requests_from_raw_seed(data)
        except Exception as exc:  # the user's make_request_from_data may raise anything
            raise invalid_seed(exc) from exc

    def encoded(self, seed: str) -> bytes:
        """``seed`` as it is pushed: in the spider's encoding (``REDIS_ENCODING``), where the
        nodes read it (``InvalidSeed`` if that encoding cannot write it)."""
        encoding = self.seed_settings.encoding
        try:
            return seed.encode(encoding, self._errors)
        except UnicodeEncodeError as exc:
            raise InvalidSeed(
                "encoding", f"the seed cannot be written in {encoding}: {exc}"
            ) from exc

    def fingerprint(self, request: Request) -> str:
        assert self.crawler.request_fingerprinter is not None
        return dedup_fingerprint(self.crawler.request_fingerprinter, request)

    def check(self, client: SyncRedis, raw_seeds: list[str]) -> list[SeedReport]:
        """A report per seed, in order; the dedup is read, never written."""
        made: list[tuple[str, bytes, list[Request]] | SeedReport] = []
        for raw in raw_seeds:
            try:
                data = self.encoded(raw)
                requests = self.requests(data)
            except InvalidSeed as exc:
                made.append(SeedReport(raw, Outcome.INVALID, reason=exc.reason, error=str(exc)))
                continue
            made.append((raw, data, requests) if requests else SeedReport(raw, Outcome.SKIPPED))
        requests = [
            request for entry in made if not isinstance(entry, SeedReport) for request in entry[2]
        ]
        seen = iter(self._seen(client, requests))
        reports: list[SeedReport] = []
        for entry in made:
            if isinstance(entry, SeedReport):
                reports.append(entry)
                continue
            raw, data, requests = entry
            all_seen = all([next(seen) for _ in requests])  # consume one flag per request
            reports.append(
                SeedReport(
                    raw,
                    Outcome.SEEN if all_seen else Outcome.NEW,
                    data,
                    urls=[request.url for request in requests],
                    refetched=all_seen and all(request.dont_filter for request in requests),
                )
            )
        return reports

    def _seen(self, client: SyncRedis, requests: list[Request]) -> list[bool]:
        """Whether the dedup holds each request, looked up in the part of its site."""
        step = DedupStep.for_config(self.dedup)
        script = client.register_script(step.script("seen"))
        parts = spider_parts(client, self.spider.name)
        by_part: dict[int, list[int]] = {}
        for index, request in enumerate(requests):
            by_part.setdefault(part_of(site_of(request.url), len(parts)), []).append(index)
        flags = [False] * len(requests)
        for part, indexes in by_part.items():
            fingerprints = [self.fingerprint(requests[i]) for i in indexes]
            keys = step.script_keys(parts[part])
            found = script(keys=keys, args=step.seen_args(fingerprints))
            for index, flag in zip(indexes, found, strict=True):
                flags[index] = bool(flag)
        return flags
