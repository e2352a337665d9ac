"""A local Redis Cluster: ``redis-server --cluster-enabled yes`` masters, for tests and demos.

Each master is a :class:`RedisServer` in a folder of its own (its ``nodes.conf`` lives there)
with an explicit cluster bus port (``--cluster-port``: port + 10000 may be taken or too high).
:meth:`LocalRedisCluster.start` splits the 16384 slots evenly (``CLUSTER ADDSLOTSRANGE``),
introduces the masters to each other (``CLUSTER MEET``) and waits until every one of them
reports ``cluster_state:ok``. No replicas: a stopped master takes its slots with it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from crawler.devservices.process import ProcessGroup
from crawler.devservices.redis_server import RedisServer, RedisServerConfig

logger = logging.getLogger(__name__)

SLOTS = 16384
NODE_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class RedisClusterConfig:
    ports: tuple[int, ...]  # one master per port
    bus_ports: tuple[int, ...]  # each master's cluster bus port (not always port + 10000)
    data_dir: Path
    host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        if not self.ports or len(self.bus_ports) != len(self.ports):
            raise ValueError(
                f"RedisClusterConfig needs one bus port per port: ports={self.ports}, "
                f"bus_ports={self.bus_ports}"
            )


def slot_ranges(masters: int) -> list[tuple[int, int]]:
    """The 16384 slots split into ``masters`` contiguous, inclusive ranges."""
    bounds = [SLOTS * index // masters for index in range(masters + 1)]
    return [(bounds[index], bounds[index + 1] - 1) for index in range(masters)]


def cluster_args(bus_port: int) -> tuple[str, ...]:
    """``redis-server`` options of a cluster master (``nodes.conf`` in its own folder)."""
    return (
        "--cluster-enabled", "yes",
        "--cluster-port", str(bus_port),
        "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
    )  # fmt: skip


def _cluster_info(client: redis.Redis) -> dict[str, str]:
    """``CLUSTER INFO`` as text fields (redis-py parses the reply into a dict)."""
    info = client.cluster("INFO")
    return {str(name): str(value) for name, value in dict(info).items()}


class LocalRedisCluster(ProcessGroup):
    """Start/stop the masters of one cluster; :attr:`url` is a ``redis+cluster://`` URL."""

    label = "redis-cluster"
    start_timeout = 30.0

    def __init__(self, config: RedisClusterConfig) -> None:
        self.config = config
        self.servers = [
            RedisServer(
                RedisServerConfig(
                    port=port,
                    data_dir=config.data_dir / f"node-{port}",
                    host=config.host,
                    appendonly=False,
                    extra_args=cluster_args(bus_port),
                )
            )
            for port, bus_port in zip(config.ports, config.bus_ports, strict=True)
        ]

    @property
    def url(self) -> str:
        nodes = ",".join(f"{self.config.host}:{port}" for port in self.config.ports)
        return f"redis+cluster://{nodes}"

    def start(self, timeout: float = start_timeout) -> None:
        """Start every master, form the cluster and wait for ``cluster_state:ok``."""
        started = time.monotonic()
        deadline = started + timeout
        try:
            for server in self.servers:
                server.start(max(1.0, deadline - time.monotonic()))
            clients = [self._client(port) for port in self.config.ports]
            try:
                self._form(clients)
                self._wait_ok(clients, deadline)
            finally:
                for client in clients:
                    client.close()
        except BaseException:
            self.stop()
            raise
        logger.info(
            "Redis Cluster of %d masters up at %s (%.1fs)",
            len(self.servers),
            self.url,
            time.monotonic() - started,
        )

    def stop(self) -> None:
        for server in reversed(self.servers):
            server.stop()

    def _client(self, port: int) -> redis.Redis:
        return redis.Redis(
            host=self.config.host, port=port, socket_timeout=5.0, socket_connect_timeout=5.0
        )

    def _form(self, clients: list[redis.Redis]) -> None:
        for client, (first, last) in zip(clients, slot_ranges(len(clients)), strict=True):
            client.cluster("ADDSLOTSRANGE", first, last)
        for port, bus_port in zip(self.config.ports[1:], self.config.bus_ports[1:], strict=True):
            clients[0].cluster("MEET", self.config.host, port, bus_port)

    def _wait_ok(self, clients: list[redis.Redis], deadline: float) -> None:
        expected = {
            "cluster_state": "ok",
            "cluster_slots_ok": str(SLOTS),
            "cluster_known_nodes": str(len(clients)),
        }
        while True:
            infos = [_cluster_info(client) for client in clients]
            if all(expected.items() <= info.items() for info in infos):
                return
            if time.monotonic() >= deadline:
                states = {
                    port: {name: info.get(name) for name in expected}
                    for port, info in zip(self.config.ports, infos, strict=True)
                }
                raise RuntimeError(f"Redis Cluster at {self.url} not ready in time: {states}")
            time.sleep(0.05)
