"""The Dockerfile read as its instructions (no Docker engine needed): what it copies, runs,
sets and declares. Shared by the compose checks and the image test."""

from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO_ROOT / "Dockerfile"


@functools.cache
def dockerfile_instructions() -> tuple[tuple[str, str], ...]:
    """Dockerfile as (INSTRUCTION, arguments) pairs, continuation lines joined."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        instructions.append((keyword.upper(), args.strip()))
        pending = ""
    return tuple(instructions)


def dockerfile_args(keyword: str) -> list[str]:
    return [args for kw, args in dockerfile_instructions() if kw == keyword]


def exec_form(args: str) -> list[str]:
    """Parse an exec-form (JSON array) CMD/ENTRYPOINT; shell form is split with shlex."""
    if args.startswith("["):
        parsed = json.loads(args)
        assert isinstance(parsed, list)
        return [str(a) for a in parsed]
    return shlex.split(args)


def image_env() -> dict[str, str]:
    """Every ``ENV key=value`` of the Dockerfile, later ones winning."""
    env: dict[str, str] = {}
    for args in dockerfile_args("ENV"):
        for pair in shlex.split(args):
            key, sep, value = pair.partition("=")
            assert sep, f"ENV {pair!r}: use the key=value form"
            env[key] = value
    return env


def image_volumes() -> list[str]:
    return [path for args in dockerfile_args("VOLUME") for path in exec_form(args)]


def image_user() -> str:
    users = dockerfile_args("USER")
    assert users, "Dockerfile never switches away from root"
    return users[-1].split(":")[0]


def image_uid(user: str) -> int:
    """The uid the Dockerfile's ``useradd`` gives ``user``."""
    for run in dockerfile_args("RUN"):
        for command in run.split("&&"):
            words = shlex.split(command)
            if words[:1] == ["useradd"] and words[-1] == user and "--uid" in words:
                return int(words[words.index("--uid") + 1])
    raise AssertionError(f"no useradd --uid ... {user} in the Dockerfile")


def healthcheck_command() -> list[str]:
    """The HEALTHCHECK's command (its options left out)."""
    (healthcheck,) = dockerfile_args("HEALTHCHECK")
    _options, sep, command = healthcheck.partition("CMD ")
    assert sep, f"HEALTHCHECK {healthcheck!r} has no CMD"
    return exec_form(command.strip())
