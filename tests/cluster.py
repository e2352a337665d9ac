"""Run crawler nodes as real processes for a test, and always clean them up."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from crawler.demo.nodes import start_node, stop_node, wait_for_exit

__all__ = ["logs", "running_nodes", "tracebacks", "wait_for_exit", "wait_for_log"]


# Local test sites take any rate; tests of the limiter set their own.
LOCAL_SITE_SETTINGS = {"POLITENESS_RATE": "1000", "POLITENESS_BURST": "50"}


@contextlib.contextmanager
def running_nodes(
    count: int,
    *,
    workdir: Path,
    env: Mapping[str, str],
    settings: Mapping[str, str],
    spider: str = "pages",
    arguments: Mapping[str, str] | None = None,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    workdir.mkdir(parents=True, exist_ok=True)
    settings = {**LOCAL_SITE_SETTINGS, **settings}
    nodes = [
        start_node(
            spider,
            env=env,
            settings=settings,
            log_path=workdir / f"node-{index}.log",
            node_id=f"node-{index}",
            arguments=arguments,
        )
        for index in range(count)
    ]
    try:
        yield nodes
    finally:
        for node in nodes:
            stop_node(node)


def wait_for_log(path: Path, text: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.1)
    return False


def logs(workdir: Path) -> str:
    return "\n".join(
        f"==== {path.name}\n{path.read_text(errors='replace')[-4000:]}"
        for path in sorted(workdir.glob("node-*.log"))
    )


def tracebacks(workdir: Path) -> list[str]:
    return [
        path.name
        for path in sorted(workdir.glob("node-*.log"))
        if "Traceback" in path.read_text(errors="replace")
    ]
