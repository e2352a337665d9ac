"""``RedirectScopeMiddleware``: a redirect obeys the scope rules of links (``crawler.scope``).

What Scrapy 2.19 already does: ``OffsiteMiddleware`` checks every scheduled request,
redirects included, against the spider's ``allowed_domains``. What it misses:

- the redirect of a ``dont_filter`` request (every seed and start URL; Scrapy copies
  ``dont_filter`` to the redirect) is never checked, so it is followed anywhere;
- the ``pages`` spider's rule (request meta ``crawler_scope``: its seed's ``host[:port]``)
  binds the links it extracts, not the redirects it is answered with;
- what it refuses is dropped without a word to the frontier: the lease of the redirected
  request waited for the idle sweep and ended as done, not failed.

Connected to ``request_scheduled`` (as Scrapy's ``OffsiteMiddleware`` is), before the
scheduler stores anything: a request whose meta says it was redirected (``redirect_urls``,
set by ``RedirectMiddleware`` and ``MetaRefreshMiddleware``) to a URL out of scope is
dropped, logged at INFO (URLs masked), counted in ``redirect/offsite`` and, in cluster
mode, the lease of the request that was redirected fails with reason ``redirect/offsite``
(its record's ``error`` names the target and the rule). Off with
``REDIRECT_SCOPE_ENABLED = False``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector

from crawler.frontier.scheduler import PARENT_META
from crawler.middlewares.lease_output import tracked_lease
from crawler.middlewares.refused import RefusedRequest
from crawler.scope import out_of_scope
from crawler.settings_values import get_bool
from crawler.url_credentials import mask_secrets

logger = logging.getLogger(__name__)

REASON = "redirect/offsite"


@dataclass(frozen=True)
class RedirectScopeSettings:
    enabled: bool

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RedirectScopeSettings:
        return cls(enabled=get_bool(settings, "REDIRECT_SCOPE_ENABLED", True))


class RedirectScopeMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        if not RedirectScopeSettings.from_settings(crawler.settings).enabled:
            raise NotConfigured("REDIRECT_SCOPE_ENABLED is False")
        assert crawler.stats is not None
        self.crawler = crawler
        self.stats: StatsCollector = crawler.stats
        crawler.signals.connect(self.request_scheduled, signal=signals.request_scheduled)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RedirectScopeMiddleware:
        return cls(crawler)

    def request_scheduled(self, request: Request, spider: Spider) -> None:
        redirected_from = request.meta.get("redirect_urls")
        if PARENT_META in request.meta:  # a link a callback yielded (its meta may be a copy)
            return
        if not redirected_from:
            return
        allowed_domains = getattr(spider, "allowed_domains", None) or ()
        why = out_of_scope(request.url, request.meta, allowed_domains)
        if why is None:
            return
        source, target = mask_secrets(str(redirected_from[-1])), mask_secrets(request.url)
        logger.info("Refused the redirect from %s to %s (%s)", source, target, why)
        self.stats.inc_value(REASON)
        message = f"redirect from {source} to {target} refused: {why}"
        if (found := tracked_lease(self.crawler, request)) is not None:
            tracker, lease_id = found
            tracker.fail(lease_id, REASON, message)
            tracker.callback_done(lease_id)
        raise RefusedRequest(REASON, message)
