"""Where a request may go: the scope rules links and redirects share (pure functions).

- Request meta ``crawler_scope`` (``host[:port]``, set by the ``pages`` spider from its
  seed): the request may only go to that exact ``host[:port]``;
- the spider's ``allowed_domains``, as Scrapy's ``OffsiteMiddleware`` reads them: the
  host is one of them or a subdomain of one; an empty list allows every host; request
  meta ``allow_offsite: True`` lifts this rule (``dont_filter`` does not: it is about
  deduplication, and Scrapy copies it to every redirect of a seed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

SCOPE_META_KEY = "crawler_scope"


def site_of(url: str) -> str:
    """The ``host[:port]`` of ``url``, as ``crawler_scope`` holds it."""
    return urlsplit(url).netloc


def out_of_scope(url: str, meta: Mapping[str, Any], allowed_domains: Iterable[str]) -> str | None:
    """Why ``url`` is outside the scope of a request with ``meta``, or None if it is inside."""
    scope = meta.get(SCOPE_META_KEY)
    if isinstance(scope, str) and scope and site_of(url) != scope:
        return f"outside the site {scope}"
    domains = sorted({domain.lower() for domain in allowed_domains if domain})
    if not domains or meta.get("allow_offsite"):
        return None
    host = urlsplit(url).hostname or ""
    if any(host == domain or host.endswith("." + domain) for domain in domains):
        return None
    return f"not in allowed_domains {domains}"
