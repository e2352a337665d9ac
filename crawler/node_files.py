"""Local files one node writes at a time (no Scrapy imports).

Nodes on one machine, or on one shared disk, may be given the same path for what each writes
alone: a feed (``-O items.jsonl``), a ``JOBDIR``. Written by two at once such a file is lost
(a feed a mix of both, a spider state the last node's). A node takes an exclusive ``flock`` on
the file for as long as it writes it (on ``JOBDIR/node.lock`` for a job directory, from start
to exit); one that finds it held is refused, saying what to do. Locks are this process's and
counted: a path held twice (Scrapy makes a feed's storage twice) is let go at its last release,
and a file the lock created that nothing wrote is removed then (a batch or a filtered feed that
got no item: Scrapy would not have made it). Only regular files are locked (``/dev/null`` and
other devices are shared by design), and a killed process lets go of its own.
"""

from __future__ import annotations

import fcntl
import os
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(slots=True)
class _Hold:
    fd: int
    created: bool  # the lock made the file
    holders: int = 1
    used: bool = False  # opened for writing by its feed


_held: dict[str, _Hold] = {}


def _key(path: str | Path) -> str:
    return os.path.realpath(path)


def hold(path: str | Path) -> bool:
    """Lock ``path`` (created if missing, its content untouched) for this process; False when
    another process holds it."""
    real = _key(path)
    if (held := _held.get(real)) is not None:
        held.holders += 1
        return True
    try:
        if not stat.S_ISREG(os.stat(real).st_mode):
            return True  # a device or a pipe: nothing to keep apart
        created = False
    except FileNotFoundError:
        created = True
    Path(real).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    _held[real] = _Hold(fd, created)
    return True


def used(path: str | Path) -> None:
    """``path`` is being written: it stays when its lock is let go."""
    if (held := _held.get(_key(path))) is not None:
        held.used = True


def release(path: str | Path) -> None:
    """One holder of ``path`` lets go; the last one unlocks it, and removes the file when the
    lock made it and nothing wrote it."""
    real = _key(path)
    held = _held.get(real)
    if held is None:
        return
    held.holders -= 1
    if held.holders > 0:
        return
    del _held[real]
    if held.created and not held.used and os.fstat(held.fd).st_size == 0:
        os.unlink(real)
    os.close(held.fd)


JOB_DIR_LOCK = "node.lock"  # in JOBDIR: held by the node that keeps its spider state there


def job_dir_problem(job_dir: str) -> str | None:
    """Why ``JOBDIR`` may not be used by this node (another node holds it), or None, the
    directory then held for as long as this process runs."""
    if not job_dir or hold(Path(job_dir) / JOB_DIR_LOCK):
        return None
    return (
        f"JOBDIR={job_dir} is used by another node on this machine (or this disk): each would "
        "write its spider state there, and the last to stop would overwrite the others'. Give "
        "each node its own (-s JOBDIR=jobs/<node>), or none: the frontier in Redis is the "
        "crawl's saved state"
    )
