"""What a spider's ``start()`` sets up on it, which only the node writing the start requests runs.

A plain spider's start requests are written once a crawl, by the node that claims them
(``ClusterStartMiddleware``); the other nodes never iterate ``start()``. What it sets up as it
runs (``self.token = await login()``, a signal handler it connects) exists on that node only, and
the requests other nodes lease ran without it, with no word: 11 of 40 pages failed with an
``AttributeError``, or 13 of 40 went without what a ``request_scheduled`` handler stamps (an
audit). The writer notes what changed on its spider while ``start()`` ran, records it with the
claim when it is done, and every other node says it in a WARNING naming where to set it up
instead (``start/set_up_elsewhere``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydispatch import dispatcher  # type: ignore[import-untyped]
from scrapy import Spider, signals
from scrapy.crawler import Crawler

from crawler.signals import user_receivers

SIGNAL_NAMES = {
    id(value): name for name, value in vars(signals).items() if not name.startswith("_")
}


@dataclass(frozen=True, slots=True)
class SpiderState:
    attributes: dict[str, int]  # the spider's attributes: name -> id of the value
    handlers: dict[str, int]  # the user's signal handlers: signal name -> how many

    @classmethod
    def of(cls, crawler: Crawler, spider: Spider) -> SpiderState:
        handlers: dict[str, int] = {}
        for signal in dispatcher.connections.get(id(crawler.signals.sender), {}):
            if count := len(user_receivers(crawler, signal)):
                name = SIGNAL_NAMES.get(id(signal), "a signal of your own")
                handlers[name] = handlers.get(name, 0) + count
        attributes = {name: id(value) for name, value in vars(spider).items()}
        return cls(attributes, handlers)

    def set_up_since(self, before: SpiderState) -> list[str]:
        """What is set or connected now that was not at ``before``, as a user names it."""
        names = [
            f"self.{name}"
            for name, value in self.attributes.items()
            if before.attributes.get(name) != value
        ]
        names += [
            f"a {signal} handler"
            for signal, count in self.handlers.items()
            if count > before.handlers.get(signal, 0)
        ]
        return sorted(names)


def set_up_elsewhere_warning(set_up: str) -> str:
    return (
        f"start() set up {set_up} on the node that wrote this crawl's start requests; it runs "
        "once a crawl, on that node only, so this node's spider runs without it (a callback "
        "that needs it fails here). Set it up where every node does: the spider's __init__ or "
        "from_crawler, or a spider_opened handler (async: it may await a login)"
    )
