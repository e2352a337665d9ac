"""A real ``redis-server`` process for development, demos and tests."""

from __future__ import annotations

import logging
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from crawler.devservices import _proc
from crawler.devservices.ports import port_is_free
from crawler.devservices.process import LocalProcess

logger = logging.getLogger(__name__)

LOG_FILE = "redis.log"
_CMDLINE_NEEDLE = "redis"


@dataclass(frozen=True)
class RedisServerConfig:
    port: int
    data_dir: Path
    host: str = "127.0.0.1"
    appendonly: bool = True
    executable: str = "redis-server"
    extra_args: tuple[str, ...] = ()  # appended to the command line (cluster, TLS options)


class RedisServer(LocalProcess):
    """Start/stop one ``redis-server`` bound to ``config.host:config.port``.

    The server runs in its own session (it survives the Python process that started it);
    call :meth:`stop` or :meth:`stop_pid_file` to end it.
    """

    label = "redis-server"
    needle = _CMDLINE_NEEDLE
    start_timeout = 20.0
    stop_timeout = 10.0

    @property
    def address(self) -> str:
        return self.url

    def __init__(self, config: RedisServerConfig) -> None:
        self.config = config
        super().__init__()

    # -- properties ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"redis://{self.config.host}:{self.config.port}/0"

    @property
    def log_path(self) -> Path:
        return self.config.data_dir / LOG_FILE

    # -- lifecycle ----------------------------------------------------------------------------

    def command(self) -> list[str]:
        cfg = self.config
        data_dir = cfg.data_dir.resolve()
        return [
            cfg.executable,
            "--bind", cfg.host,
            "--port", str(cfg.port),
            "--dir", str(data_dir),
            "--appendonly", "yes" if cfg.appendonly else "no",
            "--save", "",
            "--protected-mode", "no",
            "--daemonize", "no",
            "--logfile", str(data_dir / LOG_FILE),
            *cfg.extra_args,
        ]  # fmt: skip

    def start(self, timeout: float = 20.0) -> None:
        """Spawn the server and wait until it answers PING. Raises RuntimeError otherwise."""
        if self.pid is not None:
            raise RuntimeError(f"redis-server is already running (pid {self.pid})")
        cfg = self.config
        if not port_is_free(cfg.port, cfg.host):
            raise RuntimeError(
                f"cannot start redis-server: {cfg.host}:{cfg.port} is already in use"
            )
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        _proc.rotate_log(self.log_path)
        # Early errors (bad arguments) go to stderr before the log file is opened: keep them.
        with self.log_path.open("ab") as log:
            try:
                self._proc = subprocess.Popen(
                    self.command(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=cfg.data_dir,
                    start_new_session=True,
                )
            except OSError as exc:
                raise RuntimeError(f"cannot run {cfg.executable!r}: {exc}") from exc
        try:
            self._wait_ready(timeout)
        except BaseException:
            self._kill_quietly()
            raise
        logger.info(
            "redis-server up at %s (pid %d, %.1fs)",
            self.url,
            self._proc.pid,
            time.monotonic() - started,
        )

    def _wait_ready(self, timeout: float) -> None:
        assert self._proc is not None
        cfg = self.config
        deadline = time.monotonic() + timeout
        client = redis.Redis(
            host=cfg.host, port=cfg.port, socket_timeout=1.0, socket_connect_timeout=1.0
        )
        try:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise RuntimeError(
                        f"redis-server exited with code {code} during startup; "
                        f"log {self.log_path}:\n{_proc.log_tail(self.log_path)}"
                    )
                try:
                    if client.ping():
                        return
                except redis.exceptions.BusyLoadingError:
                    pass  # still loading the append-only file
                except redis.exceptions.ConnectionError:
                    pass
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"redis-server did not answer PING on {cfg.host}:{cfg.port} "
                        f"within {timeout:.0f}s; "
                        f"log {self.log_path}:\n{_proc.log_tail(self.log_path)}"
                    )
                time.sleep(0.05)
        finally:
            client.close()
