"""Wake Scrapy's engine so it asks the scheduler for requests now; ask if it is closing or
has nothing in flight; close its spider from a component (a node that must stop).

Scrapy 2.19 has no public call for the first two (``close_spider_soon`` wraps the public
``close_spider_async`` in a task its caller keeps): the engine pulls from the scheduler
after its own activity or on a 5 s heartbeat, which leaves a node idle while
the shared frontier has work, and it tells no one when a spider starts
closing (``spider_closed`` comes after the scraper has drained). This is the
one place that reaches inside.
"""

from __future__ import annotations

import asyncio

from scrapy.core.engine import ExecutionEngine
from scrapy.crawler import Crawler


def running_engine(crawler: Crawler) -> ExecutionEngine | None:
    """The crawler's engine; None before the crawl starts (Scrapy 2.19's ``Crawler.engine``
    raises then)."""
    try:
        return crawler.engine
    except RuntimeError:
        return None


def wake_engine(crawler: Crawler) -> None:
    engine = running_engine(crawler)
    if engine is None:
        return
    slot = getattr(engine, "_slot", None)
    if slot is not None and slot.closing is None and not engine.needs_backout():
        slot.nextcall.schedule()


def close_spider_soon(crawler: Crawler, reason: str) -> asyncio.Future[None] | None:
    """Close the crawler's spider with the finish reason ``reason``, in a task of its own: the
    task, for the caller to keep (the event loop holds tasks weakly), or None when there is no
    engine yet. A spider already closing keeps its own reason (the task waits for that close)."""
    engine = running_engine(crawler)
    if engine is None:
        return None
    return asyncio.ensure_future(engine.close_spider_async(reason=reason))


def engine_closing(crawler: Crawler) -> bool:
    """True once the engine stops (a signal, the spider closed) or starts closing its spider
    (any reason). Not while it opens and starts (pipelines' ``open_spider``, ``spider_opened``
    and ``engine_started`` handlers), nor for an engine a command drives outside a crawl
    (``scrapy shell`` starts one and opens its spider without ``Crawler.crawl``)."""
    engine = running_engine(crawler)
    if engine is None:
        return False
    slot = getattr(engine, "_slot", None)
    return bool(getattr(engine, "_stopping", False)) or (
        slot is not None and slot.closing is not None
    )


def engine_idle(crawler: Crawler) -> bool:
    """True while nothing is being downloaded or processed by the spider's callbacks and
    pipelines (the scraper's slot is idle)."""
    engine = running_engine(crawler)
    if engine is None or engine.downloader.active:
        return False
    slot = engine.scraper.slot
    return slot is not None and slot.is_idle()
