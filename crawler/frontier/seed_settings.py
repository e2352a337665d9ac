"""Seed-reading settings, read once and validated."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from crawler.frontier.keys import FrontierKeys


@dataclass(frozen=True, slots=True)
class SeedSettings:
    redis_url: str
    seeds_key: str
    invalid_key: str
    frontier: FrontierKeys
    batch_size: int
    max_bytes: int
    wait_timeout: float
    max_idle_time: float

    @classmethod
    def from_settings(cls, settings: BaseSettings, spider_name: str) -> SeedSettings:
        values = cls(
            redis_url=settings.get("REDIS_URL") or "",
            seeds_key=settings.get("SEEDS_KEY") % {"name": spider_name},
            invalid_key=settings.get("SEEDS_INVALID_KEY") % {"name": spider_name},
            frontier=FrontierKeys.for_spider(spider_name),
            batch_size=settings.getint("SEEDS_BATCH_SIZE"),
            max_bytes=settings.getint("SEEDS_MAX_BYTES"),
            wait_timeout=settings.getfloat("SEEDS_WAIT_TIMEOUT"),
            max_idle_time=settings.getfloat("MAX_IDLE_TIME_BEFORE_CLOSE"),
        )
        values.validate()
        return values

    def validate(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"SEEDS_BATCH_SIZE={self.batch_size} must be >= 1")
        if self.max_bytes < 1:
            raise ValueError(f"SEEDS_MAX_BYTES={self.max_bytes} must be >= 1")
        if self.wait_timeout <= 0:
            raise ValueError(f"SEEDS_WAIT_TIMEOUT={self.wait_timeout} must be > 0")
        if self.max_idle_time < 0:
            raise ValueError(
                f"MAX_IDLE_TIME_BEFORE_CLOSE={self.max_idle_time} must be >= 0 (0 = never)"
            )
