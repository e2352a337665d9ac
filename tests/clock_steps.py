"""Steps of the machine's wall clock, watched while a test measures rates.

The cluster's rate limiter keeps time by the Redis server's wall clock; a site's server counts
requests by ``time.monotonic()``. A step of the wall clock (an NTP step, a virtual machine
resumed from a snapshot and set right) moves Redis's time and not the site's: the requests
booked before it then go with those booked after. ``ClockWatch`` records such steps so that a
test can tell which seconds of its measurement they touched.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType

SAMPLE_EVERY = 0.01  # seconds between two readings of both clocks
STEP = 0.05  # seconds the wall clock must move against the monotonic one to count as a step
TIGHT = 0.002  # seconds one reading of both clocks may take (a longer one is left out)


@dataclass
class ClockWatch:
    """Used as a context manager: ``steps`` holds ``(time.monotonic(), seconds)`` of each step
    seen meanwhile (positive: the wall clock jumped ahead)."""

    steps: list[tuple[float, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> ClockWatch:
        self._thread = threading.Thread(target=self._watch, name="clock-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _watch(self) -> None:
        offset: float | None = None
        while not self._stop.wait(SAMPLE_EVERY):
            first = time.monotonic()
            wall = time.time()
            last = time.monotonic()
            if last - first > TIGHT:
                continue  # the thread was held between its readings: no reading
            if offset is None:
                offset = wall - first
                continue
            moved = wall - first - offset
            if abs(moved) >= STEP:
                self.steps.append((first, moved))
                offset += moved

    def touched_seconds(self, start: float, before: int, after: int) -> set[int]:
        """The whole seconds after ``start`` (a ``time.monotonic()``) from ``before`` seconds
        before each step to ``after`` seconds after it, and as many more as a step back took
        away (Redis's time then waits that long)."""
        return {
            int(at - start) + offset
            for at, moved in self.steps
            for offset in range(-before, after + math.ceil(max(0.0, -moved)) + 1)
        }

    def steady_between(self, start: float, end: float, what: str) -> bool:
        """Whether the wall clock took no step ahead between two ``time.monotonic()`` readings
        (a step ahead cuts short what runs on Redis's clock); if it did, says that ``what`` is
        not checked."""
        ahead = [(at, moved) for at, moved in self.steps if start <= at <= end and moved > 0]
        if ahead:
            print(f"{what} is not checked: the wall clock stepped {ahead}")
        return not ahead
