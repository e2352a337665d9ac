"""Politeness settings, read once and validated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings

from crawler.politeness.limiter import Penalty, Rate
from crawler.settings_values import (
    get_bool,
    get_dict,
    get_float,
    get_int,
    get_typed_list,
    status_code,
)


def _rate(name: str, value: Any, default_burst: int) -> Rate:
    """A rate is a number (requests/s) or ``{"rate": r, "burst": b}``."""
    try:
        if isinstance(value, Mapping):
            rate = Rate(float(value["rate"]), int(value.get("burst", default_burst)))
        else:
            rate = Rate(float(value), default_burst)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{name}={value!r} is not a rate (a number or {{rate, burst}})") from exc
    if rate.per_second <= 0 or rate.burst < 1:
        raise ValueError(f"{name}={value!r}: rate must be > 0 and burst >= 1")
    return rate


@dataclass(frozen=True, slots=True)
class PolitenessSettings:
    default: Rate
    sites: Mapping[str, Rate]
    penalty: Penalty
    penalty_statuses: frozenset[int]
    key_template: str

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> PolitenessSettings:
        if not get_bool(settings, "POLITENESS_ENABLED"):
            raise NotConfigured
        burst = get_int(settings, "POLITENESS_BURST")
        sites = {
            str(site).lower(): _rate(f"POLITENESS_SITE_RATES[{site!r}]", value, burst)
            for site, value in get_dict(settings, "POLITENESS_SITE_RATES").items()
        }
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
        if "%(site)s" not in self.key_template:
            raise ValueError(f"POLITENESS_KEY={self.key_template!r} must contain %(site)s")

    def rate_for(self, site: str) -> Rate:
        return (
            self.sites.get(site) or self.sites.get(site.split(":", maxsplit=1)[0]) or self.default
        )
