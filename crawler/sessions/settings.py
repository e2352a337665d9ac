"""Session settings, read once from any mapping (Scrapy settings or the CLI's) and validated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from crawler.settings_values import float_value, int_value


@dataclass(frozen=True, slots=True)
class SessionSettings:
    ttl: float = 86400.0  # SESSIONS_TTL: seconds a stored session lives
    max_per_minute: int = 0  # SESSIONS_MAX_PER_MINUTE: requests per account per minute, 0 = any
    max_strikes: int = 3  # SESSIONS_MAX_STRIKES: strikes before retirement
    cooldown: float = 600.0  # SESSIONS_COOLDOWN: default rest after risky/banned, seconds
    login_lease: float = 30.0  # SESSIONS_LOGIN_LEASE: login lease, renewed while a login runs
    login_timeout: float = 120.0  # SESSIONS_LOGIN_TIMEOUT: how long other nodes wait
    key_prefix: str = "sessions"  # SESSIONS_KEY_PREFIX

    def __post_init__(self) -> None:
        for name, value, low, inclusive in (
            ("SESSIONS_TTL", self.ttl, 0, False),
            ("SESSIONS_MAX_PER_MINUTE", self.max_per_minute, 0, True),
            ("SESSIONS_MAX_STRIKES", self.max_strikes, 1, True),
            ("SESSIONS_COOLDOWN", self.cooldown, 0, True),
            ("SESSIONS_LOGIN_LEASE", self.login_lease, 0, False),
            ("SESSIONS_LOGIN_TIMEOUT", self.login_timeout, 0, False),
        ):
            if value < low or (value == low and not inclusive):
                raise ValueError(f"{name}={value!r} must be {'>=' if inclusive else '>'} {low}")
        if not self.key_prefix or "{" in self.key_prefix or "}" in self.key_prefix:
            raise ValueError(
                f"SESSIONS_KEY_PREFIX={self.key_prefix!r} must be non-empty, without braces"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> SessionSettings:
        """Read ``SESSIONS_*`` from ``values`` (missing ones keep their defaults)."""
        kwargs: dict[str, Any] = {}
        for spec in fields(cls):
            name = f"SESSIONS_{spec.name.upper()}"
            raw = values.get(name)
            if raw is None:
                continue
            kwargs[spec.name] = {"float": float_value, "int": int_value, "str": _text}[
                str(spec.type)
            ](name, raw)
        return cls(**kwargs)


def _text(_name: str, raw: Any) -> str:
    return str(raw)
