"""How many accounts of a platform are in which health, for operators (no Scrapy imports).

Reads only the plain fields of the session hashes (``health``, ``cooldown_until``),
never the cookies, so it needs no ``CRAWLER_SESSION_KEY``. Members of the accounts
set whose hash is gone (TTL, invalidate) are not counted, as ``acquire`` drops them.
"""

from __future__ import annotations

from collections import Counter
from typing import TypedDict

from crawler.lua import text
from crawler.redis_connection import SyncRedis, server_time_ms
from crawler.sessions.keys import SessionKeys
from crawler.sessions.models import Health


class SessionCensus(TypedDict):
    platform: str
    accounts: int
    by_health: dict[str, int]  # stored health -> accounts (none left out), ``Health`` order
    resting: int  # risky or banned accounts still in their cooldown


def count_sessions(client: SyncRedis, keys: SessionKeys) -> SessionCensus:
    members = client.zrange(keys.accounts, 0, -1)
    accounts = [text(member) for member in members if isinstance(member, bytes | str)]
    now_ms = server_time_ms(client, keys.accounts)
    with client.pipeline(transaction=False) as pipe:
        for account in accounts:
            pipe.hmget(keys.session(account), "health", "cooldown_until")
        rows = pipe.execute()
    healths: Counter[str] = Counter()
    resting = 0
    for health, cooldown_until in rows:
        if health is None:
            continue
        healths[text(health)] += 1
        resting += float(cooldown_until or 0) > now_ms
    known = [health.value for health in Health]
    names = [*known, *sorted(set(healths) - set(known))]
    return SessionCensus(
        platform=keys.platform,
        accounts=sum(healths.values()),
        by_health={name: healths[name] for name in names if healths[name]},
        resting=resting,
    )
