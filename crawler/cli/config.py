"""Where the CLI finds Redis, Kafka and the spool: flags, else the project settings."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from settings.resolve import resolve_settings


def project_settings() -> dict[str, Any]:
    return resolve_settings(os.environ)


def add_kafka_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap",
        default=None,
        help="Kafka bootstrap servers (default: KAFKA_BOOTSTRAP_SERVERS)",
    )


def kafka_bootstrap(args: argparse.Namespace) -> str:
    bootstrap = args.bootstrap or project_settings()["KAFKA_BOOTSTRAP_SERVERS"]
    if not bootstrap:
        raise SystemExit("no Kafka: give --bootstrap or set KAFKA_BOOTSTRAP_SERVERS")
    return str(bootstrap)


def add_spool_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spider", help="spider whose spool to use")
    parser.add_argument("--dir", default=None, help="spool folder (default: KAFKA_SPOOL_DIR)")


def spool_dir(args: argparse.Namespace) -> Path:
    return Path(args.dir or project_settings()["KAFKA_SPOOL_DIR"]) / str(args.spider)
