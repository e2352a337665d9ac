"""Politeness settings, read once and validated."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings
from w3lib.url import safe_url_string

from crawler.politeness.delays import site_of_netloc
from crawler.politeness.limiter import Penalty, Rate
from crawler.settings_values import (
    dict_value,
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_typed_list,
    status_code,
    whole_number,
)

logger = logging.getLogger(__name__)

RATE_FIELDS = ("rate", "burst")
# A site as the limiter names a request's (``site_of_netloc`` of the URL Scrapy made of it:
# the host in lower case, IDNA-encoded, an IPv6 address in brackets; the port in decimal).
SITE = re.compile(
    r"(?:[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?|\[[0-9a-f:.]+\])(?::(?:0|[1-9][0-9]{0,4}))?"
)


def _limiter_site(text: str) -> str | None:
    """The site the limiter gives a request to the URL or ``host[:port]`` ``text`` (Scrapy
    encodes a request's URL with w3lib's ``safe_url_string``), or None if it has none."""
    try:
        netloc = urlsplit(text if "://" in text or text.startswith("//") else f"//{text}").netloc
        url = safe_url_string(f"http://{site_of_netloc(netloc)}/")
        return site_of_netloc(urlsplit(url).netloc) or None
    except ValueError:  # a bad IPv6 address or port
        return None


def is_site_key(key: object) -> bool:
    """Whether ``key`` names a site as the limiter names a request's (in any case)."""
    site = str(key).lower()
    return bool(SITE.fullmatch(site)) and _limiter_site(site) == site


DEFAULT_PORTS = {"http": 80, "https": 443}  # left out of a site (as Scrapy's slot leaves them)
# a host:port mistyped (a port out of range, none, a bracket left open): no slot name
HOST_AND_PORT = re.compile(r"[^:]*:[0-9]*|\[.*")


def without_default_port(site: str) -> str:
    """``site`` without ``:80`` or ``:443``, which the limiter leaves out of a request's."""
    host, colon, port = site.rpartition(":")
    return (
        host
        if colon
        and port in map(str, DEFAULT_PORTS.values())
        and (host.endswith("]") or ":" not in host)
        else site
    )


def rate_key(key: object) -> str | None:
    """The site ``key`` names as the limiter names a request's, in lower case: a ``host[:port]``
    (never with a default port, which a request's site leaves out), or a ``download_slot`` a
    spider gives its requests (a name without dots, slashes, ``@`` or spaces around it, and
    not shaped like a host and port, which no host or URL mistyped has); None when it could
    name none."""
    text = str(key)
    if is_site_key(text):
        return text.lower() if without_default_port(text) == text else None
    if (
        text
        and text == text.strip()
        and not any(mark in text for mark in "./@")
        and not HOST_AND_PORT.fullmatch(text)
    ):
        return text.lower()
    return None


def looks_like_a_port(slot: str) -> bool:
    """Whether a slot name ends in ``:`` and a part with digits (``localhost:8o80``)."""
    _, colon, tail = slot.rpartition(":")
    return bool(colon) and any(char.isdigit() for char in tail)


def _site(name: str, key: Any, value: Any) -> str:
    """The site a ``POLITENESS_SITE_RATES`` key names, in the form the limiter gives a request's
    site; a key no request's site could match is refused (its site would get the default rate)."""
    if (site := rate_key(key)) is not None:
        return site
    suggested = _limiter_site(str(key).strip())
    if suggested and SITE.fullmatch(suggested):
        instead = repr(without_default_port(suggested))
    else:
        instead = "host or host:port"
    raise ValueError(
        f"{name}={value!r}: {key!r} is not a site as the rate limiter names one (host or "
        f"host:port, without a scheme, user, path, slash, spaces or a default port :80 or "
        f":443, host in IDNA form; or a "
        f"download_slot name without dots, slashes or @); write {instead}"
    )


def _host(site: str) -> str:
    """``site`` without its port (``[::1]:8080`` is ``[::1]``)."""
    host, colon, port = site.rpartition(":")
    return host if colon and port.isdigit() else site


