"""Components ordered where they would hide their work from the frontier or from Kafka.

Scrapy passes a callback's output, and ``start()``'s, from the spider towards the engine
through the spider middlewares in decreasing order. ``LeaseOutputMiddleware`` holds a page's
lease for each item and request it sees, so it must see them after every other middleware:
an item a middleware below it drops was held and is never settled, and the lease is never
finished (the node never closes). ``ClusterStartMiddleware`` lets one node of the crawl run
``start()``; what a middleware below it adds is added by every node. Such a middleware stops
the start, with the order to give it instead (cluster mode). So does a downloader middleware
below ``LeaseFailureMiddleware`` with a ``process_response``: Scrapy runs that after the lease
middleware's, and an ``IgnoreRequest`` it raised reached the request's own errback, not the
lease (counted done, no failure record).

``KafkaPipeline`` delivers the item it is given: an item pipeline after it would drop or change
an item already delivered, so one stops the start while Kafka is on (standalone or not).
"""

from __future__ import annotations

from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from crawler.settings_values import component_path

LEASE_OUTPUT = "crawler.middlewares.lease_output.LeaseOutputMiddleware"
CLUSTER_START = "crawler.middlewares.cluster_start.ClusterStartMiddleware"
LEASE_FAILURES = "crawler.middlewares.lease_failures.LeaseFailureMiddleware"
KAFKA_PIPELINE = "crawler.pipelines.kafka.KafkaPipeline"
# the frontier's middleware -> the methods a middleware below it must not have
GUARDED = {
    LEASE_OUTPUT: ("process_spider_output", "process_spider_output_async"),
    CLUSTER_START: ("process_start", "process_start_requests"),
}


def enabled_components(settings: BaseSettings, name: str) -> dict[str, int]:
    """The enabled components of a component setting (with its base), by import path, in the
    order Scrapy runs them: by order, and as given among equal orders (a stable sort)."""
    # as Scrapy composes it: a class given where its base lists its path replaces that entry
    enabled = [
        (component_path(component), order)
        for component, order in settings.get_component_priority_dict_with_base(name).items()
        if order is not None
    ]
    return dict(sorted(enabled, key=lambda entry: entry[1]))


def _around(orders: dict[str, int], path: str) -> tuple[list[str], list[str]]:
    """The components Scrapy lists before ``path`` and after it (``enabled_components``'s order)."""
    listed = list(orders)
    at = listed.index(path)
    return listed[:at], listed[at + 1 :]


def check_spider_middleware_orders(settings: BaseSettings) -> None:
    """Raise ValueError for an enabled spider middleware below the frontier's own that has
    the methods they must come after."""
    orders = enabled_components(settings, "SPIDER_MIDDLEWARES")
    for guard, methods in GUARDED.items():
        if guard not in orders:
            continue
        for path in _around(orders, guard)[0]:
            order = orders[path]
            if path in GUARDED:
                continue
            found = [name for name in methods if hasattr(load_object(path), name)]
            if found:
                name = guard.rsplit(".", 1)[1]
                highest = max(orders.get(other, 0) for other in GUARDED)
                raise ValueError(
                    f"SPIDER_MIDDLEWARES puts {path} at {order}, below {name} at "
                    f"{orders[guard]}: in cluster mode its {found[0]}() must run before the "
                    f"frontier's (docs/settings.md); give it an order above {highest} (Scrapy's "
                    "own spider middlewares start at 50)"
                )


def check_downloader_middleware_orders(settings: BaseSettings) -> None:
    """Raise ValueError for an enabled downloader middleware below ``LeaseFailureMiddleware``
    that has ``process_response``: Scrapy runs it after that middleware's, which has given the
    request its own errback back, so a failure it raises would pass the lease by."""
    orders = enabled_components(settings, "DOWNLOADER_MIDDLEWARES")
    lease = orders.get(LEASE_FAILURES)
    if lease is None:
        return
    for path in _around(orders, LEASE_FAILURES)[0]:
        order = orders[path]
        if hasattr(load_object(path), "process_response"):
            raise ValueError(
                f"DOWNLOADER_MIDDLEWARES puts {path} at {order}, below LeaseFailureMiddleware at "
                f"{lease}: in cluster mode what its process_response() raises must reach the "
                f"request's lease (docs/settings.md); give it an order above {lease} (Scrapy's "
                "own downloader middlewares start at 50)"
            )


def check_pipeline_orders(settings: BaseSettings) -> None:
    """Raise ValueError for an enabled item pipeline after ``KafkaPipeline`` (at a higher
    order, or at its order and listed after it)."""
    orders = enabled_components(settings, "ITEM_PIPELINES")
    kafka = orders.get(KAFKA_PIPELINE)
    if kafka is None:
        return
    after = _around(orders, KAFKA_PIPELINE)[1]
    if after:
        path, order = after[0], orders[after[0]]
        raise ValueError(
            f"ITEM_PIPELINES puts {path} at {order}, after KafkaPipeline at {kafka}: the "
            "item is in Kafka by then, so what it drops or changes would not be; give it "
            f"an order below {kafka}, or put KafkaPipeline after it ({KAFKA_PIPELINE!r}: "
            f"{order + 1} in ITEM_PIPELINES)"
        )
