"""What Scrapy counts or paces per process, in cluster mode: turned into its cluster-wide
equivalent where there is one, said once at start where there is none (``ClusterAddon``).

A ``DOWNLOAD_DELAY`` (setting or the spider's ``download_delay``) and each ``DOWNLOAD_SLOTS``
delay become cluster-wide rates of the politeness limiter (``POLITENESS_RATE``,
``POLITENESS_SITE_RATES``): with N nodes they would pace a site N times faster (with
``DOWNLOAD_DELAY_JITTER``, a delay's rate spreads its requests as Scrapy does:
``POLITENESS_JITTER``); a negative
delay (Scrapy's 0) stops the start, a delay kept per node (``POLITENESS_ENABLED=False``) or one
a site's own rate outranks is said. AutoThrottle, ``CONCURRENT_REQUESTS_PER_DOMAIN`` and
``_PER_IP``, a slot's concurrency and the ``CLOSESPIDER_*`` counts hold per node: a warning
says so, with what holds for the cluster instead.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from scrapy import Spider
from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

from crawler.politeness.settings import rate_key
from crawler.scrapy_redis_given import given
from crawler.settings_values import get_bool, get_dict, get_float, get_int

logger = logging.getLogger(__name__)

MAX_JITTER = 0.99  # POLITENESS_JITTER is below 1: a request never leaves before its slot

# Scrapy's CloseSpider extension's counts -> what each node counts
CLOSESPIDER_COUNTS = {
    "CLOSESPIDER_PAGECOUNT": ("crawled", "pages"),
    "CLOSESPIDER_PAGECOUNT_NO_ITEM": ("crawled", "pages in a row without an item"),
    "CLOSESPIDER_ITEMCOUNT": ("scraped", "items"),
    "CLOSESPIDER_ERRORCOUNT": ("met", "errors"),
}
ITEMS_LATE = (
    ". An item counts once Kafka acknowledged it (Scrapy's item_scraped comes then), so each "
    "node also goes past the count by what it crawls meanwhile"
)


def download_delay(settings: BaseSettings, spider: Spider | type[Spider] | None) -> None:
    """A ``DOWNLOAD_DELAY`` the project or spider gives holds per node; with N nodes a site
    would get N times the pace asked for. It becomes the cluster-wide rate of every site
    (1 / DOWNLOAD_DELAY requests a second) unless ``POLITENESS_RATE`` is given too at the same
    priority or a higher one (a spider's delay outranks the project's rate; ``-s`` outranks
    both, as Scrapy ranks settings). The spider's ``download_delay`` attribute counts as
    Scrapy counts it, at the spider's priority (Scrapy applies it after the add-ons)."""
    delay = get_float(settings, "DOWNLOAD_DELAY")
    priority = settings.getpriority("DOWNLOAD_DELAY") or 0
    attribute = getattr(spider, "download_delay", None)
    if attribute is not None and priority < SETTINGS_PRIORITIES["spider"]:
        try:
            delay, priority = float(attribute), SETTINGS_PRIORITIES["spider"]
        except (TypeError, ValueError):
            raise ValueError(
                f"the spider's download_delay={attribute!r} (an attribute, or -a "
                "download_delay=...) must be a number of seconds"
            ) from None
    if delay < 0 or not math.isfinite(delay):  # Scrapy waits 0 s for it, without a word
        raise ValueError(f"DOWNLOAD_DELAY={delay!r} must be a number of seconds >= 0")
    if priority <= 0:
        return
    if delay == 0:
        if get_bool(settings, "POLITENESS_ENABLED") and not given(settings, "POLITENESS_RATE"):
            logger.warning(
                "DOWNLOAD_DELAY=0 (no delay) is given, and in cluster mode each site is paced "
                "at POLITENESS_RATE=%g requests a second all the same (all nodes together: the "
                "cluster's politeness); give POLITENESS_RATE to pace sites faster, or "
                "POLITENESS_ENABLED=False to turn the cluster-wide limit off",
                get_float(settings, "POLITENESS_RATE"),
            )
        return
    if not get_bool(settings, "POLITENESS_ENABLED"):
        logger.warning(
            "DOWNLOAD_DELAY=%g holds per node: POLITENESS_ENABLED=False turns the cluster-wide "
            "limiter off, so with N nodes a site gets up to N times the pace asked for",
            delay,
        )
        return
    rate_priority = settings.getpriority("POLITENESS_RATE") or 0
    if not given(settings, "POLITENESS_RATE") or priority > rate_priority:
        settings.set("POLITENESS_RATE", 1 / delay, priority=priority)
        randomized(settings, priority)
        if sites := sorted(map(str, get_dict(settings, "POLITENESS_SITE_RATES"))):
            logger.warning(
                "POLITENESS_SITE_RATES keeps its own rate for %s over DOWNLOAD_DELAY=%g, which "
                "paces every other site (as a DOWNLOAD_SLOTS delay keeps its slot's in Scrapy); "
                "drop those entries to pace them by the delay",
                ", ".join(sites),
                delay,
            )


