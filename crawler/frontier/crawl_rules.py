"""A ``CrawlSpider``'s rules through the frontier: a request names its rule by what the rule is.

Scrapy's ``CrawlSpider`` sends the requests its rules make with ``meta['rule']``, the rule's
position in ``rules``, and calls that rule's callback for the response. A request stored in
Redis outlives the process that made it: after a redeploy that inserted or reordered rules, a
stored request's position named another rule, whose callback scraped it (an audit: list pages
scraped as items, 45 of 160 pages never fetched, the crawl "finished"). So the stored request
also carries its rule's signature (``meta['_rule_signature']``: its callback, errback,
``follow``, hooks and link extractor's arguments, hashed). The node that leases it finds the
rule by that signature, wherever it now stands (by how it handles responses alone when only
its link pattern changed); a rule that is gone fails the request
(``ValueError``: the frontier's ``decode/ValueError``, naming what to do).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from typing import Any

from scrapy import Request, Spider
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

RULE_META = "rule"  # Scrapy's: the rule's position in the spider's rules
SIGNATURE_META = "_rule_signature"  # the frontier's: what the rule is
RULES_CALLBACK = "_callback"  # the callback CrawlSpider gives the requests its rules make
MAX_DEPTH = 3  # how deep a link extractor's attributes are looked into
# what Scrapy's LinkExtractor keeps of the arguments a spider gives it (restrict_css as xpaths)
EXTRACTOR_ARGUMENTS = (
    "allow_res",
    "deny_res",
    "allow_domains",
    "deny_domains",
    "restrict_xpaths",
    "restrict_text",
    "canonicalize",
)


class RuleSignatures:
    """The signatures of one spider's rules (computed once each)."""

    def __init__(self, spider: Spider) -> None:
        rules: list[Rule] = (
            list(getattr(spider, "_rules", ())) if isinstance(spider, CrawlSpider) else []
        )
        self.spider = spider.name
        self.signatures = [signature(rule) for rule in rules]

    def mark(self, fields: dict[str, Any]) -> None:
        """Add the signature of its rule to a request's stored ``fields`` (``to_dict()``'s)
        when one of the spider's rules made it."""
        meta = fields.get("meta")
        if fields.get("callback") != RULES_CALLBACK or not isinstance(meta, dict):
            return
        index = meta.get(RULE_META)
        if isinstance(index, int) and 0 <= index < len(self.signatures):
            fields["meta"] = {**meta, SIGNATURE_META: self.signatures[index]}

    def resolve(self, request: Request) -> None:
        """Point a leased request's ``meta['rule']`` at the rule that made it, where it is now;
        ValueError when the spider no longer has that rule."""
        wanted = request.meta.pop(SIGNATURE_META, None)
        if wanted is None:
            return
        index = request.meta.get(RULE_META)
        if (
            isinstance(index, int)
            and 0 <= index < len(self.signatures)
            and self.signatures[index] == wanted
        ):
            return  # where it was: the usual case
        found = [at for at, known in enumerate(self.signatures) if known == wanted]
        if len(found) != 1:  # its links' pattern changed: the rule that handles them alike
            handling = _handling(wanted)
            found = [at for at, known in enumerate(self.signatures) if _handling(known) == handling]
        if len(found) != 1:
            raise ValueError(
                f"the request was made by rule {index} of {self.spider}'s rules as they were "
                f"when it was queued, and this node's rules have {len(found) or 'no'} rule(s) "
                "with its callback, errback, hooks and follow (a new version changed or "
                "removed it): keep such a rule until the queue no longer holds its requests, "
                "then `crawler failed <spider> retry` those that failed"
            )
        request.meta[RULE_META] = found[0]


def signature(rule: Rule) -> str:
    """What a rule is: how it handles a response (its callback, errback, hooks, follow,
    cb_kwargs) hashed, ``:``, its link extractor's arguments hashed. A request finds its rule
    by both, else by the first alone (a new version that widened a rule's pattern)."""
    handling = (
        _name(rule.callback),
        _name(rule.errback),
        _name(rule.process_links),
        _name(rule.process_request),
        rule.follow,
        _stable(rule.cb_kwargs, 0),
    )
    extracting = (type(rule.link_extractor).__qualname__, _stable(_given(rule.link_extractor), 0))
    return f"{_digest(handling)}:{_digest(extracting)}"


def _handling(signature: str) -> str:
    """The part of a rule's signature that says how it handles a response."""
    return signature.split(":", 1)[0]


def _digest(described: object) -> str:
    return hashlib.sha1(repr(described).encode(), usedforsecurity=False).hexdigest()[:16]


def _given(extractor: object) -> dict[str, Any]:
    """What a link extractor was given: Scrapy's by the arguments a spider sets (not its
    defaults, such as ``deny_extensions``' list, which a Scrapy upgrade may change), another's
    by its public attributes."""
    held = getattr(extractor, "__dict__", {})
    names = EXTRACTOR_ARGUMENTS if isinstance(extractor, LinkExtractor) else held
    return {name: held.get(name) for name in names if not name.startswith("_")}


def _name(value: object) -> str:
    return "" if value is None else str(getattr(value, "__qualname__", value))


def _stable(value: object, depth: int) -> object:
    """``value`` as what stays the same across processes (patterns, names, plain values)."""
    if isinstance(value, re.Pattern):
        return value.pattern
    if value is None or isinstance(value, (str, int, float, bool, bytes)):
        return value
    if isinstance(value, (set, frozenset, list, tuple, dict)):
        return _stable_container(value, depth)
    if callable(value):
        return _name(value) if hasattr(value, "__qualname__") else type(value).__qualname__
    if depth < MAX_DEPTH and hasattr(value, "__dict__"):
        return (type(value).__qualname__, _stable(vars(value), depth + 1))
    return type(value).__qualname__


def _stable_container(value: Collection[Any], depth: int) -> object:
    if isinstance(value, dict):
        return sorted((str(key), repr(_stable(item, depth + 1))) for key, item in value.items())
    if isinstance(value, (set, frozenset)):  # no order of its own
        return sorted(repr(_stable(item, depth + 1)) for item in value)
    return [_stable(item, depth + 1) for item in value]
