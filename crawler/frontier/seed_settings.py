"""Seed-reading settings, read once and validated.

A spider's scrapy-redis attributes (or ``-a`` arguments) win over the
settings: ``redis_key`` over ``SEEDS_KEY``, ``redis_batch_size`` over
``SEEDS_BATCH_SIZE``, ``redis_encoding`` over ``REDIS_ENCODING`` and
``max_idle_time`` over ``MAX_IDLE_TIME_BEFORE_CLOSE``.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from scrapy.settings import BaseSettings

from crawler.frontier.keys import FrontierKeys, frontier_parts
from crawler.settings_values import get_bool, get_float, get_int, get_typed_list, text


class SeedSource(StrEnum):
    """The Redis type of the seed key, and the order seeds leave it (seed_take.lua)."""

    LIST = "list"  # from the right: LPUSH order
    SET = "set"  # any member (REDIS_START_URLS_AS_SET)
    ZSET = "zset"  # highest score first (REDIS_START_URLS_AS_ZSET)


def _number(name: str, value: Any, kind: type[int] | type[float]) -> Any:
    try:
        return kind(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name}={value!r} must be {'an integer' if kind is int else 'a number'}"
        ) from exc


@dataclass(frozen=True, slots=True)
class SeedSettings:
    redis_url: str
    seeds_key: str
    invalid_key: str
    frontier: tuple[FrontierKeys, ...]  # every part of the spider's frontier
    source: SeedSource
    batch_size: int
    encoding: str
    max_bytes: int
    wait_timeout: float
    max_idle_time: float
    dont_filter: bool
    allowed_meta: frozenset[str]  # SEEDS_ALLOWED_META: privileged meta keys seeds may set
    hold_timeout: float  # FRONTIER_LEASE_TIMEOUT: taken seeds of a silent node go back after it

    @classmethod
    def from_settings(cls, settings: BaseSettings, spider: Any) -> SeedSettings:
        """``spider``: the spider (its scrapy-redis attributes) or just its name."""
        name = spider if isinstance(spider, str) else spider.name

        def attribute(attr: str) -> Any:
            return None if isinstance(spider, str) else getattr(spider, attr, None)

        seeds_key, invalid_key = seed_key_names(settings, spider)
        batch = attribute("redis_batch_size")
        idle = attribute("max_idle_time")
        values = cls(
            redis_url=settings.get("REDIS_URL") or "",
            seeds_key=seeds_key,
            invalid_key=invalid_key,
            frontier=frontier_parts(name, get_int(settings, "FRONTIER_PARTITIONS") or 1),
            source=seed_source(settings.get("SEEDS_TYPE")),
            batch_size=(
                _number("redis_batch_size", batch, int)
                if batch is not None
                else get_int(settings, "SEEDS_BATCH_SIZE")
            ),
            encoding=str(attribute("redis_encoding") or settings.get("REDIS_ENCODING") or ""),
            max_bytes=get_int(settings, "SEEDS_MAX_BYTES"),
            wait_timeout=get_float(settings, "SEEDS_WAIT_TIMEOUT"),
            max_idle_time=(
                _number("max_idle_time", idle, float)
                if idle is not None
                else get_float(settings, "MAX_IDLE_TIME_BEFORE_CLOSE")
            ),
            dont_filter=get_bool(settings, "SEEDS_DONT_FILTER"),
            allowed_meta=frozenset(get_typed_list(settings, "SEEDS_ALLOWED_META", text, "keys")),
            hold_timeout=get_float(settings, "FRONTIER_LEASE_TIMEOUT"),
        )
        values.validate()
        return values

    def validate(self) -> None:
        if not self.seeds_key.strip():
            raise ValueError(
                "the seed key (SEEDS_KEY, REDIS_START_URLS_KEY or the spider's redis_key) must "
                "not be empty"
            )
        if not self.invalid_key.strip():  # invalid seeds went to a key named ""
            raise ValueError(f"SEEDS_INVALID_KEY={self.invalid_key!r} must not be empty")
        if self.invalid_key == self.seeds_key:  # each would be read again, invalid for ever
            raise ValueError(
                f"SEEDS_INVALID_KEY={self.invalid_key!r} is the seed key: invalid seeds would be "
                "read again as seeds; give it a key of its own"
            )
        if self.batch_size < 1:
            raise ValueError(
                f"SEEDS_BATCH_SIZE (REDIS_START_URLS_BATCH_SIZE, or the spider's "
                f"redis_batch_size)={self.batch_size} must be >= 1"
            )
        if self.max_bytes < 1:
            raise ValueError(f"SEEDS_MAX_BYTES={self.max_bytes} must be >= 1")
        if self.wait_timeout <= 0:
            raise ValueError(f"SEEDS_WAIT_TIMEOUT={self.wait_timeout} must be > 0")
        internal = sorted(key for key in self.allowed_meta if key.startswith("_"))
        if internal:
            raise ValueError(
                f"SEEDS_ALLOWED_META names {', '.join(internal)}: keys starting with '_' are the "
                "frontier's own, and no seed may set them; remove them from the setting"
            )
        if self.max_idle_time < 0:
            raise ValueError(
                f"MAX_IDLE_TIME_BEFORE_CLOSE (or max_idle_time)={self.max_idle_time} "
                "must be >= 0 (0 = never)"
            )
        try:
            codecs.lookup(self.encoding)
        except LookupError as exc:
            raise ValueError(
                f"REDIS_ENCODING (or redis_encoding)={self.encoding!r} is not a known encoding"
            ) from exc


def seed_key_names(settings: Mapping[str, Any], spider: Any) -> tuple[str, str]:
    """The seed key and the invalid-seed key of ``spider`` (a spider, its class or just its
    name): its ``redis_key``, else ``SEEDS_KEY``; ``SEEDS_INVALID_KEY``. The nodes read
    seeds there, and the operator commands count and purge them there."""
    name = spider if isinstance(spider, str) else spider.name
    key = None if isinstance(spider, str) else getattr(spider, "redis_key", None)
    if key is not None and not isinstance(key, str):
        raise ValueError(
            f"redis_key={key!r} must be a string: a spider reads one seed key (push every seed "
            "there, with a priority in JSON seeds or SEEDS_TYPE=zset scores to order them)"
        )
    key_setting = "redis_key" if key is not None else "SEEDS_KEY"
    key_template = str(key if key is not None else settings.get("SEEDS_KEY"))
    return (
        _format_key(key_setting, key_template, name),
        _format_key("SEEDS_INVALID_KEY", str(settings.get("SEEDS_INVALID_KEY")), name),
    )


def _format_key(setting: str, template: str, name: str) -> str:
    try:
        return template % {"name": name}
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(
            f"{setting}={template!r} is invalid: only %(name)s may be used ({exc!r})"
        ) from exc


def seed_source(value: object) -> SeedSource:
    """``SEEDS_TYPE`` read: the seed key's type; a ``ValueError`` names a bad value."""
    try:
        return SeedSource(str(value).strip().lower())
    except ValueError:
        choices = ", ".join(source.value for source in SeedSource)
        raise ValueError(f"SEEDS_TYPE={value!r} must be one of {choices}") from None
