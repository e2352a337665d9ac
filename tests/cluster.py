"""Run crawler nodes as real processes for a test, and always clean them up."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import orjson

from crawler.demo.nodes import start_node, stop_node, wait_for_exit
from crawler.demo.site import Site
from crawler.kafka.reader import ReceivedMessage, read_topic

__all__ = [
    "crawl_into_kafka",
    "logs",
    "running_nodes",
    "tracebacks",
    "wait_for_exit",
    "wait_for_log",
]


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


def log_lines(workdir: Path, needles: Iterable[str], limit: int = 200) -> str:
    """Lines of the nodes' logs holding any of ``needles`` (a failure's evidence)."""
    wanted = tuple(needles)
    found = [
        f"{path.name}: {line[:400]}"
        for path in sorted(workdir.glob("node-*.log"))
        for line in path.read_text(errors="replace").splitlines()
        if any(needle in line for needle in wanted)
    ]
    return "\n".join(found[:limit])


def tracebacks(workdir: Path) -> list[str]:
    return [
        path.name
        for path in sorted(workdir.glob("node-*.log"))
        if "Traceback" in path.read_text(errors="replace")
    ]


def crawl_into_kafka(
    count: int,
    *,
    redis_url: str,
    kafka_bootstrap: str,
    topic_template: str,
    site: Site,
    workdir: Path,
    seed: Callable[[], None],
    settings: Mapping[str, str] | None = None,
) -> list[ReceivedMessage]:
    """``count`` nodes of the pages spider on ``redis_url`` crawl ``site`` from what ``seed``
    pushes; asserts they exit cleanly and every page reached Kafka exactly once."""
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    node_settings = {
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
        **(settings or {}),
    }
    with running_nodes(count, workdir=workdir, env=env, settings=node_settings) as nodes:
        seed()
        codes = wait_for_exit(nodes, timeout=120)
    assert codes == [0] * count, logs(workdir)
    assert tracebacks(workdir) == [], logs(workdir)
    topic = topic_template.format(spider="pages")
    messages = read_topic(kafka_bootstrap, topic, expected=site.pages, timeout=60)
    urls = Counter(orjson.loads(message.value)["url"] for message in messages)
    missing = sorted(site.all_urls() - set(urls))
    assert not missing, f"{len(messages)} messages read, missing {missing[:5]}\n{logs(workdir)}"
    assert set(urls) == site.all_urls()
    assert [url for url, seen in urls.items() if seen > 1] == []
    return messages
