"""``SaidOnce``: a stat counted every time, and a warning logged the first time of each stat.

For what a node does every time it meets something the user should know of once: a request
whose meta comes back reshaped, a browser request fetched without the browser, a live page
closed. The count says how often; the first warning says what and what to do.
"""

from __future__ import annotations

import logging
from typing import Protocol


class Stats(Protocol):
    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None: ...


class SaidOnce:
    def __init__(self, stats: Stats, logger: logging.Logger) -> None:
        self.stats = stats
        self.logger = logger
        self._said: set[str] = set()  # the stats whose warning was logged

    def count(self, stat: str, warning: str, *args: object) -> None:
        """Count ``stat``, logging ``warning`` (with ``args``) the first time."""
        self.stats.inc_value(stat)
        if stat not in self._said:
            self._said.add(stat)
            self.logger.warning(warning, *args)
