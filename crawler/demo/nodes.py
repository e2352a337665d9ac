"""Start and stop crawler nodes (``scrapy crawl <spider>``) as child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def start_node(
    spider: str,
    *,
    env: Mapping[str, str],
    settings: Mapping[str, str],
    log_path: Path,
    node_id: str,
    arguments: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Run one node from the repository root; its log goes to ``log_path``.

    ``arguments`` are spider arguments (``-a name=value``).
    """
    command = [sys.executable, "-m", "scrapy", "crawl", spider]
    for name, value in (arguments or {}).items():
        command += ["-a", f"{name}={value}"]
    for name, value in settings.items():
        command += ["-s", f"{name}={value}"]
    node_env = {**os.environ, **env, "CRAWLER_NODE_ID": node_id}
    with log_path.open("wb") as log:
        return subprocess.Popen(
            command, cwd=REPO_ROOT, env=node_env, stdout=log, stderr=subprocess.STDOUT
        )


def stop_node(process: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """Stop a node gracefully (SIGTERM), then for good; return its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


def wait_for_exit(nodes: Sequence[subprocess.Popen[bytes]], timeout: float) -> list[int | None]:
    """Wait until every node has exited or ``timeout`` passes; return the exit codes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(node.poll() is None for node in nodes):
        time.sleep(0.2)
    return [node.poll() for node in nodes]


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process descended from it, from ``/proc`` (parents first)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text(encoding="ascii", errors="replace").rpartition(")")[2].split()
        except OSError:
            continue  # exited while we looked
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree = [pid]
    for parent in tree:
        tree.extend(sorted(children.get(parent, ())))
    return tree


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants (``VmRSS`` summed; shared pages count
    once per process, as ``ps`` and ``top`` show them)."""
    total = 0
    for member in process_tree(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total
