"""The image's file tree (built as the Dockerfile builds it, see ``tests.image_tree``) runs a
real node as the image's unprivileged user against real Redis and a Kafka that is down:
items are spooled, the HEALTHCHECK passes, only the declared volumes are written.

Differences from a container, all in ``tests.image_tree`` or below: the packages are
not installed by apt-get and pip (the machine's Python is mounted, the dependencies come
from the virtualenv), ``scrapy`` runs as ``python -m scrapy``, the user is a bare uid (no
``/etc/passwd`` entry), and the metrics port is a free one instead of 9410 (other test
runs share this machine), also in the HEALTHCHECK's URL.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from crawler.demo.site import Site
from crawler.devservices import free_port
from crawler.kafka.spool import decode_record
from settings import base
from tests.dockerfile import dockerfile_args, healthcheck_command, image_user, image_volumes
from tests.image_tree import ImageTree, build, node_command, node_environment, python_mounted
from tests.services import unavailable

AS_ROOT = os.geteuid() == 0
METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def image() -> Iterator[ImageTree]:
    if not AS_ROOT:
        unavailable("building the image tree needs root (chown to the image's uid, bind mount)")
    root = Path(tempfile.mkdtemp(prefix="crawler-image-"))
    root.chmod(0o755)  # as / is; pytest's tmp_path is closed to other users
    try:
        tree = build(root)
        with python_mounted(tree):
            yield tree
    finally:
        shutil.rmtree(root)


def as_image_user(tree: ImageTree) -> dict[str, Any]:
    """Popen arguments: the image's user and group, no other group, its environment."""
    uid, gid = tree.owner(image_user())
    return {
        "user": uid,
        "group": gid,
        "extra_groups": [],
        "env": node_environment(tree, image_user()),
        "cwd": tree.path(tree.workdir),
    }


def files_under(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*")}


def listening_on_every_interface(port: int) -> bool:
    """Whether a socket listens on 0.0.0.0:``port`` (``/proc/net/tcp``, state 0A)."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return any(row.split()[1] == f"00000000:{port:04X}" and row.split()[3] == "0A" for row in rows)


def test_writable_paths_belong_to_the_image_user_and_nothing_else_does(image: ImageTree) -> None:
    run_as = as_image_user(image)
    probe = "import pathlib, sys; p = pathlib.Path(sys.argv[1], 'probe'); p.touch(); p.unlink()"
    workdir = dockerfile_args("WORKDIR")[-1]
    assert f"{workdir}/{base.KAFKA_SPOOL_DIR}" in image_volumes()  # the dead-letter file's too
    for path in image_volumes():
        assert image.path(path).stat().st_uid == run_as["user"], path
        subprocess.run(["python", "-c", probe, image.path(path)], check=True, **run_as)
    refused = subprocess.run(
        ["python", "-c", probe, image.path(workdir)],
        capture_output=True,
        text=True,
        check=False,
        **run_as,
    )
    assert refused.returncode != 0 and "PermissionError" in refused.stderr  # /app is root's
    assert {step.split()[0] for step in image.skipped} <= {"apt-get", "pip", "python", "rm"}


def test_a_node_runs_as_the_image_user_and_spools_while_kafka_is_down(
    image: ImageTree, redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    run_as = as_image_user(image)
    run_as["env"].update(
        {
            "REDIS_URL": redis_url,
            "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",  # nothing listens there
            "CRAWLER_NODE_ID": "image-node",
            "CRAWLER_SETTING_METRICS_PORTS": str(METRICS_PORT),
            "CRAWLER_SETTING_KAFKA_PRODUCER_CONFIG": '{"message.timeout.ms": 2000}',
            "CRAWLER_SETTING_KAFKA_FLUSH_TIMEOUT": "2",
            # Items wait for a topic check while Kafka is down; with topics made beforehand
            # they go to Kafka at once, and, it being down, to the spool.
            "CRAWLER_SETTING_KAFKA_CREATE_TOPICS": "False",
            "CRAWLER_SETTING_POLITENESS_RATE": "1000",
        }
    )
    spool = image.path(base.KAFKA_SPOOL_DIR) / "pages"
    before = files_under(image.path(image.workdir))
    log = tmp_path / "node.log"
    (cmd,) = dockerfile_args("CMD")
    with Site(10) as site, log.open("wb") as out:
        node = subprocess.Popen(node_command(cmd), stdout=out, stderr=subprocess.STDOUT, **run_as)
        try:
            redis_client.lpush("pages:start_urls", site.url(0))
            deadline = time.monotonic() + 120
            while not list(spool.glob("*.jsonl")) or not any(
                segment.read_bytes() for segment in spool.glob("*.jsonl")
            ):
                assert node.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
            check = [arg.replace(":9410/", f":{METRICS_PORT}/") for arg in healthcheck_command()]
            health = subprocess.run(
                check, capture_output=True, text=True, timeout=10, check=False, **run_as
            )
            assert health.returncode == 0, health.stderr
            # The contract of /healthz and /readyz (crawler.extensions.metrics).
            base_url = f"http://127.0.0.1:{METRICS_PORT}"
            with urllib.request.urlopen(f"{base_url}/healthz", timeout=5) as answer:  # noqa: S310
                assert set(orjson.loads(answer.read())) >= {"redis", "kafka"}
            with urllib.request.urlopen(f"{base_url}/readyz", timeout=5) as answer:  # noqa: S310
                assert answer.status == 200  # Redis answers
            assert listening_on_every_interface(METRICS_PORT)  # the image's METRICS_HOST
        finally:
            node.send_signal(signal.SIGTERM)
            code = node.wait(60)
    text = log.read_text()
    assert code == 0, text
    assert "Permission denied" not in text and "kafka/spool_error" not in text, text
    segments = sorted(spool.glob("*.jsonl"))
    records = [decode_record(line) for seg in segments for line in seg.read_bytes().splitlines()]
    assert records and {r.message.topic for r in records} == {"spider-pages-items"}
    assert {seg.stat().st_uid for seg in segments} == {run_as["user"]}
    written = files_under(image.path(image.workdir)) - before
    volumes = [image.path(path) for path in image_volumes()]
    assert all(any(path.is_relative_to(v) for v in volumes) for path in written), written
