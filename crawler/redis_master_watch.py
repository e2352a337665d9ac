"""Following a Redis Sentinel failover as the sentinels run it (no Scrapy imports).

redis-py's Sentinel client asks the sentinels for the master only when it opens a connection;
connections already open go on to the old master until they fail. In a planned failover
(``SENTINEL FAILOVER``) the old master answers as a master for about 10 s after the replica
was promoted, until the sentinels make it a replica, and what a node writes there meanwhile is
lost then (the node finds out, ``frontier/writes_lost``, and crawls again what it held).

:func:`follow_master` listens on every sentinel of the URL to the failover of the URL's
service:

- ``+try-failover`` (a failover begins, before any replica is promoted): the pool holds new
  commands (:class:`HoldingPool`); those already sent finish on the old master, which
  passes them to its replica as ever;
- ``+switch-master``: it waits until the sentinels name the new master to a client that asks
  (a sentinel that has not heard yet may answer first, for a second or two), closes the
  pool's idle connections, marks those in use to close once their command is done, and lets
  the held commands go: they connect to the new master;
- ``-failover-abort-*`` or ``+failover-end-for-timeout`` from every sentinel that began one
  (in an unplanned failover several try, and those that lose the election give up while the
  winner goes on), or nothing for ``HOLD_MAX`` seconds: the commands go on, to whichever
  server the sentinels name.

A failover while no sentinel can be heard is followed as redis-py does, when the old master
refuses writes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio
import redis.asyncio.client
import redis.asyncio.sentinel
from redis.exceptions import RedisError

from crawler.redis_url import RedisConfig, Topology

logger = logging.getLogger(__name__)

BEGUN = "+try-failover"
SWITCHED = "+switch-master"
ENDED = ("+failover-end-for-timeout",)
ABORTED = "-failover-abort-*"  # a pattern: every reason a failover is given up for
HOLD_MAX = 10.0  # seconds commands are held at most, whatever the sentinels say
QUIET_PING = 10.0  # seconds without a message before the watch pings its sentinel
PING_ANSWER = 5.0  # seconds a ping's answer may take before the sentinel counts as away
RETRY_DELAY = 1.0  # seconds before a sentinel that could not be heard is tried again
NAMED_POLL = 0.05

Address = tuple[str, int]


@dataclass(frozen=True)
class Switch:
    """A ``+switch-master`` message: ``service`` moved from ``old`` to ``new``."""

    service: str
    old: Address
    new: Address


class HoldingPool(redis.asyncio.sentinel.SentinelConnectionPool):
    """A Sentinel pool whose new commands wait while :func:`follow_master` holds them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self.released = asyncio.Event()
        self.released.set()

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        await self.released.wait()
        return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]


def parsed_switch(data: bytes | str) -> Switch | None:
    """``<service> <old-ip> <old-port> <new-ip> <new-port>``; None for anything else."""
    parts = _text(data).split()
    if len(parts) != 5 or not (parts[2].isdigit() and parts[4].isdigit()):
        return None
    service, old_host, old_port, new_host, new_port = parts
    return Switch(service, (old_host, int(old_port)), (new_host, int(new_port)))


def service_of_event(data: bytes | str) -> str | None:
    """The service an instance event is about: ``master <service> <ip> <port>``, or
    ``<type> <name> <ip> <port> @ <service> <ip> <port>``."""
    parts = _text(data).split()
    if len(parts) >= 2 and parts[0] == "master":
        return parts[1]
    if "@" in parts[:-1]:
        return parts[parts.index("@") + 1]
    return None


def _text(data: bytes | str) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


