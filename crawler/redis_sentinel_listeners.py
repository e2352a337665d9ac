"""Hearing the sentinels' failover messages (no Scrapy imports).

A failover is run, and announced, by one sentinel alone, so :func:`follow_master` listens to
every sentinel of the URL and to the other sentinels they know of (``SENTINEL SENTINELS``,
looked up every ``SENTINELS_LOOK`` seconds), and passes what they say about the URL's service to
a :class:`crawler.redis_master_watch.FailoverFollower`. A sentinel that cannot be heard
(unreachable, or an ACL user without access to its channels) is said once in a WARNING; a
failover it runs is then followed as redis-py does, when the old master refuses writes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio
import redis.asyncio.client
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from crawler.lua import text
from crawler.redis_master_watch import (
    ABORTED,
    BEGUN,
    PROMOTED,
    SWITCHED,
    Address,
    FailoverFollower,
    HoldingPool,
    Switch,
)
from crawler.redis_url import RedisConfig, Topology

logger = logging.getLogger(__name__)

SENTINELS_LOOK = 30.0  # seconds between looks for sentinels the URL does not name
QUIET_PING = 10.0  # seconds without a message before the watch pings its sentinel
PING_ANSWER = 5.0  # seconds a ping's answer may take before the sentinel counts as away
RETRY_MAX = 30.0  # seconds at most between tries of a sentinel that could not be heard

Heard = Callable[[str, Any, str], Awaitable[None]]  # channel, data, the sentinel's host:port


async def follow_master(
    config: RedisConfig,
    client: redis.asyncio.Redis,
    switched: Callable[[Switch], None],
    unheard: Callable[[str], None] = lambda _: None,
) -> None:
    """Hold ``client``'s commands through each failover of ``config.service`` and move its
    connections to the new master, calling ``switched`` once per move and ``unheard`` with a
    sentinel (``host:port``) that cannot be heard; runs until cancelled, never raises."""
    if config.topology is not Topology.SENTINEL:
        raise ValueError(f"{config.topology.value} URL: there are no sentinels to listen to")
    pool = client.connection_pool
    if not isinstance(pool, HoldingPool):
        raise TypeError(f"{client!r} is not a client of crawler.redis_connection")
    follower = FailoverFollower(config.service, pool, switched)
    listeners: dict[Address, asyncio.Task[None]] = {}

    def listen(addresses: list[Address]) -> None:
        for address in addresses:
            if address not in listeners:
                listening = _listen(address, config.sentinel_kwargs(), follower.heard, unheard)
                listeners[address] = asyncio.ensure_future(listening)

    try:
        listen(list(config.hosts))
        while True:
            listen(await _sentinels_known(pool, config.service))
            await asyncio.sleep(SENTINELS_LOOK)
    finally:
        for task in listeners.values():
            task.cancel()
        await asyncio.gather(*listeners.values(), return_exceptions=True)
        follower.release()  # never leave commands held


async def _sentinels_known(pool: HoldingPool, service: str) -> list[Address]:
    """The sentinels that the URL's sentinels know monitor ``service`` too."""
    known: list[Address] = []
    for sentinel in pool.sentinel_manager.sentinels:
        try:
            entries = await sentinel.sentinel_sentinels(service)
        except RedisError as exc:
            logger.debug("Sentinel %r did not list its peers: %s", sentinel, exc)
            continue
        known.extend((str(entry["ip"]), int(entry["port"])) for entry in entries)
    return known


async def _listen(
    address: Address, kwargs: dict[str, Any], heard: Heard, unheard: Callable[[str], None]
) -> None:
    """Hear the failover messages of one sentinel, again and again after it goes away."""
    host, port = address
    name, delay, said = f"{host}:{port}", 1.0, False
    while True:
        # no retries of redis-py's own (seconds of backoff before a failure is seen)
        sentinel = redis.asyncio.Redis(host=host, port=port, retry=Retry(NoBackoff(), 0), **kwargs)
        try:
            async with sentinel.pubsub() as pubsub:
                await pubsub.subscribe(BEGUN, PROMOTED, SWITCHED)
                await pubsub.psubscribe(ABORTED)
                if said:
                    logger.info("Sentinel %s is heard again", name)
                said, delay = False, 1.0
                await _messages(pubsub, heard, name)
        except (RedisError, OSError) as exc:
            if not said:
                unheard(name)
                logger.warning(
                    "Sentinel %s cannot be heard (%s): a failover it runs is followed only once "
                    "the old master refuses writes, and writes of its last seconds may be lost "
                    "(a sentinel ACL user needs its channels: &* or allchannels)",
                    name,
                    exc,
                )
            said = True
        finally:
            await sentinel.aclose()
        await asyncio.sleep(delay)
        delay = min(RETRY_MAX, delay * 2)


async def _messages(pubsub: redis.asyncio.client.PubSub, heard: Heard, sentinel: str) -> None:
    """Pass each message on; ping after ``QUIET_PING`` of silence and return (to subscribe
    again) when nothing at all came back within ``PING_ANSWER`` after it."""
    last = time.monotonic()
    pinged = False
    while True:
        message = await pubsub.get_message(timeout=1.0)
        now = time.monotonic()
        if message is not None:
            last, pinged = now, False
            if message["type"] in ("message", "pmessage"):
                await heard(text(message["channel"]), message["data"], sentinel)
        elif not pinged and now - last >= QUIET_PING:
            await pubsub.ping()
            pinged, last = True, now
        elif pinged and now - last >= PING_ANSWER:
            raise redis.exceptions.ConnectionError("no answer to a ping")
