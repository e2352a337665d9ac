"""Following a Redis Sentinel failover as the sentinels run it (no Scrapy imports).

redis-py's Sentinel client asks the sentinels for the master only when it opens a connection;
connections already open go on to the old master until they fail. In a failover the old master
may answer as a master for many seconds after the replica was promoted: until the sentinels
have reconfigured every other replica (each may need a full sync) and then made the old master a
replica. What a node writes there meanwhile is lost then (the node finds out,
``frontier/writes_lost``, and crawls again what it held).

:class:`FailoverFollower` does what a node's client does with the sentinels' messages about the
URL's service (heard by :func:`crawler.redis_sentinel_listeners.follow_master`):

- ``+try-failover`` (before any replica is promoted): the pool holds new commands
  (:class:`HoldingPool`); those already sent finish on the old master, which passes them to
  its replica as ever;
- ``+promoted-slave`` (the replica answers as the master): the pool's connections go to it at
  once, though the sentinels name it to clients only at ``+switch-master``, and the commands
  go on: idle connections close now, those in use once their command is answered;
- ``+switch-master``: once the sentinels name the new master, connections are again opened to
  whichever master they name (and moved there now, when the promotion was not heard);
- ``-failover-abort-*`` from every sentinel that began a failover (in a failover of a master
  that failed several try, and those that lose the election give up while the winner goes
  on), or nothing for ``HOLD_MAX`` seconds: the commands go on, to whichever server the
  sentinels name.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio
import redis.asyncio.sentinel
from redis.exceptions import RedisError

from crawler.lua import text

logger = logging.getLogger(__name__)

BEGUN, PROMOTED, SWITCHED = "+try-failover", "+promoted-slave", "+switch-master"
ABORTED = "-failover-abort-*"  # a pattern: every reason a failover is given up for
HOLD_MAX = 10.0  # seconds commands are held at most before a promotion, whatever is said
PIN_CHECK = 1.0  # seconds between looks, as connections open, at whether a promoted replica
# the sentinels do not name yet still answers as the master
NAMED_MAX = 30.0  # seconds the watch asks the sentinels whether they name a master one announced
NAMED_POLL = 0.05

Address = tuple[str, int]


@dataclass(frozen=True)
class Switch:
    """A move of ``service``'s master from ``old`` to ``new``."""

    service: str
    old: Address
    new: Address


