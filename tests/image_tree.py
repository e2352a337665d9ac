"""The crawler image's file tree, built in a folder the way the Dockerfile builds it.

There is no Docker engine here, so the Dockerfile's instructions are replayed on a folder
that stands for the image's ``/``: ``WORKDIR`` and ``COPY`` (``.dockerignore``'s caches left
out), and of each ``RUN`` the steps that shape the tree: ``groupadd``/``useradd`` (their
ids and the home folder, not an ``/etc/passwd`` entry: the node runs under the numeric
uid), ``mkdir`` and ``chown``. The steps that install software (``apt-get``, ``pip``) are
not replayed; instead this machine's Python prefix is bind-mounted read-only at
``/usr/local`` (where ``python:3.11-slim`` has it) and the project's dependencies come
from the development virtualenv on ``PYTHONPATH``. ``skipped`` lists what was not run.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from tests.dockerfile import REPO_ROOT, dockerfile_instructions, exec_form, image_env
from tests.services import unavailable

CACHES = shutil.ignore_patterns("__pycache__", "*.py[cod]")  # as .dockerignore says
PYTHON_PREFIX = "/usr/local"


@dataclass
class ImageTree:
    root: Path  # stands for the image's /
    workdir: str = "/"
    users: dict[str, int] = field(default_factory=dict)  # useradd: name -> uid
    groups: dict[str, int] = field(default_factory=dict)  # groupadd: name -> gid
    homes: dict[str, str] = field(default_factory=dict)  # useradd: name -> home folder
    skipped: list[str] = field(default_factory=list)  # RUN steps not replayed

    def path(self, image_path: str) -> Path:
        """Where an image path (absolute, or relative to the WORKDIR) is in the tree."""
        absolute = PurePosixPath(self.workdir, image_path)
        return self.root.joinpath(*absolute.parts[1:])

    def owner(self, spec: str) -> tuple[int, int]:
        user, _, group = spec.partition(":")
        return self.users[user], self.groups[group or user]

    def copy(self, args: str) -> None:
        *sources, destination = shlex.split(args)
        target = self.path(destination)
        for pattern in sources:
            for source in sorted(REPO_ROOT.glob(pattern)):
                into = target / source.name if destination.endswith("/") else target
                if source.is_dir():
                    shutil.copytree(source, into, ignore=CACHES, dirs_exist_ok=True)
                else:
                    into.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, into)

    def run(self, words: list[str]) -> None:
        program, args = words[0], words[1:]
        options = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
        if program == "groupadd":
            self.groups[args[-1]] = int(options["--gid"])
        elif program == "useradd":
            name = args[-1]
            self.users[name] = int(options["--uid"])
            self.homes[name] = options["--home-dir"]
            if "--create-home" in args:
                home = self.path(options["--home-dir"])
                home.mkdir(parents=True)
                os.chown(home, *self.owner(f"{name}:{options['--gid']}"))
        elif program == "mkdir":
            for folder in (arg for arg in args if not arg.startswith("-")):
                self.path(folder).mkdir(parents=True, exist_ok=True)
        elif program == "chown":
            uid, gid = self.owner(args[0])
            for path in args[1:]:
                os.chown(self.path(path), uid, gid)
        else:
            self.skipped.append(shlex.join(words))


def build(root: Path) -> ImageTree:
    """Replay the Dockerfile's WORKDIR, COPY and RUN on ``root`` (see the module's doc)."""
    tree = ImageTree(root)
    for keyword, args in dockerfile_instructions():
        if keyword == "WORKDIR":
            tree.workdir = str(PurePosixPath(tree.workdir, args))
            tree.path(tree.workdir).mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            tree.copy(args)
        elif keyword == "RUN":
            for step in args.split("&&"):
                tree.run(shlex.split(step))
    return tree


@contextlib.contextmanager
def python_mounted(tree: ImageTree) -> Iterator[None]:
    """This machine's Python at the tree's /usr/local, read-only, for the image's user
    (the interpreter's own folder may be closed to it: pyenv's lives under /root)."""
    target = tree.path(PYTHON_PREFIX)
    target.mkdir(parents=True, exist_ok=True)
    for command in (
        ["mount", "--bind", sys.base_prefix, str(target)],
        ["mount", "-o", "remount,bind,ro", str(target)],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            subprocess.run(["umount", str(target)], capture_output=True, check=False)
            unavailable(f"cannot bind-mount Python into the image tree: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(target)], check=True)


def node_environment(tree: ImageTree, user: str) -> dict[str, str]:
    """The container's environment: the image's ENV, its Python, the user's HOME."""
    libraries = tree.path(f"{PYTHON_PREFIX}/lib")
    return {
        "PATH": f"{tree.path(PYTHON_PREFIX + '/bin')}:/usr/bin:/bin",
        # pyenv's python finds its libpython by an RPATH the image's user cannot open.
        "LD_LIBRARY_PATH": str(libraries),
        # pip's step, not replayed: the project from the tree, its dependencies from the venv.
        "PYTHONPATH": f"{tree.path(tree.workdir)}:{sysconfig.get_paths()['purelib']}",
        "PYTHONNOUSERSITE": "1",
        "HOME": str(tree.path(tree.homes[user])),
        **image_env(),
    }


def node_command(args: str) -> list[str]:
    """CMD, with ``scrapy`` run as ``python -m scrapy`` (pip's console script is not made)."""
    command = exec_form(args)
    return ["python", "-m", "scrapy", *command[1:]] if command[0] == "scrapy" else command
