"""A node id Redis records cannot carry (a TAB broke every heartbeat) is refused at start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from crawler.demo.nodes import REPO_ROOT
from crawler.node import resolve_node_id


@pytest.mark.parametrize("given", ["node-1", "n7", "host.example.com-4242", "pod@zone:a_1"])
def test_node_ids_that_records_can_carry(given: str) -> None:
    assert resolve_node_id(f" {given} ") == given


def test_an_empty_node_id_is_the_host_and_pid() -> None:
    assert resolve_node_id("").endswith(f"-{os.getpid()}")


@pytest.mark.parametrize("given", ["a\tb", "a\nb", "a b", "x" * 129, "节点"])
def test_node_ids_that_would_break_records_are_refused(given: str) -> None:
    with pytest.raises(ValueError, match=r"CRAWLER_NODE_ID=.* must be 1 to 128 letters"):
        resolve_node_id(given)


def test_a_node_with_a_tab_in_its_id_does_not_start(redis_url: str) -> None:
    env = {**os.environ, "CRAWLER_NODE_ID": "a\tb", "REDIS_URL": redis_url}
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "crawl", "pages", "-s", "BROWSER_ENABLED=False"],
        cwd=REPO_ROOT,
        env={**env, "KAFKA_BOOTSTRAP_SERVERS": ""},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "CRAWLER_NODE_ID='a\\tb' must be 1 to 128 letters" in done.stderr
