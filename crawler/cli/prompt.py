"""Asking the operator before a deletion (``crawler purge``, ``crawler failed drop``,
``scrapy purge``)."""

from __future__ import annotations

import sys
from typing import TextIO


def answer(question: str, *, to: TextIO | None = None) -> str:
    """The operator's answer to ``question``, asked on ``to`` (stdout unless given: with
    ``--json`` stdout is for the JSON); "" when stdin has ended (``</dev/null``, a script,
    cron), which confirms nothing."""
    shown = to or sys.stdout
    print(question, end="", file=shown, flush=True)
    try:
        return input()
    except EOFError:
        print(file=shown)  # what the command says next goes on a line of its own
        return ""
