"""A local Redis Sentinel setup: one master and one ``redis-server <conf> --sentinel``.

The sentinel monitors the master under a service name (quorum 1); clients find the master
through it (``redis+sentinel://host:port/<service>/<db>``). Sentinel rewrites its config
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


class LocalSentinel(ProcessGroup):
    """A master and its sentinel; :attr:`url` is a ``redis+sentinel://`` URL (db 0)."""

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
        self.sentinel = SentinelServer(
            RedisServerConfig(
                port=config.sentinel_port,
                data_dir=config.data_dir / "sentinel",
                host=config.host,
                appendonly=False,
            ),
            config.service,
            (config.host, config.master_port),
        )

    @property
    def url(self) -> str:
        cfg = self.config
        return f"redis+sentinel://{cfg.host}:{cfg.sentinel_port}/{cfg.service}/0"

    def start(self, timeout: float = start_timeout) -> None:
        """Start the master, then the sentinel; wait until the sentinel names the master."""
        started = time.monotonic()
        deadline = started + timeout
        try:
            self.master.start(timeout)
            self.sentinel.start(max(1.0, deadline - time.monotonic()))
            self._wait_master_known(deadline)
        except BaseException:
            self.stop()
            raise
        logger.info("Redis Sentinel up at %s (%.1fs)", self.url, time.monotonic() - started)

    def stop(self) -> None:
        self.sentinel.stop()
        self.master.stop()

    def _wait_master_known(self, deadline: float) -> None:
        cfg = self.config
        client = redis.Redis(host=cfg.host, port=cfg.sentinel_port, socket_timeout=5.0)
        try:
            while True:
                state = client.sentinel_master(cfg.service)
                if isinstance(state, dict) and state["is_master"] and not state["is_sdown"]:
                    return
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"sentinel at {self.url} does not see its master: {state}")
                time.sleep(0.05)
        finally:
            client.close()
