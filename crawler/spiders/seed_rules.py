"""What a seed may ask for: anyone who can push to ``<spider>:start_urls`` writes seeds.

- ``callback`` must name a callback of the spider itself: not a private name,
  not a method of Scrapy's or this project's spider classes (``close``,
  ``__init__``, ``start``, ``make_request_from_data`` ...), unless the spider
  lists it in ``seed_callbacks``.
- ``meta`` keys starting with ``_`` (the frontier's own, such as
  ``_frontier_lease``) are refused, as are a spider's own (the zhihu spider's
  ``zhihu_*``), and so are the keys that change how or where a request is made
  (``proxy``, ``download_timeout``, ``dont_throttle``, ``browser``, ``session_account``,
  ``depth`` ... see ``PRIVILEGED_META``) unless ``SEEDS_ALLOWED_META`` names them.

Both raise ``InvalidSeed`` (reasons ``callback`` and ``meta``): the seed goes to the
invalid-seed list with the reason, and the node goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from crawler.frontier.seeds import InvalidSeed

PRIVILEGED_META = frozenset(
    {
        "proxy",
        "bindaddress",
        "cookiejar",
        "depth",
        "max_retry_times",
        "retry_times",
        "referrer_policy",
        "redirect_urls",
        "redirect_reasons",
        "allow_offsite",
        "is_start_request",
        "browser",
        "failure_retried",  # set by `crawler failed retry` (crawler.frontier.inspect)
        "failure_retried_before",
    }
)
PRIVILEGED_PREFIXES = ("dont_", "download_", "handle_httpstatus", "ftp_", "playwright", "session_")
FRAMEWORK_MODULES = ("scrapy.", "crawler.spiders.base")


def check_seed_meta(
    meta: Mapping[str, Any], allowed: Iterable[str], own_prefixes: tuple[str, ...] = ()
) -> None:
    """``own_prefixes``: the prefixes of the spider's own meta keys (its state), never a
    seed's to set."""
    permitted = set(allowed)
    for key in meta:
        if key.startswith("_"):
            raise InvalidSeed("meta", f"seed meta key {key!r} is internal (starts with '_')")
        if own_prefixes and key.startswith(own_prefixes):
            raise InvalidSeed("meta", f"seed meta key {key!r} is the spider's own (its state)")
        if key in permitted:
            continue
        if key in PRIVILEGED_META or key.startswith(PRIVILEGED_PREFIXES):
            raise InvalidSeed(
                "meta",
                f"seed meta key {key!r} changes how requests are made; the spider may allow it "
                "with SEEDS_ALLOWED_META",
            )


def seed_callback(spider: Any, name: str) -> Callable[..., Any]:
    """The spider's callback ``name``, if a seed may name it."""
    callback: Callable[..., Any] | None = getattr(spider, name, None)
    if callback is None or not callable(callback):
        raise InvalidSeed("callback", f"spider {spider.name!r} has no callback {name!r}")
    if name in set(getattr(spider, "seed_callbacks", ()) or ()):
        return callback
    if name.startswith("_"):
        raise InvalidSeed("callback", f"seed callback {name!r} is private")
    owner = next((cls for cls in type(spider).__mro__ if name in vars(cls)), None)
    if owner is None or owner.__module__.startswith(FRAMEWORK_MODULES):
        where = f"a method of {owner.__name__}" if owner is not None else "not a method"
        raise InvalidSeed(
            "callback",
            f"seed callback {name!r} is {where}, not a callback of spider {spider.name!r} "
            "(list it in the spider's seed_callbacks to allow it)",
        )
    return callback
