"""Redis clients from one URL (``crawler.redis_url``): a server, TLS, Sentinel or Cluster (no
Scrapy imports). Every component that talks to Redis gets its client here."""

from __future__ import annotations

import asyncio
from typing import Any, TypeAlias

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

from crawler.redis_master_watch import HoldingPool
from crawler.redis_url import RedisConfig, Topology

AsyncRedis: TypeAlias = redis.asyncio.Redis | redis.asyncio.RedisCluster
SyncRedis: TypeAlias = redis.Redis | redis.RedisCluster


def _config(
    url: str | RedisConfig, socket_timeout: float | None, socket_connect_timeout: float | None
) -> RedisConfig:
    config = url if isinstance(url, RedisConfig) else RedisConfig.from_url(url)
    return config.with_timeouts(socket_timeout, socket_connect_timeout)


# -- asyncio ----------------------------------------------------------------------------------


class _SentinelPool(HoldingPool):
    """Closes the client's sentinel connections with the client (redis-py leaves them open);
    holds new commands through a failover
    (:func:`crawler.redis_sentinel_listeners.follow_master`)."""

    async def aclose(self) -> None:
        await super().aclose()
        await self.sentinel_manager.aclose()


class _BlockingSentinelPool(_SentinelPool, redis.asyncio.BlockingConnectionPool):
    """A Sentinel pool whose commands wait for a free connection once ``max_connections``
    are in use."""


class _ClusterClient(redis.asyncio.RedisCluster):
    """redis-py's asyncio cluster client, safe to use concurrently from the start, with an
    optional cap on the commands running at once.

    With redis-py 8.1, commands issued concurrently before the lazy first topology fetch
    fail now and then (a connection is closed under a command: ``AttributeError`` on its
    writer); this client fetches the topology before its first command. With ``limit``,
    more commands wait for one to finish (redis-py's cluster client opens a connection per
    concurrent command and raises instead of waiting at its limit).
    """

    def __init__(self, limit: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._running = asyncio.Semaphore(limit) if limit is not None else None

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        await self.initialize()  # once; a no-op while the topology is known
        if self._running is None:
            return await super().execute_command(*args, **kwargs)
        async with self._running:
            return await super().execute_command(*args, **kwargs)


def async_client(
    url: str | RedisConfig,
    *,
    max_connections: int | None = None,
    socket_timeout: float | None = None,
    socket_connect_timeout: float | None = None,
) -> AsyncRedis:
    """An asyncio client for ``url``; with ``max_connections``, more commands wait.

    The timeouts given here override those of the URL.
    """
    config = _config(url, socket_timeout, socket_connect_timeout)
    if max_connections is not None and max_connections < 1:
        raise ValueError(f"max_connections={max_connections} must be >= 1")
    kwargs = config.connection_kwargs()
    cap: dict[str, Any] = (
        {} if max_connections is None else {"max_connections": max_connections, "timeout": None}
    )
    if config.topology is Topology.CLUSTER:
        kwargs["ssl"] = config.tls is not None
        nodes = [redis.asyncio.cluster.ClusterNode(host, port) for host, port in config.hosts]
        return _ClusterClient(max_connections, startup_nodes=nodes, **kwargs)
    if config.topology is Topology.SENTINEL:
        kwargs["ssl"] = config.tls is not None
        sentinel = redis.asyncio.sentinel.Sentinel(
            list(config.hosts), sentinel_kwargs=config.sentinel_kwargs()
        )
        pool_class = _SentinelPool if max_connections is None else _BlockingSentinelPool
        client: redis.asyncio.Redis = sentinel.master_for(
            config.service, connection_pool_class=pool_class, **kwargs, **cap
        )
        return client
    host, port = config.hosts[0]
    connection_class: type[redis.asyncio.Connection] = (
        redis.asyncio.Connection if config.tls is None else redis.asyncio.SSLConnection
    )
    pool_type = redis.asyncio.ConnectionPool if not cap else redis.asyncio.BlockingConnectionPool
    pool = pool_type(connection_class=connection_class, host=host, port=port, **kwargs, **cap)
    return redis.asyncio.Redis.from_pool(pool)


# -- synchronous (CLI, tools) -----------------------------------------------------------------


class _SyncSentinelPool(redis.sentinel.SentinelConnectionPool):
    """Closes the client's sentinel connections with the client (redis-py leaves them open)."""

    def close(self) -> None:
        super().close()
        self.sentinel_manager.close()


def sync_client(
    url: str | RedisConfig,
    *,
    socket_timeout: float | None = None,
    socket_connect_timeout: float | None = None,
    retries: int | None = None,
) -> SyncRedis:
    """A synchronous client for ``url``; the timeouts given here override those of the URL.
    ``retries``: how often a command that met a connection error or timeout is sent again, at
    once (None: redis-py's default, 10 with a growing backoff: a Redis that does not answer
    holds each command for minutes)."""
    config = _config(url, socket_timeout, socket_connect_timeout)
    kwargs: dict[str, Any] = {**config.connection_kwargs(), "ssl": config.tls is not None}
    if retries is not None:
        kwargs["retry"] = Retry(NoBackoff(), retries)
    if config.topology is Topology.CLUSTER:
        nodes = [
            redis.cluster.ClusterNode(host, port)  # type: ignore[no-untyped-call]
            for host, port in config.hosts
        ]
        return redis.RedisCluster(startup_nodes=nodes, **kwargs)
    if config.topology is Topology.SENTINEL:
        sentinel = redis.sentinel.Sentinel(
            list(config.hosts), sentinel_kwargs=config.sentinel_kwargs()
        )
        client: redis.Redis = sentinel.master_for(
            config.service, connection_pool_class=_SyncSentinelPool, **kwargs
        )
        return client
    host, port = config.hosts[0]
    return redis.Redis(host=host, port=port, **kwargs)


# TIME of the server that holds KEYS[1]: on a cluster, TIME alone has no key and so no node.
_SERVER_TIME_SCRIPT = "return redis.call('TIME')"


def _milliseconds(reply: Any) -> int:
    """A ``TIME`` reply (seconds, microseconds) as epoch milliseconds."""
    seconds, micros = reply
    return int(seconds) * 1000 + int(micros) // 1000


def server_time_ms(client: SyncRedis, key: str) -> int:
    """Redis server time (epoch milliseconds) of the server that holds ``key``."""
    return _milliseconds(client.eval(_SERVER_TIME_SCRIPT, 1, key))


async def time_ms(client: AsyncRedis) -> int:
    """Redis server time (epoch milliseconds), by ``TIME`` (on a cluster: redis-py's default
    node)."""
    return _milliseconds(await client.time())


async def masters_time_ms(client: AsyncRedis, timeout: float | None = None) -> dict[str, int]:
    """The server time (epoch milliseconds) of each master, read at once: on a cluster by its
    name (``host:port``; each keeps its own clock, and the keys it holds run on it) and of the
    masters that answered, each within ``timeout`` seconds (the first error is raised when none
    did), else under ``""``."""
    if not isinstance(client, redis.asyncio.RedisCluster):
        return {"": await asyncio.wait_for(time_ms(client), timeout)}
    await client.initialize()
    masters = client.get_primaries()
    replies = await asyncio.gather(
        *(
            asyncio.wait_for(client.execute_command("TIME", target_nodes=master), timeout)
            for master in masters
        ),
        return_exceptions=True,
    )
    answered = {
        master.name: _milliseconds(reply)
        for master, reply in zip(masters, replies, strict=True)
        if not isinstance(reply, BaseException)
    }
    if not answered:
        raise next(reply for reply in replies if isinstance(reply, BaseException))
    return answered
