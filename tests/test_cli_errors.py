"""``crawler`` and ``scrapy purge`` where an operator's script meets them: no answer on stdin,
no Redis, a setting refused. A message saying what to do and exit 1, never a traceback."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest
import redis

from crawler.demo.nodes import REPO_ROOT
from tests.cli_process import crawler_process


def refused(result: subprocess.CompletedProcess[str]) -> None:
    """Exit 1 with a message, not a traceback."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def scrapy_purge(redis_url: str, *options: str) -> subprocess.CompletedProcess[str]:
    """``scrapy purge pages`` with ``options``, stdin at its end (no answer to a question)."""
    return subprocess.run(
        [sys.executable, "-m", "scrapy", "purge", "pages", *options],
        cwd=REPO_ROOT,
        env={"REDIS_URL": redis_url, "PATH": "/usr/bin:/bin"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


# -- questions with stdin at its end (</dev/null, a script, cron) ----------------------------


def test_purge_without_an_answer_is_not_purged(redis_url: str, redis_client: redis.Redis) -> None:
    redis_client.lpush("pages:start_urls", "http://example.invalid/")
    result = crawler_process("purge", "pages", "--redis", redis_url)
    refused(result)
    assert "Type the spider name to confirm:" in result.stdout
    assert result.stdout.endswith("Not purged.\n"), result.stdout
    assert redis_client.exists("pages:start_urls")


def test_purge_json_without_an_answer_keeps_stdout_for_json(
    redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.lpush("pages:start_urls", "http://example.invalid/")
    result = crawler_process("purge", "pages", "--redis", redis_url, "--json")
    refused(result)
    assert result.stdout == ""
    assert "Type the spider name to confirm:" in result.stderr
    assert result.stderr.endswith("Not purged.\n"), result.stderr
    assert redis_client.exists("pages:start_urls")


def test_scrapy_purge_without_an_answer_is_not_purged(
    redis_url: str, redis_client: redis.Redis
) -> None:
    redis_client.lpush("pages:start_urls", "http://example.invalid/")
    result = scrapy_purge(redis_url)
    refused(result)
    assert result.stdout.endswith("Not purged.\n"), result.stdout
    assert redis_client.exists("pages:start_urls")


@pytest.mark.parametrize("unusable", ["no_answer", "no_such_database"])
def test_scrapy_purge_of_a_redis_it_cannot_use_is_one_line(redis_url: str, unusable: str) -> None:
    """`scrapy purge` printed a 63-line traceback when Redis did not answer, and another for
    ``/99`` (DB index is out of range), where `crawler purge` says one line (an audit)."""
    url = (
        "redis://127.0.0.1:1/0" if unusable == "no_answer" else redis_url.rsplit("/", 1)[0] + "/99"
    )
    result = scrapy_purge(url, "--yes")
    refused(result)
    assert result.stderr.startswith("Not purged: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_failed_drop_json_asks_and_refuses_on_stderr(
    redis_url: str, redis_client: redis.Redis
) -> None:
    record = {"reason": "spider/x", "node": "n", "at": 1.0, "request": {"url": "http://a.test/"}}
    redis_client.hset("{pages}:failed", "1", orjson.dumps(record))
    result = crawler_process("failed", "pages", "drop", "--redis", redis_url, "--json")
    refused(result)
    assert result.stdout == ""
    assert "Drop 1 failed requests of 'pages'?" in result.stderr
    assert result.stderr.endswith("Not dropped.\n"), result.stderr
    assert redis_client.hlen("{pages}:failed") == 1


# -- Redis not answering ----------------------------------------------------------------------

NO_REDIS = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.mark.parametrize(
    "command",
    [
        ("list", "zhihu"),
        ("invalidate", "zhihu", "alice"),
        ("import", "zhihu", "alice", "--cookie-header", "z_c0=1", "--domain", ".zhihu.com"),
    ],
)
def test_sessions_say_redis_does_not_answer(command: tuple[str, ...]) -> None:
    result = crawler_process("sessions", *command, "--redis", NO_REDIS)
    refused(result)
    assert f"Redis at {NO_REDIS} does not answer" in result.stderr, result.stderr


# -- a setting refused --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value", "command"),
    [
        ("SEEDS_ALLOWED_META", '["_x"]', ("seed", "pages", "http://a.test/")),
        ("SEEDS_BATCH_SIZE", "0", ("seed", "pages", "http://a.test/")),
        ("FRONTIER_HEARTBEAT_INTERVAL", "abc", ("seed", "pages", "--recrawl", "http://a.test/")),
        ("FRONTIER_QUEUE_MAX", "abc", ("purge", "pages", "--yes")),
        ("KAFKA_PRODUCER_CONFIG", "abc", ("purge", "pages", "--yes")),
        ("FRONTIER_LEASE_TIMEOUT", "abc", ("leases", "pages")),
        ("FRONTIER_LEASE_TIMEOUT", "abc", ("status", "pages")),
        ("FRONTIER_HEARTBEAT_INTERVAL", "abc", ("requeue", "pages")),
        ("FRONTIER_COMPRESS", "maybe", ("failed", "pages", "retry")),
        ("SESSIONS_TTL", "abc", ("sessions", "list", "zhihu")),
    ],
)
def test_a_refused_setting_is_named_not_a_traceback(
    redis_url: str, setting: str, value: str, command: tuple[str, ...]
) -> None:
    result = crawler_process(
        *command, "--redis", redis_url, env={f"CRAWLER_SETTING_{setting}": value}
    )
    refused(result)
    assert f"crawler {command[0]}" in result.stderr, result.stderr
    assert setting in result.stderr, result.stderr


def scrapy_process(arguments: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``scrapy <arguments>`` in the project, with ``env`` and nothing else of the caller's."""
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *arguments],
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_scrapy_purge_names_a_refused_setting(redis_url: str) -> None:
    result = scrapy_process(
        ["purge", "pages", "--yes"],
        {"REDIS_URL": redis_url, "CRAWLER_SETTING_FRONTIER_QUEUE_MAX": "x"},
    )
    assert result.returncode == 2, result.stdout + result.stderr  # Scrapy's usage error
    assert "Traceback" not in result.stderr, result.stderr
    assert "FRONTIER_QUEUE_MAX='x' is not an integer" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        (
            "ITEM_PIPELINES",
            '{"tests.test_component_orders.Tags": 950}',
            "ITEM_PIPELINES puts tests.test_component_orders.Tags at 950, after KafkaPipeline",
        ),
        ("FRONTIER_QUEUE_MAX", "x", "FRONTIER_QUEUE_MAX='x' is not an integer"),
    ],
)
def test_scrapy_crawl_names_a_refused_setting_in_one_line(
    redis_url: str, setting: str, value: str, message: str
) -> None:
    """Refused at start by the add-on or by a component: exit 1 and the reason, no asyncio
    'Task exception was never retrieved' and its traceback."""
    result = scrapy_process(
        ["crawl", "pages", "-s", f"{setting}={value}"],
        {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "METRICS_PORT": "0"},
    )
    refused(result)
    assert "never retrieved" not in result.stderr, result.stderr
    assert f"ERROR: Not started: {message}" in result.stderr, result.stderr


