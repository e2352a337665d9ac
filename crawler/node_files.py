"""Local files one node writes at a time (no Scrapy imports).

Nodes on one machine, or on one shared disk, may be given the same path for what each writes
alone: a feed (``-O items.jsonl``), a ``JOBDIR``. Written by two at once such a file is lost
(a feed a mix of both, a spider state the last node's). A node takes an exclusive ``flock`` on
the file for as long as it writes it (on ``JOBDIR/node.lock`` for a job directory, from start
to exit); one that finds it held is refused, saying what to do.
Locks are this process's: a path it holds already is held again without a second lock (Scrapy
makes a feed's storage twice), and a killed process lets go of its own.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

_held: dict[str, int] = {}  # path -> the descriptor holding its lock


def hold(path: str | Path) -> bool:
    """Lock ``path`` (created if missing, its content untouched) for this process; False when
    another process holds it."""
    real = os.path.realpath(path)
    if real in _held:
        return True
    Path(real).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    _held[real] = fd
    return True


def release(path: str | Path) -> None:
    """Let go of ``path``'s lock (nothing if this process does not hold it)."""
    fd = _held.pop(os.path.realpath(path), None)
    if fd is not None:
        os.close(fd)


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
