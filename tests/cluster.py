"""Run crawler nodes as real processes for a test, and always clean them up."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import orjson

from crawler.demo.nodes import start_node, stop_node, wait_for_exit
from crawler.demo.site import Site
from crawler.kafka.reader import ReceivedMessage, end_offsets, read_topic

__all__ = [
    "crawl_into_kafka",
    "crawl_site_once",
    "delivery_evidence",
    "logs",
    "running_nodes",
    "tracebacks",
    "wait_for_exit",
    "wait_for_log",
    "warnings_of_ours",
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
    per_node: Sequence[Mapping[str, str]] = (),
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` nodes with ``settings``, node i also with ``per_node[i]`` (when given)."""
    workdir.mkdir(parents=True, exist_ok=True)
    settings = {**LOCAL_SITE_SETTINGS, **settings}
    own = [*per_node, *[{}] * (count - len(per_node))]
    nodes = [
        start_node(
            spider,
            env=env,
            settings={**settings, **own[index]},
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


def crawl_site_once(
    site: Site,
    seed: Callable[[str], object],
    *,
    nodes: int,
    workdir: Path,
    env: Mapping[str, str],
    settings: Mapping[str, str],
    per_node: Sequence[Mapping[str, str]] = (),
) -> str:
    """``nodes`` nodes of the ``pages`` spider crawl ``site`` from the start URL given to
    ``seed`` until idle: they exit cleanly, without a traceback, having fetched every page
    exactly once. Returns their logs."""
    with running_nodes(
        nodes, workdir=workdir, env=env, settings=settings, per_node=per_node
    ) as started:
        seed(site.url(0))
        codes = wait_for_exit(started, timeout=240)
    assert codes == [0] * nodes, logs(workdir)
    assert tracebacks(workdir) == [], logs(workdir)
    assert {site.base_url + path for path in site.hits} >= site.all_urls()
    assert [path for path, hits in site.hits.items() if hits > 1] == []
    return "".join(path.read_text() for path in sorted(workdir.glob("node-*.log")))


def wait_for_log(path: Path, text: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.1)
    return False


def logs(workdir: Path, tail: int = 4000) -> str:
    """The nodes' logs, the last ``tail`` characters of each (0: whole), for a failure's
    message; a test looking for a line anywhere in them asks for the whole (``tail=0``)."""
    return "\n".join(
        f"==== {path.name}\n{path.read_text(errors='replace')[-tail:]}"
        for path in sorted(workdir.glob("node-*.log"))
    )


def delivery_evidence(workdir: Path, bootstrap: str, topic: str, missing: Iterable[str]) -> str:
    """A short account of pages missing from ``topic``: the broker's offsets (a low one
    above 0 means records were deleted), each node's last ``kafka/`` stats, and its lines
    naming a missing page or a refused or spooled message, and its producer ids and epochs
    (two nodes with one id: the broker takes the second one's first batches for duplicates)
    and duplicate sequences when librdkafka's ``eos`` debug is on. Printed too: CI shows the
    tail of a failure, where captured output goes."""
    lost = sorted(missing)
    lines = [f"{len(lost)} pages missing from {topic}: {lost[:10]}"]
    for name in (topic, f"{topic}.dlq"):
        lines.append(f"broker {name}, (low, high) per partition: {end_offsets(bootstrap, name)}")
    needles = [f"{url}>" for url in lost[:10]]
    needles += ["Kafka refused", "spool messages", "spooled", "PID{", "DUPSEQ"]
    for path in sorted(workdir.glob("node-*.log")):
        text = path.read_text(errors="replace")
        last_dump = text[text.rfind("Dumping Scrapy stats") :]
        stats = re.findall(r"'kafka/[^']+': \d+", last_dump)
        lines.append(f"{path.name}: {', '.join(stats) or 'no kafka/ stats'}")
        found = [line for line in text.splitlines() if any(n in line for n in needles)]
        lines += [f"  {line[:300]}" for line in found[:30]]
    report = "\n".join(lines)
    print(report)
    return report


def warnings_of_ours(workdir: Path) -> list[str]:
    """Python warnings the nodes logged, but those about the test's user code (spiders and
    pipelines written the old way on purpose, which Scrapy warns their author about)."""
    return [
        f"{path.name}: {line[:300]}"
        for path in sorted(workdir.glob("node-*.log"))
        for line in path.read_text(errors="replace").splitlines()
        if "[py.warnings]" in line and "tests.userproject" not in line
    ]


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
    assert not warnings_of_ours(workdir), "\n".join(warnings_of_ours(workdir))
    topic = topic_template.format(spider="pages")
    messages = read_topic(kafka_bootstrap, topic, expected=site.pages, timeout=60)
    urls = Counter(orjson.loads(message.value)["url"] for message in messages)
    missing = site.all_urls() - set(urls)
    assert not missing, delivery_evidence(workdir, kafka_bootstrap, topic, missing)
    assert set(urls) == site.all_urls()
    assert [url for url, seen in urls.items() if seen > 1] == []
    return messages