@pytest.mark.parametrize("command", [("-m", "crawler", "status"), ("-m", "scrapy", "list")])
def test_an_unknown_profile_is_one_line_not_a_traceback(command: tuple[str, ...]) -> None:
    result = subprocess.run(
        [sys.executable, *command],
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "CRAWLER_PROFILE": "zzz"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    refused(result)
    assert "CRAWLER_PROFILE='zzz' is not a profile; choose one of ['dev', 'prod']" in result.stderr


# -- a file that cannot be read -----------------------------------------------------------------


@pytest.mark.parametrize("where", ["missing.txt", "."])
def test_a_seed_file_that_cannot_be_read_is_named_not_a_traceback(
    redis_url: str, tmp_path: Path, where: str
) -> None:
    path = f"{tmp_path}/{where}"
    result = crawler_process("seed", "pages", "--file", path, "--redis", redis_url)
    refused(result)
    assert f"crawler seed: cannot read {path}:" in result.stderr, result.stderr


def test_seeds_reach_the_redis_that_redis_host_and_port_name(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A scrapy-redis project's REDIS_HOST / REDIS_PORT (no REDIS_URL): `crawler seed` stopped
    with "REDIS_URL and REDIS_HOST, REDIS_PORT are both given", a REDIS_URL the user never gave
    (its own, folded from them), also with --redis (an audit)."""
    where = urlsplit(redis_url)
    env = {
        "CRAWLER_SETTING_REDIS_HOST": str(where.hostname),
        "CRAWLER_SETTING_REDIS_PORT": str(where.port),
        "CRAWLER_SETTING_REDIS_PARAMS": orjson.dumps(
            {"db": int(where.path.strip("/") or 0)}
        ).decode(),
    }
    seed = f"http://hostport.test/{uuid.uuid4().hex}"
    try:
        for extra in ((), ("--redis", redis_url)):
            result = crawler_process("seed", "pages", seed, *extra, env=env)
            assert result.returncode == 0, result.stdout + result.stderr
        assert redis_client.lrange("pages:start_urls", 0, -1).count(seed.encode()) == 2
    finally:
        redis_client.lrem("pages:start_urls", 0, seed)


def test_a_url_of_another_topology_is_named_not_answered_wrongly(redis_cluster_url: str) -> None:
    """``--redis redis://<a cluster node>``: status said "No spider state in this Redis
    database." (exit 0) while the cluster held live crawls; seed, purge and queue printed a
    MovedError traceback (an audit)."""
    host = redis_cluster_url.split("://", 1)[1].split(",", 1)[0].split("/", 1)[0]
    for command in (("status",), ("queue", "pages"), ("seed", "pages", "http://a.test/")):
        result = crawler_process(*command, "--redis", f"redis://{host}/0")
        refused(result)
        assert "names one server, but it is a node of a Redis Cluster" in result.stderr
    # a database other than 0 is no reason to miss it (a Cluster node has no SELECT)
    result = crawler_process("status", "--redis", f"redis://{host}/3")
    assert "names one server, but it is a node of a Redis Cluster" in result.stderr


def test_a_redis_error_after_the_first_answer_is_one_line(
    redis_url: str, redis_client: redis.Redis
) -> None:
    """A master lost mid-command (between the check and a later call) printed a traceback."""
    redis_client.set("{pages}:queue:levels", "not a sorted set")  # every read of it fails
    result = crawler_process("queue", "pages", "--redis", redis_url)
    refused(result)
    assert "crawler queue: Redis failed: ResponseError: WRONGTYPE" in result.stderr
