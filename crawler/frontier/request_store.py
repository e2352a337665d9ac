"""How ``LeasingScheduler`` stores requests in the frontier, and what a failure record holds.

A request is stored as its lean JSON (``crawler.frontier.codec``), compressed unless
``FRONTIER_COMPRESS`` is off, with a fingerprint for the shared dedup: "" for a
``dont_filter`` request, which is never deduplicated, unless it is a seed (fetched
anyway, but recorded as seen, so the links back to it are not fetched again). A failed
lease leaves a record with the reason, the node, the time and the request, URL credentials
masked. Items, scrapy-playwright's page methods, NaN and infinity in meta or cb_kwargs come
back as themselves (``crawler.frontier.meta_objects``), and the user's dicts in meta, cb_kwargs and
cookies as they were, whatever their keys (``codec.escaped``).
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.utils.request import (
    RequestFingerprinter,
    RequestFingerprinterProtocol,
    request_from_dict,
)

from crawler.frontier import codec, meta_objects
from crawler.frontier.acks import LeaseState
from crawler.frontier.client import Lease, NewRequest
from crawler.frontier.crawl_rules import RuleSignatures
from crawler.node import resolve_crawl_id
from crawler.said_once import SaidOnce
from crawler.scope import site_of
from crawler.sessions.models import OWN_COOKIES_META
from crawler.url_credentials import mask_secrets

logger = logging.getLogger(__name__)
# Scrapy's own meta keys whose value its components need as a tuple (``bindaddress``'s
# (host, port)) or hashable (a ``cookiejar`` key): JSON gives lists back, made tuples again
TUPLE_META = ("bindaddress", "cookiejar")
# What decoding a stored request raises for a body it cannot read or a request it cannot rebuild
# (Scrapy's load_object: NameError or ImportError for a class its module and name do not find)
DECODE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, NameError, ImportError)
# The fields of the user's dicts, packed (items, page methods: crawler.frontier.meta_objects)
USER_DICTS = ("meta", "cb_kwargs", "cookies")


def failure_record(state: LeaseState, node_id: str) -> bytes:
    """The ``{<spider>}:failed`` record of a lease that failed ("" when it did not)."""
    if state.failure is None:
        return b""
    return codec.failure_json(state.failure, node_id, state.body, state.detail)


def dedup_fingerprint(fingerprinter: RequestFingerprinterProtocol, request: Request) -> str:
    """The frontier's fingerprint of ``request`` (hex): Scrapy's own fingerprinter's SHA-1 as it
    is; another fingerprinter's bytes hashed with SHA-1 first. The dedup keeps 12 bytes of a
    fingerprint, and one of the user's own (a canonical URL, ``b"product:" + id``) can share
    its first 12 bytes with many others."""
    raw = fingerprinter.fingerprint(request)
    if type(fingerprinter) is RequestFingerprinter:
        return raw.hex()
    return hashlib.sha1(raw, usedforsecurity=False).hexdigest()


class RequestStore:
    """Encode and decode the requests of one spider with the crawl's fingerprinter."""

    def __init__(self, crawler: Crawler, spider: Spider, *, compress: bool = True) -> None:
        assert crawler.request_fingerprinter is not None
        self.fingerprinter = crawler.request_fingerprinter
        # what the crawl records (crawler.frontier.dedup_claim): its fingerprints are by this
        kind = type(self.fingerprinter)
        self.fingerprinter_path = f"{kind.__module__}.{kind.__qualname__}"
        self.crawl_id = resolve_crawl_id(crawler.settings.get("CRAWLER_CRAWL_ID"))
        self.spider = spider
        self.rules = RuleSignatures(spider)  # a CrawlSpider's rules, by what they are
        self.compress = compress  # FRONTIER_COMPRESS
        assert crawler.stats is not None
        self.stats = crawler.stats
        self.said = SaidOnce(self.stats, logger)
        self._rebuilt: set[type[Request]] = set()  # the classes a stored request was rebuilt of

    def fingerprint(self, request: Request, seed: bool = False, *, start_url: bool = False) -> str:
        """The dedup fingerprint (hex), or "" for a request that is never deduplicated. A start
        URL (``start_url``: a ``RedisSpider``'s, made on every node) has one of its own, of the
        crawl, which keeps it once a crawl and leaves its page's free: a link back to the page
        fetches it again, as Scrapy's ``dont_filter`` start requests let it."""
        if start_url:
            page = dedup_fingerprint(self.fingerprinter, request)
            own = f"start_url {self.crawl_id} {page}".encode()
            return hashlib.sha1(own, usedforsecurity=False).hexdigest()
        if request.dont_filter and not seed:
            return ""
        return dedup_fingerprint(self.fingerprinter, request)

    def encode(self, request: Request, fingerprint: str, seed: bool = False) -> NewRequest:
        """Raises ``codec.UnserializableRequestError`` as ``stored`` does."""
        body, left_out = self.stored(request)
        if type(request) not in self._rebuilt:
            self._try_rebuild(request, body)
        self._report_reshaped(request)
        if left_out:
            self._report_left_out(request.url, left_out)
        score = -float(request.priority)
        site = site_of(request.url)
        return NewRequest(fingerprint=fingerprint, score=score, body=body, force=seed, site=site)

    def stored(self, request: Request) -> tuple[bytes, list[str]]:
        """The request as Redis stores it, and the ``dumps_kwargs`` it leaves out (reported by
        ``encode``). Raises ``codec.UnserializableRequestError`` naming where the value JSON
        can't hold is (``meta key 'socket'``, ``field 'priority'``), or the callback or errback
        that is not a method of the spider (a lambda, a function)."""
        try:
            fields = request.to_dict(spider=self.spider)
        except ValueError as exc:  # Scrapy stores a callback by its name on the spider
            which = " and ".join(
                f"{role} {getattr(function, '__name__', repr(function))}"
                for role, function in (("callback", request.callback), ("errback", request.errback))
                if callable(function) and getattr(function, "__self__", None) is not self.spider
            )
            raise codec.UnserializableRequestError(
                f"request {request.url!r} cannot be stored in Redis: its {which or 'callback'} "
                "is not a method of the spider (Scrapy stores callbacks by name: use a method of "
                f"the spider, with cb_kwargs for what a closure would hold): {exc}"
            ) from exc
        if OWN_COOKIES_META in request.meta and "headers" in fields:
            # the session middleware's header, the session's cookies in it: built again
            fields["headers"] = {
                name: values
                for name, values in fields["headers"].items()
                if name.lower() not in ("cookie", b"cookie")
            }
        for key in USER_DICTS:
            if fields.get(key):  # an empty one (cookies, most cb_kwargs) holds nothing to pack
                fields[key] = packed(request.url, key, fields[key])
        self.rules.mark(fields)
        left_out: list[str] = []
        if fields.get("dumps_kwargs"):  # a JsonRequest's json.dumps options
            fields["dumps_kwargs"], left_out = meta_objects.by_path(fields["dumps_kwargs"])
        return codec.dumps(fields, compress=self.compress), left_out

    def _try_rebuild(self, request: Request, body: bytes) -> None:
        """Rebuild ``request`` from ``body`` as the node that leases it will, once per class:
        UnserializableRequestError naming the class if it cannot be."""
        try:
            self._request(body)
        except DECODE_ERRORS as exc:
            cls = type(request)
            raise codec.UnserializableRequestError(
                f"request {request.url!r} cannot be stored in Redis: its class {cls.__module__}."
                f"{cls.__qualname__} cannot be rebuilt from what is stored, as the node that "
                f"leases it must ({type(exc).__name__}: {exc}): Scrapy calls the class with the "
                "fields its attributes name; name there an argument its __init__ needs "
                "(attributes = (*Request.attributes, '<argument>'), its value stored as JSON) or "
                "give it a default, and define the class at a module's top level (it is found "
                "by its module and name)"
            ) from exc
        self._rebuilt.add(type(request))

    def _report_reshaped(self, request: Request) -> None:
        """Count (``frontier/reshaped/<type>``) the meta and cb_kwargs values the callback
        will get back as another type, with a warning the first time of each type."""
        found: set[str] = set()
        meta = request.meta
        if any(key in meta for key in TUPLE_META):  # they come back as they were
            meta = {key: value for key, value in meta.items() if key not in TUPLE_META}
        for held in (meta, request.cb_kwargs):
            meta_objects.reshaped_types(held, found)
        for name in sorted(found):
            self.said.count(
                f"frontier/reshaped/{name}",
                "Request %s holds a %s in its meta or cb_kwargs: stored in Redis as JSON, its "
                "callback gets it back as a list, string or dict (a tuple or set as a list, a "
                "dict subclass as a dict, a datetime as its ISO text); logged once",
                request.url,
                name,
            )

    def _report_left_out(self, url: str, names: list[str]) -> None:
        """Count (``frontier/reshaped/dumps_kwargs``) the JsonRequests stored without some of
        their ``dumps_kwargs``, with a warning the first time."""
        self.said.count(
            "frontier/reshaped/dumps_kwargs",
            "Request %s is a JsonRequest whose dumps_kwargs %s cannot be stored in Redis (not "
            "JSON, nor a class or function its import path finds: a lambda, a local function): "
            "left out; its body is encoded already, only a later replace(data=...) encodes "
            "without them; logged once",
            url,
            ", ".join(map(repr, names)),
        )

    def decode(self, lease: Lease) -> Request:
        """Raises one of ``DECODE_ERRORS`` for a body it can't read."""
        return self._request(lease.body)

    def rebuild(self, body: bytes) -> Request:
        """The request of a record this node wrote (``encode``'s body). Raises one of
        ``DECODE_ERRORS`` for a body it can't read."""
        return self._request(body)

    def stored_fingerprint(self, body: bytes) -> str:
        """The dedup fingerprint of a stored request ("" for one never deduplicated, or one
        this node cannot rebuild): what a node that re-enqueues what it held after Redis lost
        its data records in the new dedup."""
        try:
            request = self._request(body)
        except DECODE_ERRORS:
            return ""
        return self.fingerprint(request)

    def undecodable(self, lease: Lease, exc: Exception) -> LeaseState:
        """The failed lease of a request ``decode`` raised ``exc`` for (a callback the spider
        no longer has, a class this node has not loaded, a damaged body), logged with its
        URL; the record's ``error`` says why, URL credentials masked."""
        reason = f"decode/{type(exc).__name__}"
        error = mask_secrets(str(exc))
        url = codec.stored_url(lease.body)
        logger.error(
            "Leased request %s (lease %s) cannot be decoded (%s): %s", url, lease.id, reason, error
        )
        return LeaseState(lease.id, lease.body, failure=reason, error=error)

    def _request(self, body: bytes) -> Request:
        fields = codec.loads(body, tagged=meta_objects.restore)
        meta = fields.get("meta")
        for key in TUPLE_META:
            if meta and isinstance(meta.get(key), list):
                meta[key] = as_tuple(meta[key])
        request = request_from_dict(fields, spider=self.spider)
        self.rules.resolve(request)
        return request


def packed(url: str, field: str, value: Any) -> Any:
    """``meta_objects.pack(value)``, the request's ``field``; UnserializableRequestError naming
    the key whose value it cannot pack."""
    try:
        return meta_objects.pack(value)
    except TypeError as exc:
        where = codec.where(field, value, meta_objects.pack)
        raise codec.UnserializableRequestError(
            f"request {url!r} cannot be stored in Redis: {where} holds {exc}"
        ) from exc


def as_tuple(value: list[Any]) -> tuple[Any, ...]:
    """A list JSON gave back as the tuple it was, lists in it too."""
    return tuple(as_tuple(item) if isinstance(item, list) else item for item in value)
