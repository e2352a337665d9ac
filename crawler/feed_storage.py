"""``NodeFileFeedStorage``: a local feed file written by one node at a time (cluster mode).

``FEEDS``, ``-o`` and ``-O`` write one feed per node. Two nodes on one machine (or one shared
disk) given the same path wrote into one file at once: with ``-O`` each truncated it and wrote
at its own offsets, leaving one node's items, a broken line and the tail of the other's (30 of
62 items lost, the frontier counting their pages done); with ``-o`` a JSON feed became two
arrays and a CSV feed had two headers. In cluster mode the project's storage for local files
takes an exclusive lock on the file (``crawler.node_files``) when its feed starts, the feed's
first file until the spider closes (a batch feed's later ones until stored): a second node of
the same path meets the first file held, and is refused (``feeds/refused/in_use``, one ERROR
line saying to put ``%(node_id)s`` in the path, finish reason ``feed_in_use``, exit 1), and
writes nothing to it. ``%(node_id)s`` is
the node's ``CRAWLER_NODE_ID`` in every feed URI (``FEED_URI_PARAMS``, which calls a project's
own function first, and each feed's own ``uri_params``, wrapped alike).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO, Any

from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.extensions.feedexport import FileFeedStorage
from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings
from scrapy.utils.misc import load_object

from crawler import node_files
from crawler.node import resolve_node_id
from crawler.wakeup import close_spider_soon, running_engine

logger = logging.getLogger(__name__)
FINISH_REASON = "feed_in_use"  # the refused node's finish reason (``crawler.exit_status``)
USER_URI_PARAMS = "CRAWLER_USER_FEED_URI_PARAMS"  # the project's own FEED_URI_PARAMS, if any
NODE_URI_PARAMS = "crawler.feed_storage.node_uri_params"
NODE_STORAGE = "crawler.feed_storage.NodeFileFeedStorage"


def use_node_uri_params(settings: BaseSettings) -> None:
    """Put ``node_uri_params`` in ``FEED_URI_PARAMS``, keeping a project's own to call first;
    a feed's own ``uri_params`` option (which Scrapy calls instead) is wrapped alike."""
    own = settings.get("FEED_URI_PARAMS")
    if own and own != NODE_URI_PARAMS:
        settings.set(USER_URI_PARAMS, own, priority="cmdline")
    priority = max(settings.getpriority("FEED_URI_PARAMS") or 0, SETTINGS_PRIORITIES["addon"])
    settings.set("FEED_URI_PARAMS", NODE_URI_PARAMS, priority=priority)
    feeds = settings.getdict("FEEDS")
    if any(options.get("uri_params") for options in feeds.values()):
        wrapped = {uri: _feed_with_node_id(options) for uri, options in feeds.items()}
        settings.set("FEEDS", wrapped, priority=settings.getpriority("FEEDS") or "addon")


def _feed_with_node_id(options: dict[str, Any]) -> dict[str, Any]:
    own = options.get("uri_params")
    if not own or isinstance(own, partial):  # none, or wrapped already
        return options
    return {**options, "uri_params": partial(feed_uri_params, own)}


def lock_local_feeds(settings: BaseSettings) -> None:
    """Local feed files (schemes ``""`` and ``file``) through ``NodeFileFeedStorage``, each
    scheme on its own: a project's storage for it stays, one for another scheme changes
    nothing here."""
    storages = settings["FEED_STORAGES"]
    assert isinstance(storages, BaseSettings)  # Scrapy keeps its dict settings so
    for scheme in ("", "file"):
        storages.set(scheme, NODE_STORAGE, priority="addon")


def node_uri_params(params: dict[str, Any], spider: Spider) -> dict[str, Any]:
    """``FEED_URI_PARAMS``: the project's own function's params, with ``node_id``."""
    return feed_uri_params(spider.crawler.settings.get(USER_URI_PARAMS), params, spider)