class HoldingPool(redis.asyncio.sentinel.SentinelConnectionPool):
    """A Sentinel pool whose new commands wait while :func:`follow_master` holds them, and
    whose connections go to a promoted replica the sentinels do not name yet, as long as it
    answers as the master (``ROLE``, looked at every ``PIN_CHECK`` seconds as connections
    open: a failover of it that was not heard ends the pin)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]
        self.released = asyncio.Event()
        self.released.set()
        self.promoted: Address | None = None
        self._role_seen = 0.0

    def pin(self, address: Address) -> None:
        """Open connections to ``address``, a promoted replica, until :meth:`unpin`."""
        self.promoted, self.master_address, self._role_seen = address, address, time.monotonic()

    def unpin(self) -> None:
        self.promoted = None

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        await self.released.wait()
        return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]

    async def get_master_address(self) -> Any:
        if self.promoted is not None and time.monotonic() - self._role_seen > PIN_CHECK:
            if await self._answers_as_master(self.promoted):
                self._role_seen = time.monotonic()
            else:
                self.promoted = None
        if self.promoted is None:
            return await super().get_master_address()  # type: ignore[no-untyped-call]
        if self.master_address != self.promoted:
            self.master_address = self.promoted
            await self.disconnect(inuse_connections=False)
        return self.promoted

    async def _answers_as_master(self, address: Address) -> bool:
        connection = self.connection_class(**self.connection_kwargs)
        assert isinstance(connection, redis.asyncio.sentinel.SentinelManagedConnection)
        try:
            await connection.connect_to(address)  # type: ignore[no-untyped-call]  # not connect(), which asks this pool
            await connection.send_command("ROLE")
            role = await connection.read_response()
        except (RedisError, OSError) as exc:
            logger.debug("The promoted replica %s:%d did not answer: %s", *address, exc)
            return False
        finally:
            await connection.disconnect()
        return text(role[0]) == "master"


def parsed_switch(data: bytes | str) -> Switch | None:
    """``<service> <old-ip> <old-port> <new-ip> <new-port>``; None for anything else."""
    parts = text(data).split()
    if len(parts) != 5 or not (parts[2].isdigit() and parts[4].isdigit()):
        return None
    service, old_host, old_port, new_host, new_port = parts
    return Switch(service, (old_host, int(old_port)), (new_host, int(new_port)))


def service_of_event(data: bytes | str) -> str | None:
    """The service an instance event is about: ``master <service> <ip> <port>``, or
    ``<type> <name> <ip> <port> @ <service> <ip> <port>``."""
    parts = text(data).split()
    if len(parts) >= 2 and parts[0] == "master":
        return parts[1]
    if "@" in parts[:-1]:
        return parts[parts.index("@") + 1]
    return None


def parsed_promotion(data: bytes | str) -> Switch | None:
    """``slave <name> <ip> <port> @ <service> <old-ip> <old-port>``; None for anything else."""
    parts = text(data).split()
    if len(parts) != 8 or parts[4] != "@" or not (parts[3].isdigit() and parts[7].isdigit()):
        return None
    return Switch(parts[5], (parts[6], int(parts[7])), (parts[2], int(parts[3])))


class FailoverFollower:
    """What one client does with the failover messages of its service."""

    def __init__(self, service: str, pool: HoldingPool, switched: Callable[[Switch], None]):
        self.service = service
        self.pool = pool
        self.switched = switched
        self.hold_ends: asyncio.TimerHandle | None = None
        # sentinels (host:port) that began a failover not yet ended or given up
        self.failing_over: set[str] = set()

    async def heard(self, channel: str, data: bytes | str, sentinel: str = "") -> None:
        """One message of ``sentinel``'s."""
        if channel == SWITCHED:
            if (switch := parsed_switch(data)) and switch.service == self.service:
                await self._named(switch)
        elif channel == PROMOTED:
            if (promotion := parsed_promotion(data)) and promotion.service == self.service:
                await self._move(promotion)
                self.release()
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
            "Redis Sentinel promoted no replica of %r within %gs: Redis commands go on",
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
        """Point the connections at ``switch.new``: idle ones close now, those in use once
        their command is answered (once: every sentinel announces a move)."""
        if self.pool.master_address == switch.new:
            return
        self.pool.pin(switch.new)
        await self.pool.run_proactive_reconnect()
        self.switched(switch)

    async def _named(self, switch: Switch) -> None:
        """Once the sentinels name ``switch.new`` to a client that asks, connections open where
        they name again (after a move there now, if the promotion was not heard). A switch to
        another master than the one promoted since (an earlier failover's, announced late)
        changes nothing, and so does one the sentinels do not name within ``NAMED_MAX``:
        connections that went to it at its promotion stay with it while it answers as the
        master."""
        if self.pool.promoted is not None and self.pool.promoted != switch.new:
            return
        if not await self._wait_named(switch.new):
            return  # a late switch (the pool is on a later master), or sentinels that disagree
        await self._move(switch)
        if self.pool.promoted == switch.new:
            self.pool.unpin()
        self.release()

    async def _wait_named(self, new: Address) -> bool:
        deadline = time.monotonic() + NAMED_MAX
        while True:
            try:
                host, port = await self.pool.sentinel_manager.discover_master(self.service)
                if (str(host), int(port)) == new:
                    return True
            except RedisError as exc:
                logger.debug("Sentinels did not name the master: %s", exc)
            if time.monotonic() >= deadline:
                logger.info(
                    "A sentinel announced %s:%d as the master of %r, and the sentinels do not "
                    "all name it after %gs: connections moved to it at its promotion stay "
                    "while it answers as the master",
                    *new,
                    self.service,
                    NAMED_MAX,
                )
                return False
            await asyncio.sleep(NAMED_POLL)
