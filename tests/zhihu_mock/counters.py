"""What the mock saw, for tests to assert on."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field


@dataclass
class MockCounters:
    """Thread-safe tallies; read them directly, write them through the methods."""

    requests: Counter[str] = field(default_factory=Counter)  # per endpoint name
    errors: Counter[int] = field(default_factory=Counter)  # per error code answered
    challenges: int = 0  # __zse_ck pages answered
    challenges_solved: int = 0  # distinct __zse_ck values accepted (each a solved page)
    soft_blocks: int = 0  # 302s to /account/unhappy answered
    logins: Counter[str] = field(default_factory=Counter)  # per account
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count_request(self, endpoint: str) -> None:
        with self._lock:
            self.requests[endpoint] += 1

    def count_error(self, code: int) -> None:
        with self._lock:
            self.errors[code] += 1

    def count_challenge(self) -> None:
        with self._lock:
            self.challenges += 1

    def count_soft_block(self) -> None:
        with self._lock:
            self.soft_blocks += 1

    def count_solved_challenge(self) -> None:
        with self._lock:
            self.challenges_solved += 1

    def count_login(self, username: str) -> None:
        with self._lock:
            self.logins[username] += 1
