"""Wake Scrapy's engine so it asks the scheduler for requests now.

Scrapy 2.19 has no public call for this: the engine pulls from the scheduler
after its own activity or on a 5 s heartbeat, which leaves a node idle while
the shared frontier has work. This is the one place that reaches inside.
"""

from __future__ import annotations

from scrapy.crawler import Crawler


def wake_engine(crawler: Crawler) -> None:
    engine = crawler.engine
    if engine is None:
        return
    slot = getattr(engine, "_slot", None)
    if slot is not None and slot.closing is None and not engine.needs_backout():
        slot.nextcall.schedule()
