"""Steps of the machine's wall clock, watched while a test measures rates.

The cluster's rate limiter keeps time by the Redis server's wall clock; a site's server counts
requests by ``time.monotonic()``. A step of the wall clock (an NTP step, a virtual machine
resumed from a snapshot and set right) moves Redis's time and not the site's: the requests
booked before it then go with those booked after. ``ClockWatch`` records such steps so that a
test can tell which seconds of its measurement they touched.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import TracebackType

SAMPLE_EVERY = 0.01  # seconds between two readings of both clocks
STEP = 0.05  # seconds the wall clock must move against the monotonic one to count as a step


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
        offset = time.time() - time.monotonic()
        while not self._stop.wait(SAMPLE_EVERY):
            now = time.monotonic()
            moved = time.time() - now - offset
            if abs(moved) >= STEP:
                self.steps.append((now, moved))
                offset += moved

    def touched_seconds(self, start: float, before: int, after: int) -> set[int]:
        """The whole seconds after ``start`` (a ``time.monotonic()``) from ``before`` seconds
        before each step to ``after`` seconds after it."""
        return {
            int(at - start) + offset
            for at, _moved in self.steps
            for offset in range(-before, after + 1)
        }

    def stepped_between(self, start: float, end: float) -> bool:
        """Whether the wall clock stepped between two ``time.monotonic()`` readings."""
        return any(start <= at <= end for at, _moved in self.steps)
