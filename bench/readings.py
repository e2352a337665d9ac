"""What the benchmarks read off a node's log and off Redis."""

from __future__ import annotations

import re

import redis


def stat(log: str, name: str) -> int:
    """The value of stat ``name`` in the last stats dump of a node's log (0 without one)."""
    found = re.findall(rf"'{re.escape(name)}': (\d+)", log)
    return int(found[-1]) if found else 0


def redis_cpu(client: redis.Redis) -> float:
    """CPU seconds Redis's main thread has used, user and system."""
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user_main_thread"]) + float(cpu["used_cpu_sys_main_thread"])
