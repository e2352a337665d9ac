"""Steps of Redis's clock, as one node sees them (no Scrapy imports).

Leases, rate limits, cooldowns and session times all run on Redis server time. A step of that
clock (an NTP step, a virtual machine resumed from a snapshot and set right) moves them all at
once: a step ahead may make leases look expired early (another node then reclaims them: their
pages are crawled twice; ``heartbeat.lua`` keeps a node whose own beat came late from reclaiming)
and lets requests booked before it go with those booked after; a step back holds them.
``ClockWatch`` compares how far Redis's clock moved between two readings with how far the
node's monotonic clock did; ``watch`` is the node's loop (``NodeContext`` runs it) that reads
the clock of every master now and then (on a Redis Cluster each master keeps its own, and the
parts and sites it holds run on it) and says a step in a WARNING. A node's own pause looks the
same from the node: Redis's time ran on while its leases were not extended. A master that
appears (a failover, a resharding) starts a watch of its own; a Sentinel failover to a master
whose clock differs shows as a step (the leases then run on it too).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

from redis.exceptions import ResponseError

from crawler.redis_outage import REDIS_FAILURES, outage_reason

logger = logging.getLogger(__name__)

LOOK_EVERY: Final = 10.0  # seconds between two readings of Redis's clock
STEP: Final = 1.0  # seconds the two clocks must part (beyond the readings' round trips) to tell
READ_TIMEOUT: Final = 5.0  # seconds a master's reading may take before it is left out

Direction = Literal["ahead", "back"]


@dataclass(frozen=True, slots=True)
class Step:
    seconds: float  # how far Redis's clock moved against the node's (negative: back)
    over: float  # seconds of the node's clock between the two readings
    server: str = ""  # the master whose clock it is, on a Redis Cluster (``host:port``)

    @property
    def direction(self) -> Direction:
        return "ahead" if self.seconds > 0 else "back"


class ClockWatch:
    """Readings of Redis's clock (ms), each with the node's monotonic clock before and after it."""

    def __init__(self, server: str = "") -> None:
        self.server = server
        self._last: tuple[float, float, int] | None = None

    def reading(self, before: float, after: float, redis_ms: int) -> Step | None:
        """Record one reading; the step since the last one, if the clocks parted by more than
        ``STEP`` beyond what the two round trips leave unknown."""
        last, self._last = self._last, (before, after, redis_ms)
        if last is None:
            return None
        last_before, last_after, last_ms = last
        redis_moved = (redis_ms - last_ms) / 1000
        # Redis read its clock somewhere within each round trip
        least, most = before - last_after, after - last_before
        if redis_moved > most + STEP:
            return Step(redis_moved - most, after - last_after, self.server)
        if redis_moved < least - STEP:
            return Step(redis_moved - least, after - last_after, self.server)
        return None


async def watch(
    read_ms: Callable[[], Awaitable[Mapping[str, int]]],
    stepped: Callable[[Step], None],
    *,
    every: float = LOOK_EVERY,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Read the clocks of Redis's masters (``read_ms``: master -> ms) every ``every`` seconds,
    for ever; ``stepped`` hears of each step. Each reading is one call, timed alone and given
    ``every`` seconds at most: one that meets an outage or any error but a refusal is left out
    (the next is compared with the last that answered; retries would widen the bounds by the
    outage and hide a step), one Redis refuses (an ACL without ``TIME``) ends the watch, said."""
    clocks: dict[str, ClockWatch] = {}
    while True:
        before = monotonic()
        try:
            readings = await asyncio.wait_for(read_ms(), timeout=every or None)
        except (TimeoutError, *REDIS_FAILURES, OSError) as exc:
            if isinstance(exc, ResponseError) and outage_reason(exc) is None:
                logger.warning(
                    "Cannot read Redis's clock (%s): this node does not watch it for steps", exc
                )
                return
        else:
            after = monotonic()
            for server, redis_ms in readings.items():
                clock = clocks.setdefault(server, ClockWatch(server))
                if (step := clock.reading(before, after, redis_ms)) is not None:
                    stepped(step)
        await asyncio.sleep(every)


def step_message(step: Step) -> str:
    """The WARNING of a step."""
    if step.direction == "ahead":
        effect = (
            "leases may have looked expired early (another node then reclaims them: pages "
            "crawled twice) and requests booked at a site before it went with those after"
        )
    else:
        effect = "leases, rate limits and cooldowns hold that much longer"
    whose = f"The clock of Redis master {step.server}" if step.server else "Redis's clock"
    return (
        f"{whose} moved {abs(step.seconds):.1f}s {step.direction} of this node's in "
        f"{step.over:.0f}s (a step of the Redis host's clock, or this node's machine paused): "
        f"leases, rate limits, cooldowns and sessions run on it; {effect} "
        f"(redis/clock_step/{step.direction})"
    )
