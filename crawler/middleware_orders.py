"""Spider middlewares ordered where they would hide their work from the frontier (cluster mode).

Scrapy passes a callback's output, and ``start()``'s, from the spider towards the engine
through the spider middlewares in decreasing order. ``LeaseOutputMiddleware`` holds a page's
lease for each item and request it sees, so it must see them after every other middleware:
an item a middleware below it drops was held and is never settled, and the lease is never
finished (the node never closes). ``ClusterStartMiddleware`` lets one node of the crawl run
``start()``; what a middleware below it adds is added by every node. Such a middleware stops
the start, with the order to give it instead.
"""

from __future__ import annotations

from scrapy.settings import BaseSettings
from scrapy.utils.misc import load_object

from crawler.settings_values import component_path

LEASE_OUTPUT = "crawler.middlewares.lease_output.LeaseOutputMiddleware"
CLUSTER_START = "crawler.middlewares.cluster_start.ClusterStartMiddleware"
# the frontier's middleware -> the methods a middleware below it must not have
GUARDED = {
    LEASE_OUTPUT: ("process_spider_output", "process_spider_output_async"),
    CLUSTER_START: ("process_start", "process_start_requests"),
}


def check_spider_middleware_orders(settings: BaseSettings) -> None:
    """Raise ValueError for an enabled spider middleware below the frontier's own that has
    the methods they must come after."""
    orders = {
        component_path(component): order
        for component, order in settings.getwithbase("SPIDER_MIDDLEWARES").items()
        if order is not None
    }
    for guard, methods in GUARDED.items():
        if guard not in orders:
            continue
        for path, order in orders.items():
            if order >= orders[guard] or path in GUARDED:
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