def _rate(name: str, value: Any, default_burst: int) -> Rate:
    """A rate is a number (requests/s) or ``{"rate": r, "burst": b}``, also given as the text
    of a JSON object (``-s``, the environment)."""
    if isinstance(value, str) and value.strip().startswith("{"):
        value = dict_value(name, value)
    if isinstance(value, Mapping):
        unknown = [field for field in value if field not in RATE_FIELDS]
        if unknown:
            raise ValueError(
                f"{name}={value!r}: unknown field{'s' * (len(unknown) > 1)} "
                f"{', '.join(repr(field) for field in unknown)}; "
                'a rate is a number or {"rate": r, "burst": b}'
            )
    try:
        if isinstance(value, Mapping):
            rate = Rate(float(value["rate"]), whole_number(value.get("burst", default_burst)))
        else:
            rate = Rate(float(value), default_burst)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{name}={value!r} is not a rate (a number or {{rate, burst}})") from exc
    if not math.isfinite(rate.per_second) or rate.per_second <= 0:
        raise ValueError(f"{name}={value!r}: the rate must be a finite number > 0")
    if rate.burst < 1:
        raise ValueError(f"{name}={value!r}: its burst must be >= 1")
    return rate


@dataclass(frozen=True, slots=True)
class PolitenessSettings:
    default: Rate
    sites: Mapping[str, Rate]
    penalty: Penalty
    penalty_statuses: frozenset[int]
    key_template: str
    jitter: float = 0.0  # POLITENESS_JITTER: a request's spacing is its interval times 1 +- it

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> PolitenessSettings:
        if not get_bool(settings, "POLITENESS_ENABLED"):  # Scrapy says it in a WARNING
            raise NotConfigured(
                "POLITENESS_ENABLED=False: no limit per site (POLITENESS_RATE); each node paces "
                "a site by its own DOWNLOAD_DELAY and CONCURRENT_REQUESTS_PER_DOMAIN (N nodes: "
                "N times as fast)"
            )
        burst = get_int(settings, "POLITENESS_BURST")
        if burst < 1:
            raise ValueError(f"POLITENESS_BURST={burst} must be >= 1")
        sites: dict[str, Rate] = {}
        keys: dict[str, Any] = {}
        for key, value in get_dict(settings, "POLITENESS_SITE_RATES").items():
            name = f"POLITENESS_SITE_RATES[{key!r}]"
            site = _site(name, key, value)
            if site in keys:
                raise ValueError(
                    f"POLITENESS_SITE_RATES: {keys[site]!r} and {key!r} name the same site "
                    f"{site}; keep one"
                )
            keys[site] = key
            sites[site] = _rate(name, value, burst)
            if not is_site_key(site) and looks_like_a_port(site):
                logger.warning(
                    "POLITENESS_SITE_RATES: %r is no host:port: it paces only requests whose "
                    "meta download_slot is %r (a port mistyped? write host:port)",
                    key,
                    site,
                )
        values = cls(
            default=_rate("POLITENESS_RATE", settings.get("POLITENESS_RATE"), burst),
            sites=sites,
            penalty=Penalty(
                cooldown=get_float(settings, "POLITENESS_COOLDOWN"),
                max_cooldown=get_float(settings, "POLITENESS_MAX_COOLDOWN"),
                min_factor=get_float(settings, "POLITENESS_MIN_FACTOR"),
                recovery=get_float(settings, "POLITENESS_RECOVERY"),
                strike_window=get_float(settings, "POLITENESS_STRIKE_WINDOW"),
            ),
            penalty_statuses=frozenset(
                get_typed_list(
                    settings, "POLITENESS_PENALTY_STATUSES", status_code, "HTTP statuses"
                )
            ),
            key_template=settings.get("POLITENESS_KEY"),
            jitter=get_float(settings, "POLITENESS_JITTER"),
        )
        values.validate()
        return values

    def validate(self) -> None:
        p = self.penalty
        if not 0 < p.min_factor <= 1:
            raise ValueError(f"POLITENESS_MIN_FACTOR={p.min_factor} must be in (0, 1]")
        for name, value in (
            ("POLITENESS_COOLDOWN", p.cooldown),
            ("POLITENESS_MAX_COOLDOWN", p.max_cooldown),
            ("POLITENESS_RECOVERY", p.recovery),
            ("POLITENESS_STRIKE_WINDOW", p.strike_window),
        ):
            if value < 0:
                raise ValueError(f"{name}={value} must be >= 0")
        if not 0 <= self.jitter < 1:
            raise ValueError(
                f"POLITENESS_JITTER={self.jitter} must be in [0, 1): each request's spacing is "
                "the site's interval times a random factor between 1 - it and 1 + it"
            )
        if "%(site)s" not in self.key_template:
            raise ValueError(f"POLITENESS_KEY={self.key_template!r} must contain %(site)s")

    def rate_for(self, site: str) -> Rate:
        """The rate of ``site`` (``host[:port]``): its own, its host's (any port), or the
        default."""
        return self.sites.get(site) or self.sites.get(_host(site)) or self.default
