"""``crawler <command>``: operator tools (installed entry point; also ``python -m crawler``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from crawler.cli import (
    consume,
    dead_letters,
    failed,
    leases,
    purge,
    queue,
    requeue,
    seed,
    sessions,
    spool,
    status,
    top,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crawler", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for module in (
        consume,
        spool,
        dead_letters,
        status,
        top,
        queue,
        failed,
        leases,
        seed,
        requeue,
        purge,
        sessions,
    ):
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = int(args.run(args))
        sys.stdout.flush()
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `crawler status | head`: the reader left; quiet, as git is
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code
