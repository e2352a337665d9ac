"""Per-site rate limiters: Redis-backed for the cluster, in-memory for one process.

Both implement the same algorithm (GCRA with reservations): ``reserve`` books
the site's next slot and returns how long to wait for it (a request leaves its
interval times its ``spread`` before the next slot: ``POLITENESS_JITTER``); ``cooling`` says how
long a cooldown has left (a request that waited checks it before it goes, so a
penalty also holds back slots booked before it); ``penalize`` starts
a shared cooldown (doubling for repeated strikes, at least ``Retry-After``)
and halves the site's rate, which then recovers gradually. The Redis limiter
runs each step as one Lua script on Redis server time: no client clocks, no
locks, no polling. No Scrapy imports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Final, Protocol

from crawler.lua import script_text
from crawler.redis_connection import AsyncRedis


@dataclass(frozen=True, slots=True)
class Rate:
    per_second: float
    burst: int = 1

    @property
    def interval_ms(self) -> float:
        return 1000.0 / self.per_second


@dataclass(frozen=True, slots=True)
class Penalty:
    cooldown: float  # seconds for the first strike
    max_cooldown: float
    min_factor: float  # the rate never drops below this share of the configured rate
    recovery: float  # rate factor regained per second
    strike_window: float  # strikes closer than this double the cooldown


# The limiter's calls that only read (a site's cooldown): ``OutageGuard.run(reads_only=...)``.
READ_ONLY_CALLS: Final = frozenset({"cooling"})


class Limiter(Protocol):
    async def reserve(
        self, site: str, rate: Rate, penalty: Penalty, spread: float = 1.0
    ) -> float: ...

    async def penalize(self, site: str, retry_after: float, penalty: Penalty) -> float: ...

    async def cooling(self, site: str) -> float: ...


class RedisLimiter:
    def __init__(self, client: AsyncRedis, key_template: str) -> None:
        self._key_template = key_template
        self._reserve = client.register_script(script_text("crawler.politeness", "reserve"))
        self._penalize = client.register_script(script_text("crawler.politeness", "penalize"))
        self._cooling = client.register_script(script_text("crawler.politeness", "cooling"))

    def key(self, site: str) -> str:
        return self._key_template % {"site": site}

    async def reserve(self, site: str, rate: Rate, penalty: Penalty, spread: float = 1.0) -> float:
        wait_ms = await self._reserve(
            keys=[self.key(site)], args=[rate.interval_ms, rate.burst, penalty.recovery, spread]
        )
        return int(wait_ms) / 1000.0

    async def penalize(self, site: str, retry_after: float, penalty: Penalty) -> float:
        remaining_ms = await self._penalize(
            keys=[self.key(site)],
            args=[
                penalty.cooldown * 1000,
                retry_after * 1000,
                penalty.max_cooldown * 1000,
                penalty.min_factor,
                penalty.strike_window * 1000,
            ],
        )
        return int(remaining_ms) / 1000.0

    async def cooling(self, site: str) -> float:
        """Seconds left of the site's cooldown (0 when none)."""
        return int(await self._cooling(keys=[self.key(site)], args=[])) / 1000.0


@dataclass
class _SiteState:
    tat: float = 0.0
    factor: float = 1.0
    updated: float = field(default_factory=time.monotonic)
    cooldown: float = 0.0
    strikes: int = 0
    last_strike: float = float("-inf")


class LocalLimiter:
    """The same algorithm in one process (standalone mode, or while Redis is away)."""

    def __init__(self) -> None:
        self._sites: dict[str, _SiteState] = {}

    async def reserve(self, site: str, rate: Rate, penalty: Penalty, spread: float = 1.0) -> float:
        now = time.monotonic()
        state = self._sites.setdefault(site, _SiteState(updated=now))
        if state.factor < 1:
            state.factor = min(1.0, state.factor + (now - state.updated) * penalty.recovery)
        interval = rate.interval_ms / 1000.0 / state.factor
        tau = interval * (rate.burst - 1)
        if state.cooldown > now:
            state.tat = max(state.tat, state.cooldown + tau)
        booked = max(state.tat, now)
        new_tat = booked + interval * spread
        wait = max(0.0, booked - tau - now, state.cooldown - now)
        state.tat, state.updated = new_tat, now
        return wait

    async def penalize(self, site: str, retry_after: float, penalty: Penalty) -> float:
        now = time.monotonic()
        state = self._sites.setdefault(site, _SiteState(updated=now))
        within = now - state.last_strike < penalty.strike_window
        state.strikes = state.strikes + 1 if within else 1
        length = min(penalty.max_cooldown, penalty.cooldown * 2 ** (state.strikes - 1))
        state.cooldown = max(state.cooldown, now + max(length, retry_after))
        state.factor = max(penalty.min_factor, state.factor / 2)
        state.updated, state.last_strike = now, now
        return state.cooldown - now

    async def cooling(self, site: str) -> float:
        state = self._sites.get(site)
        return max(0.0, state.cooldown - time.monotonic()) if state is not None else 0.0
