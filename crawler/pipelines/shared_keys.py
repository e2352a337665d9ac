"""``SharedKeys``: say when items of one page share a Kafka message key.

A message's key is ``sha1(item_type + "\\n" + canonical url)`` of the item's ``url`` field
(``crawler.kafka.messages``): it names a page's item of a type. Items of one type that one
response yields with the same ``url`` (a list page's rows, each given ``response.url``) get
the same key, so a compacted topic keeps only the last of them, and a consumer that
deduplicates by key keeps one. Standalone Scrapy has no keys, so nothing told the user: each
response's keys are looked at as its items are scraped, and a repeat is counted
(``kafka/key_shared/<item_type>``) and logged once per item type, saying what to do.
"""

from __future__ import annotations

import logging
from typing import Any
from weakref import WeakKeyDictionary

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.http import Response

from crawler.kafka.messages import item_fields, item_key, item_type_of
from crawler.said_once import SaidOnce

logger = logging.getLogger(__name__)


class SharedKeys:
    def __init__(self, crawler: Crawler) -> None:
        assert crawler.stats is not None
        self._said = SaidOnce(crawler.stats, logger)
        self._keys: WeakKeyDictionary[Response, set[bytes]] = WeakKeyDictionary()
        crawler.signals.connect(self._scraped, signal=signals.item_scraped)

    def _scraped(self, item: Any, response: object, **kwargs: Any) -> None:
        """``response``: the page, or the failure an errback's item came from (no page)."""
        if not isinstance(response, Response):
            return
        url = item_fields(item).get("url")
        if not isinstance(url, str):
            return
        item_type = item_type_of(item)
        key = item_key(item_type, url)
        keys = self._keys.setdefault(response, set())
        if key not in keys:
            keys.add(key)
            return
        self._said.count(
            f"kafka/key_shared/{item_type}",
            "Two %s items of %s share their Kafka key (made of the item type and the url "
            "field, here %s): a compacted topic keeps the last of them, and consumers that "
            "deduplicate by key keep one. Give each item a url field of its own (its row's "
            "link, say; the key leaves out a #fragment, as URLs are made canonical)",
            item_type,
            response.url,
            url,
        )
