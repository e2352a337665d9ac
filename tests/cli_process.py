"""Run ``crawler <command>`` as an operator does: a process, its output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from crawler.demo.nodes import REPO_ROOT

SERVICE_VARIABLES = ("REDIS_URL", "KAFKA_BOOTSTRAP_SERVERS")


def crawler_process(
    *args: str, stdin: str = "", env: Mapping[str, str] | None = None, cwd: Path = REPO_ROOT
) -> subprocess.CompletedProcess[str]:
    """``crawler <args>`` run in ``cwd``; Redis and Kafka only from the flags given (the test
    session's own variables are left out), plus ``env``."""
    inherited = {k: v for k, v in os.environ.items() if k not in SERVICE_VARIABLES}
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args],
        cwd=cwd,
        env={**inherited, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The output of a command that must succeed."""
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout
