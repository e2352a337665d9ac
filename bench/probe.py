"""``BenchProbe``: what a benchmark node measures about itself (bench only, not product code).

* Redis round trips: every command or pipeline a redis-py connection sends
  (sync and asyncio) is one write and one round trip; counted per process.
* Reactor hold: wall time of each synchronous scheduler call
  (``enqueue_request``, ``next_request``), where a scheduler doing blocking
  Redis I/O holds the reactor; and the worst lateness of a 5 ms timer on the
  event loop (everything that held it: parsing, link extraction...).

At close the figures are written as JSON to ``<BENCH_PROBE_DIR>/<pid>.json``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import redis.asyncio.connection
import redis.connection
from scrapy import Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured

TICK = 0.005


class RoundTrips:
    """Counts the sends of every redis-py connection (sync and asyncio) in this process."""

    count = 0
    installed = False

    @classmethod
    def install(cls) -> None:
        if cls.installed:
            return
        cls.installed = True
        sync_send: Callable[..., Any] = redis.connection.AbstractConnection.send_packed_command
        async_send: Callable[..., Any] = (
            redis.asyncio.connection.AbstractConnection.send_packed_command
        )

        def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
            cls.count += 1
            return sync_send(self, *args, **kwargs)

        async def counted_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            cls.count += 1
            return await async_send(self, *args, **kwargs)

        sync_class = redis.connection.AbstractConnection
        async_class = redis.asyncio.connection.AbstractConnection
        sync_class.send_packed_command = counted  # type: ignore[method-assign]
        async_class.send_packed_command = counted_async  # type: ignore[method-assign]


class BenchProbe:
    def __init__(self, crawler: Crawler) -> None:
        directory = crawler.settings.get("BENCH_PROBE_DIR")
        if not directory:
            raise NotConfigured("BenchProbe needs BENCH_PROBE_DIR")
        self.crawler = crawler
        self.path = Path(directory) / f"{os.getpid()}.json"
        self.scheduler_calls: list[float] = []  # seconds each call held the reactor
        self.loop_lag_max = 0.0
        self._ticker: asyncio.Task[None] | None = None
        RoundTrips.install()
        self._round_trips_at_open = 0
        crawler.signals.connect(self.spider_opened, signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BenchProbe:
        return cls(crawler)

    def spider_opened(self, spider: Spider) -> None:
        engine = self.crawler.engine
        assert engine is not None
        assert engine._slot is not None
        scheduler = engine._slot.scheduler
        for name in ("enqueue_request", "next_request"):
            setattr(scheduler, name, self._timed(getattr(scheduler, name)))
        self._round_trips_at_open = RoundTrips.count
        self._ticker = asyncio.ensure_future(self._tick())

    def _timed(self, call: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(call)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.scheduler_calls.append(time.perf_counter() - started)

        return timed

    async def _tick(self) -> None:
        while True:
            due = time.perf_counter() + TICK
            await asyncio.sleep(TICK)
            self.loop_lag_max = max(self.loop_lag_max, time.perf_counter() - due)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        stats = self.crawler.stats
        assert stats is not None
        calls = sorted(self.scheduler_calls) or [0.0]
        figures = {
            "responses": stats.get_value("response_received_count", 0),
            "round_trips": RoundTrips.count - self._round_trips_at_open,
            "scheduler_calls": len(self.scheduler_calls),
            "scheduler_p99_ms": calls[int(len(calls) * 0.99)] * 1000,
            "scheduler_max_ms": calls[-1] * 1000,
            "loop_lag_max_ms": self.loop_lag_max * 1000,
        }
        self.path.write_bytes(orjson.dumps(figures))
