"""The lifecycle shared by the local servers this package runs (Redis, Kafka)."""

from __future__ import annotations

import logging
import subprocess
import time
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

from crawler.devservices import _proc

logger = logging.getLogger(__name__)


class Stoppable(ABC):
    """A local service that stops when the ``with`` block that started it ends."""

    @abstractmethod
    def stop(self) -> None: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class LocalProcess(Stoppable):
    """A server process started by :meth:`start`; it runs in its own session."""

    label: ClassVar[str]  # for messages, e.g. "redis-server"
    needle: ClassVar[str]  # identifies the process in /proc/<pid>/cmdline
    start_timeout: ClassVar[float]
    stop_timeout: ClassVar[float]

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    @abstractmethod
    def address(self) -> str:
        """Where clients reach the server (for messages)."""

    @abstractmethod
    def start(self, timeout: float) -> None:
        """Spawn the server and wait until it answers."""

    @property
    def pid(self) -> int | None:
        """The server's pid while it runs, else None."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        return self._proc.pid

    def _kill_quietly(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM the server, wait up to ``timeout`` seconds, then SIGKILL it."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            started = time.monotonic()
            _proc.terminate(proc.pid, timeout or self.stop_timeout, self.label)
            proc.wait()
            logger.info(
                "%s at %s stopped (%.1fs)", self.label, self.address, time.monotonic() - started
            )
        self._proc = None

    def restart(self, timeout: float | None = None) -> None:
        """Stop and start again on the same data directory (its data is kept)."""
        self.stop()
        self.start(timeout or self.start_timeout)

    @classmethod
    def stop_pid_file(cls, pid_file: Path, timeout: float | None = None) -> int | None:
        """Stop the server named by ``pid_file`` (if alive) and remove the file.

        Returns the pid that was stopped, or None when none was running.
        """
        return _proc.stop_pid_file(pid_file, cls.needle, timeout or cls.stop_timeout, cls.label)

    @classmethod
    def is_running(cls, pid: int) -> bool:
        """True when ``pid`` is a live process of this kind of server."""
        return _proc.pid_matches(pid, cls.needle)

    def __enter__(self) -> Self:
        if self.pid is None:
            self.start(self.start_timeout)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address!r}, pid={self.pid})"


class ProcessGroup(Stoppable):
    """A service made of several local processes (a Redis Cluster, a Sentinel setup):
    ``start()`` and ``stop()``, and a context manager that runs them."""

    @property
    @abstractmethod
    def url(self) -> str: ...

    @abstractmethod
    def start(self) -> None: ...

    def __enter__(self) -> Self:
        self.start()
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"