class FailoverFollower:
    """What one client does with the failover messages of its service."""

    def __init__(self, service: str, pool: HoldingPool, switched: Callable[[Switch], None]):
        self.service = service
        self.pool = pool
        self.switched = switched
        self.moving = asyncio.Lock()
        self.followed: Address | None = None  # the last master moved to (every sentinel says)
        self.hold_ends: asyncio.TimerHandle | None = None
        # sentinels (host:port) that began a failover not yet ended: several may try at once
        # (an unplanned failover), and one that loses the election gives up while another goes on
        self.failing_over: set[str] = set()

    async def heard(self, channel: str, data: bytes | str, sentinel: str = "") -> None:
        """One message of ``sentinel``'s."""
        if channel == SWITCHED:
            if (switch := parsed_switch(data)) and switch.service == self.service:
                await self._move(switch)
        elif service_of_event(data) == self.service:
            if channel == BEGUN:
                self.failing_over.add(sentinel)
                self._hold()
                return
            self.failing_over.discard(sentinel)
            if not self.failing_over and not self.pool.released.is_set():
                logger.warning("Redis Sentinel ended the failover of %r: %s", self.service, channel)
                self.release()

    def _hold(self) -> None:
        if self.pool.released.is_set():
            logger.warning(
                "Redis Sentinel began a failover of %r: Redis commands wait for the new master "
                "(%gs at most)",
                self.service,
                HOLD_MAX,
            )
        self.pool.released.clear()
        if self.hold_ends is not None:
            self.hold_ends.cancel()
        self.hold_ends = asyncio.get_running_loop().call_later(HOLD_MAX, self._held_too_long)

    def _held_too_long(self) -> None:
        logger.warning(
            "Redis Sentinel named no new master of %r within %gs: Redis commands go on",
            self.service,
            HOLD_MAX,
        )
        self.release()

    def release(self) -> None:
        """Let the held commands go (and those to come)."""
        self.failing_over.clear()
        if self.hold_ends is not None:
            self.hold_ends.cancel()
            self.hold_ends = None
        self.pool.released.set()

    async def _move(self, switch: Switch) -> None:
        async with self.moving:
            if self.followed != switch.new and await self._named(switch.new):
                await self.pool.run_proactive_reconnect()
                self.followed = switch.new
                self.switched(switch)
        self.release()

    async def _named(self, new: Address) -> bool:
        """Wait until the sentinels name ``new`` to a client that asks; False when they do
        not before the hold ends."""
        deadline = time.monotonic() + HOLD_MAX
        while True:
            try:
                host, port = await self.pool.sentinel_manager.discover_master(self.service)
                if (str(host), int(port)) == new:
                    return True
            except RedisError as exc:
                logger.debug("Sentinels did not name the master: %s", exc)
            if time.monotonic() >= deadline:
                logger.warning(
                    "A sentinel announced %s:%d as the master of %r, but the sentinels did not "
                    "name it within %gs; connections move when the old master refuses writes",
                    *new,
                    self.service,
                    HOLD_MAX,
                )
                return False
            await asyncio.sleep(NAMED_POLL)


async def follow_master(
    config: RedisConfig, client: redis.asyncio.Redis, switched: Callable[[Switch], None]
) -> None:
    """Hold ``client``'s commands through each failover of ``config.service`` and move its
    connections to the new master, calling ``switched`` once per move; runs until
    cancelled, never raises."""
    if config.topology is not Topology.SENTINEL:
        raise ValueError(f"{config.topology.value} URL: there are no sentinels to listen to")
    pool = client.connection_pool
    if not isinstance(pool, HoldingPool):
        raise TypeError(f"{client!r} is not a client of crawler.redis_connection")
    follower = FailoverFollower(config.service, pool, switched)
    try:
        await asyncio.gather(
            *(
                _listen(host, port, config.sentinel_kwargs(), follower.heard)
                for host, port in config.hosts
            )
        )
    finally:
        follower.release()  # never leave commands held


Heard = Callable[[str, Any, str], Awaitable[None]]  # channel, data, the sentinel's host:port


async def _listen(host: str, port: int, kwargs: dict[str, Any], heard: Heard) -> None:
    """Hear the failover messages of one sentinel, again and again after it goes away."""
    while True:
        sentinel = redis.asyncio.Redis(host=host, port=port, **kwargs)
        try:
            async with sentinel.pubsub() as pubsub:
                await pubsub.subscribe(BEGUN, SWITCHED, *ENDED)
                await pubsub.psubscribe(ABORTED)
                await _messages(pubsub, heard, f"{host}:{port}")
        except (RedisError, OSError) as exc:
            logger.debug("Sentinel %s:%d not heard: %s", host, port, exc)
        finally:
            await sentinel.aclose()
        await asyncio.sleep(RETRY_DELAY)


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
                await heard(_text(message["channel"]), message["data"], sentinel)
        elif not pinged and now - last >= QUIET_PING:
            await pubsub.ping()
            pinged, last = True, now
        elif pinged and now - last >= PING_ANSWER:
            raise redis.exceptions.ConnectionError("no answer to a ping")
