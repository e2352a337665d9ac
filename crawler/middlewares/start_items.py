"""The items a plain spider's ``start()`` yields, until the pipelines settle them
(``ClusterStartMiddleware`` marks the start requests written only then)."""

from __future__ import annotations

import asyncio
from typing import Any

from crawler.exceptions import ItemRequeued


class StartItems:
    """The items ``start()`` yielded that the pipelines have not settled yet. No lease holds
    them (they come from no request), so the start claim is finished only once they are: a
    node that dies before keeps the claim, which expires, and another node writes them again.
    Scrapy's item signals name no response for them."""

    def __init__(self) -> None:
        self.open = 0
        self.requeued = 0  # dropped with ItemRequeued: not delivered, not even spooled
        self._settled = asyncio.Event()
        self._settled.set()

    def opened(self) -> None:
        self.open += 1
        self._settled.clear()

    def settle(self, response: object = None, **kwargs: Any) -> None:
        if response is not None or self.open == 0:
            return
        if isinstance(kwargs.get("exception"), ItemRequeued):
            self.requeued += 1
        self.open -= 1
        if self.open == 0:
            self._settled.set()

    async def settled(self) -> None:
        await self._settled.wait()
