"""A real ``redis-server`` process for development, demos and tests."""

from __future__ import annotations

import logging
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

import redis

from crawler.devservices import _proc
from crawler.devservices.ports import port_is_free

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


class RedisServer:
    """Start/stop one ``redis-server`` bound to ``config.host:config.port``.

    The server runs in its own session (it survives the Python process that started it);
    call :meth:`stop` or :meth:`stop_pid_file` to end it.
    """

    def __init__(self, config: RedisServerConfig) -> None:
        self.config = config
        self._proc: subprocess.Popen[bytes] | None = None

    # -- properties ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"redis://{self.config.host}:{self.config.port}/0"

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs, else None."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        return self._proc.pid

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

    def _kill_quietly(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the server, wait up to ``timeout`` seconds, then SIGKILL it."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            _proc.terminate(proc.pid, timeout, "redis-server")
            proc.wait()
            logger.info("redis-server at %s stopped", self.url)
        self._proc = None

    def restart(self, timeout: float = 20.0) -> None:
        """Stop and start again with the same data dir (the append-only file keeps the data)."""
        self.stop()
        self.start(timeout)

    @classmethod
    def stop_pid_file(cls, pid_file: Path, timeout: float = 10.0) -> int | None:
        """Stop the redis-server named by ``pid_file`` (if alive) and remove the file.

        Returns the pid that was stopped, or None when no redis-server was running.
        """
        return _proc.stop_pid_file(pid_file, _CMDLINE_NEEDLE, timeout, "redis-server")

    @staticmethod
    def is_running(pid: int) -> bool:
        """True when ``pid`` is a live redis-server process."""
        return _proc.pid_matches(pid, _CMDLINE_NEEDLE)

    # -- context manager ----------------------------------------------------------------------

    def __enter__(self) -> Self:
        if self.pid is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RedisServer(url={self.url!r}, pid={self.pid})"