def closespider_counts(settings: BaseSettings) -> None:
    """Scrapy's ``CloseSpider`` extension counts what its node did: said once at start."""
    for name, what in CLOSESPIDER_COUNTS.items():
        count = get_int(settings, name)
        if count > 0:
            logger.warning(
                "%s=%d counts per node in cluster mode: each node closes when it has %s "
                "that many %s (N nodes: up to N times as many) and the others go on; what "
                "is left stays in the frontier for the next run (docs/settings.md)%s",
                name,
                count,
                *what,
                ITEMS_LATE if name == "CLOSESPIDER_ITEMCOUNT" else "",
            )
    if (seconds := get_float(settings, "CLOSESPIDER_TIMEOUT_NO_ITEM")) > 0:
        logger.warning(
            "CLOSESPIDER_TIMEOUT_NO_ITEM=%g counts per node in cluster mode: a node closes "
            "after that many seconds without an item of its own, also while it waits for "
            "links other nodes are crawling, so the cluster may shrink while work is left "
            "(it stays in the frontier; docs/settings.md)",
            seconds,
        )


def per_node_limits(settings: BaseSettings, spider: Spider | type[Spider] | None) -> None:
    """Scrapy's download limits that each node keeps alone: said once at start, with what
    holds cluster-wide instead (the politeness limiter, per site). A limit below 1 stops the
    start: Scrapy takes it and never downloads (its node would hold its leases and ignore a
    first SIGTERM: an audit). The spider's ``max_concurrent_requests`` attribute counts as
    ``CONCURRENT_REQUESTS_PER_DOMAIN``, as Scrapy counts it (after the add-ons)."""
    per_domain = get_int(settings, "CONCURRENT_REQUESTS_PER_DOMAIN")
    attribute: Any = getattr(spider, "max_concurrent_requests", None)
    from_spider = attribute is not None and (
        (settings.getpriority("CONCURRENT_REQUESTS_PER_DOMAIN") or 0)
        < SETTINGS_PRIORITIES["spider"]
    )
    if from_spider:
        try:
            per_domain = int(attribute)
        except (TypeError, ValueError):
            raise ValueError(
                f"the spider's max_concurrent_requests={attribute!r} (Scrapy's "
                "CONCURRENT_REQUESTS_PER_DOMAIN) must be a whole number"
            ) from None
    limits = {
        "CONCURRENT_REQUESTS": get_int(settings, "CONCURRENT_REQUESTS"),
        "CONCURRENT_REQUESTS_PER_DOMAIN": per_domain,
    }
    for name, limit in limits.items():
        if limit < 1:
            raise ValueError(
                f"{name}={limit} must be >= 1: a node with it never downloads (Scrapy takes it "
                "and waits for ever)"
            )
    instead = (
        "the cluster-wide limit of a site is POLITENESS_RATE, POLITENESS_SITE_RATES and "
        "POLITENESS_BURST (docs/settings.md)"
    )
    if get_bool(settings, "AUTOTHROTTLE_ENABLED"):
        logger.warning(
            "AUTOTHROTTLE_ENABLED=True adjusts each node's own delay: with N nodes a site "
            "gets up to N times the pace it settles on; %s, which also slows down on 429 and "
            "503 for every node",
            instead,
        )
    if from_spider or given(settings, "CONCURRENT_REQUESTS_PER_DOMAIN"):
        logger.warning(
            "CONCURRENT_REQUESTS_PER_DOMAIN=%d counts per node in cluster mode (N nodes: up "
            "to N times as many requests at once to one site); %s",
            per_domain,
            instead,
        )
    per_ip = get_int(settings, "CONCURRENT_REQUESTS_PER_IP")
    if per_ip > 0:
        logger.warning(
            "CONCURRENT_REQUESTS_PER_IP=%d counts per node in cluster mode (N nodes: up to "
            "N times as many requests at once to one IP), and DOWNLOAD_DELAY is paced per "
            "host[:port], not per IP as Scrapy paces it with this setting (an IP serving "
            "several hosts gets each one's rate); %s",
            per_ip,
            instead,
        )
    if slots := get_dict(settings, "DOWNLOAD_SLOTS"):
        paced = _slot_delays(settings, slots)
        _slot_jitters(settings, slots)
        logger.warning(
            "DOWNLOAD_SLOTS (%s): concurrency holds per node in cluster mode (N nodes: up "
            "to N times as many requests at once)%s; %s",
            ", ".join(sorted(map(str, slots))),
            f", and each delay is now its slot's cluster-wide rate, 1/delay for every node "
            f"together (POLITENESS_SITE_RATES of {', '.join(paced)})"
            if paced
            else "",
            instead,
        )


