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
    migrate,
    purge,
    queue,
    requeue,
    seed,
    sessions,
    spool,
    status,
    top,
)
from crawler.redis_outage import REDIS_FAILURES


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
        migrate,
        sessions,
    ):
        module.register(commands)
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; a command that sets ``more_positionals`` to the name of its
    ``nargs="*"`` argument also takes such values after its options
    (``crawler seed pages --recrawl URL``), which argparse alone would refuse."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    tail = getattr(args, "more_positionals", None)
    if tail is not None and rest and not any(r.startswith("-") and r != "-" for r in rest):
        setattr(args, tail, [*getattr(args, tail), *rest])
        rest = []
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command. A ``ValueError`` out of it is a setting the settings objects it builds
    refuse (``SeedSettings``, ``PurgeSettings``, ``settings_values``' typed reads): its
    message names the setting and what is wrong, and ends the command (exit 1), as a bad
    ``--redis`` URL does; so does a Redis error after Redis first answered (a master down
    mid-command), in one line."""
    args = parse(argv)
    try:
        code = int(args.run(args))
        sys.stdout.flush()
    except ValueError as exc:
        print(f"crawler {args.command}: {exc}", file=sys.stderr)
        return 1
    except REDIS_FAILURES as exc:  # after its first answer: a master down, a failover
        print(f"crawler {args.command}: Redis failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `crawler status | head`: the reader left; quiet, as git is
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code
