"""Types of the commands' number options: argparse refuses a value out of range (exit 2)."""

from __future__ import annotations

import argparse
import math


def _number(value: str, kind: type[int] | type[float]) -> float:
    try:
        number = kind(value)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{value!r} is not {what}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"{value!r} is not a finite number")
    return number


def seconds(value: str) -> float:
    """A time to wait: more than 0 seconds."""
    number = _number(value, float)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be > 0 (seconds)")
    return number


def seconds_or_never(value: str) -> float:
    """A time, where 0 means never: 0 or more seconds."""
    number = _number(value, float)
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0 (0: never)")
    return number


def count(value: str) -> int:
    """How many: 1 or more."""
    number = int(_number(value, int))
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return number


def count_or_all(value: str) -> int:
    """How many, where 0 means no limit: 0 or more."""
    number = int(_number(value, int))
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0 (0: no limit)")
    return number
