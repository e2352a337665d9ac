"""Locate (and on first use download) the Apache Kafka broker jars.

The jars come from Maven Central through ``scripts/kafka-jars.sh`` (needs ``mvn``) and are
cached per user, so CI and later runs do not download again.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from pathlib import Path

logger = logging.getLogger(__name__)

KAFKA_VERSION = "4.4.0"
COMPLETE_MARKER = ".complete"
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kafka-jars.sh"


def kafka_jars_dir() -> Path:
    """Where the Kafka jars live: ``$KAFKA_LIBS_DIR`` or the per-user cache."""
    override = os.environ.get("KAFKA_LIBS_DIR")
    if override:
        return Path(override).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "distributed-crawler" / f"kafka-{KAFKA_VERSION}" / "libs"


def jars_complete(directory: Path) -> bool:
    """True when ``directory`` holds a complete download (its marker file exists)."""
    return (directory / COMPLETE_MARKER).is_file()


def ensure_kafka_jars() -> Path:
    """Return the directory of Kafka jars, downloading them first if needed.

    Raises RuntimeError when the download script is missing or fails.
    """
    directory = kafka_jars_dir()
    if jars_complete(directory):
        return directory
    if not SCRIPT.is_file():
        raise RuntimeError(
            f"Kafka jars are not in {directory} and the download script {SCRIPT} is missing; "
            f"set KAFKA_LIBS_DIR to a directory holding the kafka_2.13-{KAFKA_VERSION} runtime jars"
        )
    logger.info("Downloading Kafka %s jars into %s (first run only)", KAFKA_VERSION, directory)
    started = time.monotonic()
    try:
        result = subprocess.run(
            ["bash", str(SCRIPT), str(directory)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
    except OSError as exc:
        raise RuntimeError(f"could not run {SCRIPT}: {exc}") from exc
    if result.returncode != 0 or not jars_complete(directory):
        output = "\n".join(result.stdout.strip().splitlines()[-30:])
        raise RuntimeError(
            f"downloading the Kafka {KAFKA_VERSION} jars with {SCRIPT} failed "
            f"(exit code {result.returncode}); it needs Apache Maven (mvn) and access to "
            f"Maven Central. Output:\n{output}"
        )
    logger.info("Kafka jars ready in %s (%.1fs)", directory, time.monotonic() - started)
    return directory