def _slot_jitters(settings: BaseSettings, slots: dict[str, object]) -> None:
    """A slot's own ``jitter`` (or ``randomize_delay``) is not kept: said."""
    own = [
        str(key)
        for key, slot in slots.items()
        if isinstance(slot, dict) and ("jitter" in slot or "randomize_delay" in slot)
    ]
    if own and get_bool(settings, "POLITENESS_ENABLED"):  # else Scrapy's own jitter holds
        logger.warning(
            "DOWNLOAD_SLOTS jitter of %s is not kept per site: the cluster's limiter spreads "
            "every site's requests by POLITENESS_JITTER=%g",
            ", ".join(sorted(own)),
            get_float(settings, "POLITENESS_JITTER"),
        )


def _slot_delays(settings: BaseSettings, slots: dict[str, object]) -> list[str]:
    """A ``DOWNLOAD_SLOTS`` delay holds per node, as ``DOWNLOAD_DELAY`` does: each slot
    with one and no rate of its own in ``POLITENESS_SITE_RATES`` gets 1/delay there (the
    limiter paces a slot the spider names under its name, and a host's slot is the host).
    The slots given a rate."""
    rates = dict(get_dict(settings, "POLITENESS_SITE_RATES"))
    given = {str(key).lower() for key in rates}
    paced = []
    for key, slot in slots.items():
        delay = slot.get("delay") if isinstance(slot, dict) else None
        site = rate_key(key)
        if not isinstance(delay, (int, float)) or delay <= 0 or site is None or site in given:
            continue
        rates[site] = 1 / delay
        paced.append(site)
    if paced:
        priority = settings.getpriority("DOWNLOAD_SLOTS") or 0
        settings.set("POLITENESS_SITE_RATES", rates, priority=priority)
        randomized(settings, priority)
    return paced


def randomized(settings: BaseSettings, priority: int) -> None:
    """A delay made a rate: Scrapy waits 1 - j to 1 + j times a delay (j: ``DOWNLOAD_DELAY_JITTER``,
    0.5 by default, or the deprecated ``RANDOMIZE_DOWNLOAD_DELAY`` given at a higher priority:
    0.5 or 0), so the limiter spreads each request as much (``POLITENESS_JITTER``, unless given;
    it spreads every site's requests, the mean rate unchanged; below 1, said when cut to it)."""
    if given(settings, "POLITENESS_JITTER"):
        return
    randomize = settings.getpriority("RANDOMIZE_DOWNLOAD_DELAY") or 0
    if randomize > (settings.getpriority("DOWNLOAD_DELAY_JITTER") or 0):
        jitter = 0.5 if get_bool(settings, "RANDOMIZE_DOWNLOAD_DELAY") else 0.0
    else:
        jitter = get_float(settings, "DOWNLOAD_DELAY_JITTER")
    if jitter < 0 or not math.isfinite(jitter):
        raise ValueError(f"DOWNLOAD_DELAY_JITTER={jitter!r} must be a number >= 0")
    if jitter > MAX_JITTER:
        logger.warning(
            "DOWNLOAD_DELAY_JITTER=%g: the cluster's limiter spreads each request by less than "
            "its site's interval either way (POLITENESS_JITTER < 1): %g",
            jitter,
            MAX_JITTER,
        )
        jitter = MAX_JITTER
    settings.set("POLITENESS_JITTER", jitter, priority=priority)
