"""The node-local cache of fingerprints already handed to the shared dupefilter."""

from __future__ import annotations

import pytest

from crawler.frontier.seen_cache import SeenCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_remembers_what_it_was_given() -> None:
    cache = SeenCache(10)
    cache.add("a")
    assert "a" in cache
    assert "b" not in cache


def test_memory_is_bounded_and_the_oldest_generation_goes_first() -> None:
    cache = SeenCache(4)
    for fingerprint in "abcdef":
        cache.add(fingerprint)
    assert len(cache) <= 4
    assert "a" not in cache
    assert "b" not in cache
    assert {"c", "d", "e", "f"} <= {f for f in "abcdef" if f in cache}


def test_size_zero_disables_it() -> None:
    cache = SeenCache(0)
    cache.add("a")
    assert "a" not in cache
    assert len(cache) == 0


def test_no_entry_outlives_the_ttl() -> None:
    clock = Clock()
    cache = SeenCache(100, ttl=10.0, clock=clock)
    cache.add("early")
    clock.now += 6  # past half the TTL: "early" moves to the older generation
    cache.add("later")
    assert "early" in cache
    clock.now += 4.5  # "early" is 10.5 s old
    assert "early" not in cache
    assert "later" in cache
    clock.now += 6  # "later" is 10.5 s old
    assert "later" not in cache


def test_an_idle_cache_forgets_after_the_ttl() -> None:
    clock = Clock()
    cache = SeenCache(100, ttl=10.0, clock=clock)
    cache.add("a")
    clock.now += 100
    assert "a" not in cache


@pytest.mark.parametrize(("size", "ttl"), [(-1, 0.0), (10, -1.0)])
def test_rejects_negative_settings(size: int, ttl: float) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        SeenCache(size, ttl=ttl)
