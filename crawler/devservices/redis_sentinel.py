"""A local Redis Sentinel setup: one master, optionally one replica of it, and one
``redis-server <conf> --sentinel``.

The sentinel monitors the master under a service name (quorum 1); clients find the master
through it (``redis+sentinel://host:port/<service>/<db>``). With a replica, ``SENTINEL
FAILOVER <service>`` promotes it (tests of a planned failover). Sentinel rewrites its config
file, so the file lives in the sentinel's data folder.
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

SERVICE = "crawler"
CONFIG_FILE = "sentinel.conf"


class SentinelServer(RedisServer):
    """``redis-server <data_dir>/sentinel.conf --sentinel`` monitoring one master."""

    label = "redis-sentinel"

    def __init__(self, config: RedisServerConfig, service: str, master: tuple[str, int]) -> None:
        super().__init__(config)
        self.service = service
        self.master = master

    @property
    def address(self) -> str:
        return f"sentinel {self.config.host}:{self.config.port}"

    @property
    def config_path(self) -> Path:
        return self.config.data_dir.resolve() / CONFIG_FILE

    def command(self) -> list[str]:
        executable, *rest = super().command()
        return [executable, str(self.config_path), "--sentinel", *rest]

    def start(self, timeout: float = 20.0) -> None:
        host, port = self.master
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            f"sentinel monitor {self.service} {host} {port} 1\n"
            f"sentinel down-after-milliseconds {self.service} 5000\n",
            encoding="utf-8",
        )
        super().start(timeout)


@dataclass(frozen=True)
class RedisSentinelConfig:
    master_port: int
    sentinel_port: int
    data_dir: Path
    host: str = "127.0.0.1"
    service: str = SERVICE
    replica_port: int | None = None
    other_sentinel_port: int | None = None  # a second sentinel, which the URL does not name


class LocalSentinel(ProcessGroup):
    """A master (and its replica, when a port is given) and their sentinel (and a second one,
    when a port is given); :attr:`url` is a ``redis+sentinel://`` URL (db 0) naming the
    first."""

    start_timeout = 30.0

    def __init__(self, config: RedisSentinelConfig) -> None:
        self.config = config
        self.master = RedisServer(
            RedisServerConfig(
                port=config.master_port,
                data_dir=config.data_dir / "master",
                host=config.host,
                appendonly=False,
            )
        )
        self.replica = (
            None
            if config.replica_port is None
            else RedisServer(
                RedisServerConfig(
                    port=config.replica_port,
                    data_dir=config.data_dir / "replica",
                    host=config.host,
                    appendonly=False,
                    extra_args=("--replicaof", config.host, str(config.master_port)),
                )
            )
        )
        self.sentinels = [
            SentinelServer(
                RedisServerConfig(
                    port=port,
                    data_dir=config.data_dir / f"sentinel-{port}",
                    host=config.host,
                    appendonly=False,
                ),
                config.service,
                (config.host, config.master_port),
            )
            for port in (config.sentinel_port, config.other_sentinel_port)
            if port is not None
        ]
        self.sentinel = self.sentinels[0]

    @property
    def url(self) -> str:
        cfg = self.config
        return f"redis+sentinel://{cfg.host}:{cfg.sentinel_port}/{cfg.service}/0"

    def start(self, timeout: float = start_timeout) -> None:
        """Start the master (and the replica, once it is in sync), then the sentinel, which
        finds the replica in the master's first answer; wait until it names the master."""
        started = time.monotonic()
        deadline = started + timeout
        try:
            self.master.start(timeout)
            if self.replica is not None:
                self.replica.start(max(1.0, deadline - time.monotonic()))
                self._wait_replica_in_sync(deadline)
            for sentinel in self.sentinels:
                sentinel.start(max(1.0, deadline - time.monotonic()))
            self._wait_master_known(deadline)
        except BaseException:
            self.stop()
            raise
        logger.info("Redis Sentinel up at %s (%.1fs)", self.url, time.monotonic() - started)

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        if self.replica is not None:
            self.replica.stop()
        self.master.stop()

    def _wait_replica_in_sync(self, deadline: float) -> None:
        cfg = self.config
        client = redis.Redis(host=cfg.host, port=cfg.replica_port or 0, socket_timeout=5.0)
        try:
            while client.info("replication").get("master_link_status") != "up":
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"the replica on port {cfg.replica_port} is not in sync")
                time.sleep(0.05)
        finally:
            client.close()

    def _wait_master_known(self, deadline: float) -> None:
        """Until the sentinel sees the master up (and the replica, able to take over, and the
        other sentinel)."""
        cfg = self.config
        client = redis.Redis(
            host=cfg.host, port=cfg.sentinel_port, socket_timeout=5.0, decode_responses=True
        )
        try:
            while True:
                state = client.sentinel_master(cfg.service)
                master_up = isinstance(state, dict) and state["is_master"] and not state["is_sdown"]
                if (
                    master_up
                    and (cfg.replica_port is None or self._replica_known(client))
                    and self._peers_known(client)
                ):
                    return
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"sentinel at {self.url} does not see its master: {state}")
                time.sleep(0.05)
        finally:
            client.close()

    def _peers_known(self, client: redis.Redis) -> bool:
        peers = client.sentinel_sentinels(self.config.service)
        return isinstance(peers, list) and len(peers) == len(self.sentinels) - 1

    def _replica_known(self, client: redis.Redis) -> bool:
        return any(
            int(replica["port"]) == self.config.replica_port
            and replica["flags"] == "slave"
            and replica.get("master-link-status") == "ok"
            for replica in client.sentinel_slaves(self.config.service)
        )