def feed_uri_params(
    own: str | Callable[..., Any] | None, params: dict[str, Any], spider: Spider
) -> dict[str, Any]:
    """``own`` uri params function's params (``None``: ``params``), with ``node_id``."""
    if own:
        params = load_object(own)(params, spider) or params
    node_id = resolve_node_id(spider.crawler.settings.get("CRAWLER_NODE_ID") or "")
    return {**params, "node_id": node_id}


class FeedInUse(ValueError):
    """Another process writes the feed's file (a refusal at start: ``crawler.exit_status``)."""

    def __init__(self, path: str) -> None:
        super().__init__(
            f"the feed {path} is being written by another node on this machine (or this "
            "disk): both would write into one file, and items would be lost. Give each node "
            "its own file with %(node_id)s in the path (-O items-%(node_id)s.jsonl); Kafka has "
            "every node's items"
        )


# Scrapy's placeholders in a feed URI (``%(name)s``, ``%(batch_id)05d``); any other ``%`` is a
# literal character of the path
PLACEHOLDER = re.compile(r"%\([^)]+\)[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[diouxXeEfFgGcrsa]")


_first_files: dict[int, str] = {}  # a feed (its options' id) -> the first file locked for it


class NodeFileFeedStorage(FileFeedStorage):
    def __init__(
        self, uri: str, *, feed_options: dict[str, Any] | None = None, crawler: Crawler
    ) -> None:
        super().__init__(uri, feed_options=feed_options)
        self._crawler = crawler
        self._refused = False
        self._held = False
        self._first = False  # the first file of its feed (kept locked until the spider closes)
        self._feed = id(feed_options)  # Scrapy makes each batch's storage with its feed's options
        # Scrapy makes one of the feed's URI template too while the crawler starts, to check
        # its scheme: a path without parameters is taken then (refused: the node does not
        # start); each feed's own storage, its path known, when the spider opens.
        if running_engine(crawler) is not None or PLACEHOLDER.search(uri) is None:
            self._take()

    @classmethod
    def from_crawler(
        cls, crawler: Crawler, uri: str, *, feed_options: dict[str, Any] | None = None
    ) -> NodeFileFeedStorage:
        return cls(uri, feed_options=feed_options, crawler=crawler)

    def _take(self) -> None:
        """Lock the file for this process, or refuse the node when another holds it. A feed's
        first file stays locked until the spider closes: another node of the same path
        starts at that file (its batch 1), so it is refused while this one runs, and a batch
        feed's later files, stored, let go of theirs (a lock each would be a descriptor each)."""
        if not node_files.hold(self.path):
            self._refuse()
            return
        self._held = True
        self._first = _first_files.setdefault(self._feed, self.path) == self.path
        self._crawler.signals.connect(self._closed, signal=signals.spider_closed, weak=False)

    def _closed(self) -> None:
        _first_files.pop(self._feed, None)
        self._release()

    def _release(self) -> None:
        if self._held:
            self._held = False
            node_files.release(self.path)
            if not self._first:
                self._crawler.signals.disconnect(self._closed, signal=signals.spider_closed)

    def _refuse(self) -> None:
        """Before the engine exists, the start fails; once the spider is open, it closes."""
        refusal = FeedInUse(self.path)
        stats = self._crawler.stats
        assert stats is not None
        stats.inc_value("feeds/refused/in_use")
        self._stopping = close_spider_soon(self._crawler, FINISH_REASON)
        if self._stopping is None:
            raise refusal
        logger.error("Node refused: %s", refusal)
        self._refused = True

    def open(self, spider: Spider) -> IO[bytes]:
        if self._refused:
            return Path(os.devnull).open("wb")
        node_files.used(self.path)
        return super().open(spider)

    def store(self, file: IO[bytes]) -> None:
        """Close the file; the feed's first file stays locked until the spider closes."""
        file.close()
        if not self._first:
            self._release()
