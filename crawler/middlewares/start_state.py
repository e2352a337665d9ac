"""What a spider's ``start()`` sets up on it, which only the node writing the start requests runs.

A plain spider's start requests are written once a crawl, by the node that claims them
(``ClusterStartMiddleware``); the other nodes never iterate ``start()``. What it sets up as it
runs (``self.token = await login()``, a signal handler it connects) exists on that node only, and
the requests other nodes lease ran without it, with no word: 11 of 40 pages failed with an
``AttributeError``, or 13 of 40 went without what a ``request_scheduled`` handler stamps (an
audit). The writer notes what changed on its spider while each step of ``start()`` ran (not
what callbacks change between its steps), records it with the claim when it is done, and every
other node says it in a WARNING naming where to set it up instead (``start/set_up_elsewhere``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pydispatch import dispatcher  # type: ignore[import-untyped]
from scrapy import Spider, signals
from scrapy.crawler import Crawler

SIGNAL_NAMES = {
    id(value): name for name, value in vars(signals).items() if not name.startswith("_")
}

SET_UP_ELSEWHERE = (
    "start() set up %s on the node that wrote this crawl's start requests; it runs once a "
    "crawl, on that node only, so this node's spider runs without it (a callback that needs it "
    "fails here). Set it up where every node does: the spider's __init__ or from_crawler, or a "
    "spider_opened handler (an async def one may await a login)"
)

SET_UP_NOT_RECORDED = (
    "The node that wrote this crawl's start requests recorded nothing of what start() set up "
    "on its spider (nothing, or it runs an earlier version): this node did not run start(), so "
    "an attribute or a signal handler start() sets up is not here (set such things up in the "
    "spider's __init__, from_crawler or a spider_opened handler)"
)


@dataclass(frozen=True, slots=True)
class SpiderState:
    attributes: dict[str, int]  # the spider's attributes: name -> id of the value
    # signal -> the receivers connected for it (pydispatch's references to them)
    receivers: dict[Any, tuple[Any, ...]]

    @classmethod
    def of(cls, crawler: Crawler, spider: Spider) -> SpiderState:
        connected = dispatcher.connections.get(id(crawler.signals.sender), {})
        receivers = {signal: tuple(found) for signal, found in connected.items()}
        return cls({name: id(value) for name, value in vars(spider).items()}, receivers)


class StartSetUp:
    """Follows ``start()`` step by step and names what each step set up on the spider."""

    def __init__(self, crawler: Crawler, spider: Spider) -> None:
        self._crawler = crawler
        self._spider = spider
        self._found: set[str] = set()

    @property
    def names(self) -> str:
        """What start() set up so far, as a user names it ('' for nothing)."""
        return ", ".join(sorted(self._found))

    async def steps(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        iterator = aiter(start)
        while True:
            before = SpiderState.of(self._crawler, self._spider)
            try:
                output = await anext(iterator)
            except StopAsyncIteration:
                self._note(before)
                return
            except BaseException:
                self._note(before)
                raise
            self._note(before)
            yield output

    def _note(self, before: SpiderState) -> None:
        now = SpiderState.of(self._crawler, self._spider)
        self._found.update(
            f"self.{name}"
            for name, value in now.attributes.items()
            if before.attributes.get(name) != value
        )
        for signal, found in now.receivers.items():
            known = set(map(id, before.receivers.get(signal, ())))
            new = [receiver for receiver in found if id(receiver) not in known]
            if any(self._spiders(receiver) for receiver in dispatcher.liveReceivers(new)):
                name = SIGNAL_NAMES.get(id(signal), "a signal of your own")
                self._found.add(f"a handler of {name}")

    def _spiders(self, receiver: Any) -> bool:
        """A receiver of the spider's own: its method, or a function of its module."""
        if getattr(receiver, "__self__", None) is self._spider:
            return True
        return getattr(receiver, "__module__", None) == type(self._spider).__module__
