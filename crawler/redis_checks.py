"""What is wrong with a Redis URL, found before a node or a command uses it (no Scrapy imports).

A URL of another topology than the server's (a Cluster URL for a lone server, one server of a
Cluster, a Sentinel's port or a replica given as a server), credentials the server refuses, a
database the server does not have (``/99`` of a server of 16), or a master name the Sentinel
does not monitor would fail every command for as long as the node ran, and the
outage policy, which waits for a server that does not answer, would wait for ever for one that
answers "no". Such a URL is refused at start, naming ``REDIS_URL`` and what to give instead. A
server that does not answer is no such problem: the outage policy takes it from there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import redis
from redis.exceptions import AuthenticationError, AuthorizationError, RedisError, ResponseError

from crawler.redis_connection import sync_client
from crawler.redis_url import RedisConfig, Topology

CREDENTIALS_REFUSED = (AuthenticationError, AuthorizationError)


def topology_problem(config: RedisConfig, timeout: float = 2.0) -> str | None:
    """What is wrong with ``config`` (see the module), or None. ``INFO`` (and on a Cluster
    node ``CLUSTER SLOTS``) to the first host, over TLS for ``rediss``; with Sentinel,
    ``SENTINEL MASTERS`` to the first sentinel and ``INFO`` to the master it names."""
    if config.topology is Topology.SENTINEL:
        return _sentinel_problem(config, timeout)
    reached = _reached(config, config.hosts[0], timeout)
    if not isinstance(reached, tuple):
        return reached  # what is wrong, or None: no answer
    return _topology_mismatch(config, *reached)


def _reached(
    config: RedisConfig, host: tuple[str, int], timeout: float
) -> tuple[dict[str, Any], int] | str | None:
    """``_server_info`` of ``host``; or what is wrong: its credentials refused; None: no
    answer (the outage policy's)."""
    try:
        info, masters = _server_info(_first(config, host), timeout)
        if config.db and _plain_server(info) and (missing := _no_database(config, host, timeout)):
            return missing
    except CREDENTIALS_REFUSED as exc:
        return _credentials_refused(config, host, exc)
    except RedisError:
        return None
    return info, masters


def _plain_server(info: dict[str, Any]) -> bool:
    """Neither a Sentinel nor a Cluster node (those have database 0 only: said otherwise)."""
    enabled = info.get("cluster_enabled")
    return info.get("redis_mode") != "sentinel" and not (enabled and int(enabled))


def _no_database(config: RedisConfig, host: tuple[str, int], timeout: float) -> str | None:
    """What is wrong when the server has no database ``config.db`` (``/99`` of a server of
    16: every command would fail), else None."""
    client = sync_client(
        replace(_first(config, host), db=config.db),
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
    )
    try:
        client.ping()
    except ResponseError as exc:
        if "DB index" not in str(exc):
            return None
        return (
            f"REDIS_URL={config.display} names database {config.db}, which the server at "
            f"{host[0]}:{host[1]} does not have ({exc}): give one from 0 to its `databases` "
            "setting less one (16 by default)"
        )
    finally:
        client.close()
    return None


def _topology_mismatch(config: RedisConfig, info: dict[str, Any], masters: int) -> str | None:
    if info.get("redis_mode") == "sentinel":
        return (
            f"REDIS_URL={config.display} names one server, but the server there is a Redis "
            "Sentinel, which holds no data: give its master's name as "
            "redis+sentinel://host:port/<master name>/<db>"
        )
    enabled = info.get("cluster_enabled")  # None: INFO without its cluster section
    if config.topology is Topology.CLUSTER and enabled is not None and not int(enabled):
        return (
            f"REDIS_URL={config.display} names a Redis Cluster, but the server there is not "
            "one (cluster mode is not enabled): give a lone server as redis://host:port/db"
        )
    if config.topology is Topology.SERVER and masters > 1:
        return (
            f"REDIS_URL={config.display} names one server, but it is a node of a Redis Cluster "
            f"of {masters} masters, each holding some keys (the others answer MOVED): give the "
            "cluster as redis+cluster://host:port[,host:port...]"
        )
    if config.topology is Topology.SERVER and info.get("role") in ("slave", "replica"):
        return (
            f"REDIS_URL={config.display} names one server, but the server there is a replica "
            f"of {info.get('master_host')}:{info.get('master_port')}, which refuses writes and "
            "holds its master's copy: give the master as redis://host:port/db, or the "
            "Sentinel that follows its failovers as redis+sentinel://host:port/<master name>/<db>"
        )
    return None


def _first(config: RedisConfig, host: tuple[str, int]) -> RedisConfig:
    """``host`` alone, as one server (a Cluster URL's host may not be a Cluster's node)."""
    return replace(config, topology=Topology.SERVER, hosts=(host,), db=0)


def _server_info(config: RedisConfig, timeout: float) -> tuple[dict[str, Any], int]:
    """The server's ``INFO`` and, on a Cluster node, how many masters hold its slots."""
    client = sync_client(config, socket_timeout=timeout, socket_connect_timeout=timeout)
    assert isinstance(client, redis.Redis)  # one server's client
    try:
        info: dict[str, Any] = client.info()
        enabled = info.get("cluster_enabled")
        # one master holding every slot (a single-shard managed cluster) serves redis:// too
        slots = client.cluster("SLOTS") if enabled and int(enabled) else []
        return info, len({tuple(slot[2][:2]) for slot in slots})
    finally:
        client.close()


def _sentinel_problem(config: RedisConfig, timeout: float) -> str | None:
    monitored = _monitored(config, timeout)
    if not isinstance(monitored, dict):
        return monitored  # what is wrong, or None: no answer
    host, port = config.hosts[0]
    if config.service not in monitored:
        names = ", ".join(sorted(monitored)) or "none"
        return (
            f"REDIS_URL={config.display} names the master {config.service!r}, which the "
            f"Sentinel at {host}:{port} does not monitor (it monitors: {names}): give one of "
            "those as redis+sentinel://host:port/<master name>/<db>"
        )
    master = monitored[config.service]
    reached = _reached(config, (str(master["ip"]), int(master["port"])), timeout)
    return reached if isinstance(reached, str) else None


def _monitored(config: RedisConfig, timeout: float) -> dict[str, Any] | str | None:
    """The masters the first sentinel monitors, by name; or what is wrong; None: no answer."""
    host, port = config.hosts[0]
    kwargs = {**config.sentinel_kwargs(), "socket_timeout": timeout}
    sentinel = redis.Redis(host=host, port=port, **{**kwargs, "socket_connect_timeout": timeout})
    try:
        monitored = sentinel.sentinel_masters()
    except CREDENTIALS_REFUSED as exc:
        return (
            f"REDIS_URL={config.display}: the Sentinel at {host}:{port} refused the URL's "
            f"sentinel credentials ({type(exc).__name__}): give them as the URL's "
            "sentinel_username and sentinel_password options"
        )
    except ResponseError:  # no SENTINEL command: a data server
        return (
            f"REDIS_URL={config.display} names a Sentinel, but the server at {host}:{port} is "
            "not one: give a lone server as redis://host:port/db"
        )
    except RedisError:
        return None
    finally:
        sentinel.close()
    assert isinstance(monitored, dict)
    return monitored


def _credentials_refused(config: RedisConfig, host: tuple[str, int], exc: Exception) -> str:
    given = [
        what
        for what, value in (("a user", config.username), ("a password", config.password))
        if value
    ]
    return (
        f"REDIS_URL={config.display}: the server at {host[0]}:{host[1]} refused the URL's "
        f"credentials ({type(exc).__name__}; the URL gives {' and '.join(given) or 'none'}: a "
        "password or user the server does not know, or none where it needs one): give them "
        "in the URL, redis://[user]:password@host:port/db (the same for rediss://, "
        "redis+cluster:// and redis+sentinel://)"
    )
