"""Process helpers shared by the service launchers: pid files, liveness, termination."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import time
from pathlib import Path

logger = logging.getLogger(__name__)

_POLL_INTERVAL = 0.1


def _reap(pid: int) -> bool:
    """Reap ``pid`` if it is our exited child. True when it was reaped (so it is gone)."""
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False
    return done == pid


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    # Format: "pid (comm) state ..."; comm may contain spaces and parentheses.
    rest = stat.rpartition(")")[2].split()
    return bool(rest) and rest[0] in ("Z", "X")


def pid_alive(pid: int) -> bool:
    """True while ``pid`` names a running (non-zombie) process."""
    if pid <= 0:
        return False
    if _reap(pid):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def cmdline(pid: int) -> str | None:
    """The command line of ``pid`` joined by spaces, or None when unknown (no /proc)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return "" if Path("/proc/self/cmdline").exists() else None
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode("utf-8", errors="replace").strip()


def pid_matches(pid: int, needle: str) -> bool:
    """True when ``pid`` is alive and (where /proc exists) its command line contains ``needle``.

    Guards against a stale pid file whose pid was reused by an unrelated process.
    """
    if not pid_alive(pid):
        return False
    line = cmdline(pid)
    return line is None or needle in line


def wait_exit(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``pid`` to exit. True when it is gone."""
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_INTERVAL)
    return True


def send_signal(pid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to ``pid``; False when the process no longer exists."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def terminate(pid: int, timeout: float, name: str = "process") -> None:
    """SIGTERM ``pid``, wait up to ``timeout`` seconds, then SIGKILL it."""
    if not pid_alive(pid):
        return
    # A stopped (SIGSTOP) process cannot act on SIGTERM until it is continued.
    send_signal(pid, signal.SIGCONT)
    if not send_signal(pid, signal.SIGTERM):
        return
    if wait_exit(pid, timeout):
        return
    logger.warning("%s (pid %d) ignored SIGTERM for %.0fs; sending SIGKILL", name, pid, timeout)
    send_signal(pid, signal.SIGKILL)
    if not wait_exit(pid, 10.0):
        raise RuntimeError(f"{name} (pid {pid}) did not exit even after SIGKILL")


def read_pid_file(path: Path) -> int | None:
    """The pid stored in ``path``, or None when the file is missing or garbage."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        pid = int(text.split()[0]) if text else 0
    except ValueError:
        return None
    return pid if pid > 0 else None


def write_pid_file(path: Path, pid: int) -> None:
    """Atomically write ``pid`` into ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{pid}\n", encoding="ascii")
    tmp.replace(path)


def remove_file(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def stop_pid_file(path: Path, needle: str, timeout: float, name: str) -> int | None:
    """Stop the process named by pid file ``path`` if it is alive and matches ``needle``.

    Removes the pid file in every case. Returns the pid that was stopped, or None when
    nothing (matching) was running.
    """
    pid = read_pid_file(path)
    stopped: int | None = None
    if pid is not None and pid_matches(pid, needle):
        terminate(pid, timeout, name)
        stopped = pid
    elif pid is not None:
        logger.debug("%s: pid file %s names pid %d, which is not running", name, path, pid)
    remove_file(path)
    return stopped


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file (or a note that it is missing)."""
    try:
        with path.open("rb") as fh:
            try:
                fh.seek(-64 * 1024, os.SEEK_END)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                fh.seek(0)
            data = fh.read()
    except FileNotFoundError:
        return f"(no log file at {path})"
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def rotate_log(path: Path, max_bytes: int = 10 * 1024 * 1024) -> None:
    """Move ``path`` to ``path.1`` when it has grown past ``max_bytes`` (one old copy kept)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size > max_bytes:
        path.replace(path.with_name(path.name + ".1"))
