"""Files each node writes alone: feeds in cluster mode (``FEEDS``, ``-o``, ``-O``) and
``JOBDIR``. Two nodes given one path no longer write into it at once (``crawler.node_files``,
``crawler.feed_storage``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import orjson
import redis
from scrapy.settings import Settings
from scrapy.utils.misc import load_object

from crawler import node_files
from crawler.demo.site import Site
from crawler.feed_storage import NODE_STORAGE, lock_local_feeds, use_node_uri_params
from tests.cluster import logs, running_nodes, wait_for_exit


def crawl(
    site: Site, redis_url: str, workdir: Path, feed: str, **settings: str
) -> list[int | None]:
    """Two ``pages`` nodes, Kafka off, each with ``-O <feed>``; their exit codes."""
    with running_nodes(
        2,
        workdir=workdir,
        env={"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""},
        settings={
            "FEEDS": orjson.dumps({feed: {"format": "jsonlines", "overwrite": True}}).decode(),
            "CONCURRENT_REQUESTS": "2",
            "MAX_IDLE_TIME_BEFORE_CLOSE": "2",
            **settings,
        },
    ) as nodes:
        client = redis.Redis.from_url(redis_url)
        client.lpush("pages:start_urls", site.url(0))
        client.close()
        return wait_for_exit(nodes, timeout=120)


def urls_in(path: Path) -> list[str]:
    """The ``url`` of each line (each must be whole JSON)."""
    return [orjson.loads(line)["url"] for line in path.read_bytes().splitlines()]


def test_two_nodes_given_one_feed_file_do_not_write_into_it_at_once(
    redis_url: str, tmp_path: Path
) -> None:
    """Two nodes on one machine with the same ``-O`` path: each truncated it and wrote at its
    own offsets (32 whole lines of 62 and a broken one; the frontier had their pages done)."""
    feed = tmp_path / "items.jsonl"
    with Site(40, delay=0.05) as site:
        codes = crawl(site, redis_url, tmp_path / "nodes", str(feed))
        assert sorted(map(str, codes)) == ["0", "1"], logs(tmp_path / "nodes")
        assert sorted(urls_in(feed)) == sorted(site.all_urls())
    log = logs(tmp_path / "nodes", tail=0)
    assert log.count("is being written by another node") == 1, log
    assert "%(node_id)s" in log


def test_a_node_id_in_the_feed_path_gives_each_node_its_own_file(
    redis_url: str, tmp_path: Path
) -> None:
    with Site(40, delay=0.05) as site:
        feed = str(tmp_path / "items-%(node_id)s.jsonl")
        codes = crawl(site, redis_url, tmp_path / "nodes", feed)
        assert codes == [0, 0], logs(tmp_path / "nodes")
        files = sorted(tmp_path.glob("items-*.jsonl"))
        assert [path.name for path in files] == ["items-node-0.jsonl", "items-node-1.jsonl"]
        urls = [url for path in files for url in urls_in(path)]
        assert sorted(urls) == sorted(site.all_urls())


def test_two_nodes_given_one_job_dir_do_not_keep_their_state_there_at_once(
    redis_url: str, tmp_path: Path
) -> None:
    """Two nodes with one JOBDIR: the last to stop wrote its ``spider.state`` over the other's
    (``{'pages': 29}`` of 62), with no word."""
    feed = str(tmp_path / "items-%(node_id)s.jsonl")
    job_dir = tmp_path / "job"
    with Site(20, delay=0.05) as site:
        codes = crawl(site, redis_url, tmp_path / "nodes", feed, JOBDIR=str(job_dir))
    assert sorted(map(str, codes)) == ["0", "1"], logs(tmp_path / "nodes")
    log = logs(tmp_path / "nodes", tail=0)
    assert f"Not started: JOBDIR={job_dir} is used by another node" in log, log
    assert (job_dir / "spider.state").exists()


def own_params(params: dict[str, object], spider: object) -> dict[str, object]:
    return {**params, "shard": "7"}


OWN_PARAMS = f"{__name__}.own_params"


def test_a_project_s_own_uri_params_are_kept_with_the_node_id() -> None:
    settings = Settings({"FEED_URI_PARAMS": OWN_PARAMS, "CRAWLER_NODE_ID": "n-3"})
    use_node_uri_params(settings)
    spider = SimpleNamespace(crawler=SimpleNamespace(settings=settings))
    params = load_object(settings["FEED_URI_PARAMS"])({"name": "pages"}, spider)
    assert params == {"name": "pages", "shard": "7", "node_id": "n-3"}


def test_a_path_held_twice_is_let_go_at_its_last_release(tmp_path: Path) -> None:
    """Scrapy makes a feed's storage twice (its template's, to check the scheme, then the
    feed's own): one lock, let go when both are done."""
    path = tmp_path / "items.jsonl"
    assert node_files.hold(path) and node_files.hold(path)
    node_files.used(path)
    node_files.release(path)
    assert not other_process_holds(path)  # still this process's
    node_files.release(path)
    assert other_process_holds(path)
    assert path.exists()  # written: it stays


def test_a_file_the_lock_made_that_nothing_wrote_is_removed(tmp_path: Path) -> None:
    """A batch feed made the next batch's file as the last batch closed: an empty
    ``items-3.jsonl`` was left where Scrapy makes none (a review)."""
    made, kept = tmp_path / "made.jsonl", tmp_path / "kept.jsonl"
    kept.write_bytes(b"")
    for path in (made, kept):
        assert node_files.hold(path)
        node_files.release(path)
    assert not made.exists() and kept.exists()


def test_devices_are_not_locked(tmp_path: Path) -> None:
    """``-O /dev/null`` on two nodes of one machine: the second was refused (a review)."""
    assert node_files.hold(os.devnull)
    assert other_process_holds(os.devnull)
    node_files.release(os.devnull)


def other_process_holds(path: str | Path) -> bool:
    """Whether another process can take ``path``'s lock now (it lets go at once)."""
    code = (
        "import sys; from crawler import node_files; "
        "sys.exit(0 if node_files.hold(sys.argv[1]) else 1)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], check=False, timeout=60)
    return done.returncode == 0


def test_a_project_s_storage_for_another_scheme_keeps_the_lock_on_local_files() -> None:
    """``FEED_STORAGES = {"sftp": ...}`` in a project replaced the add-on's whole dict: local
    feeds went through Scrapy's storage, unlocked (a review)."""
    settings = Settings()
    theirs = {"sftp": "theirs.SftpStorage", "file": "theirs.FileStorage"}
    settings.set("FEED_STORAGES", theirs, priority="project")
    lock_local_feeds(settings)
    storages = settings.getwithbase("FEED_STORAGES")
    assert (storages[""], storages["file"], storages["sftp"]) == (
        NODE_STORAGE,
        "theirs.FileStorage",
        "theirs.SftpStorage",
    )


def test_a_batch_feed_leaves_no_file_for_a_batch_that_got_no_item(
    redis_url: str, tmp_path: Path
) -> None:
    feed = str(tmp_path / "items-%(batch_id)d.jsonl")
    batches = {feed: {"format": "jsonlines", "batch_item_count": 2}}
    with Site(4, delay=0.05) as site:
        env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
        settings = {"FEEDS": orjson.dumps(batches).decode(), "MAX_IDLE_TIME_BEFORE_CLOSE": "2"}
        with running_nodes(1, workdir=tmp_path / "node", env=env, settings=settings) as nodes:
            client = redis.Redis.from_url(redis_url)
            client.lpush("pages:start_urls", site.url(0))
            client.close()
            assert wait_for_exit(nodes, timeout=60) == [0], logs(tmp_path / "node")
        files = sorted(path.name for path in tmp_path.glob("items-*.jsonl"))
        assert files == ["items-1.jsonl", "items-2.jsonl"]
        assert sorted(urls_in(tmp_path / files[0]) + urls_in(tmp_path / files[1])) == sorted(
            site.all_urls()
        )


def test_a_node_started_later_does_not_write_over_another_s_stored_batches(
    redis_url: str, tmp_path: Path
) -> None:
    """A batch's lock was let go when it was stored: a node started 8 s later with the same
    ``%(batch_id)d`` path wrote over the first node's first batches (10 items lost, an audit)."""
    feed = str(tmp_path / "b-%(batch_id)d.jsonl")
    batches = orjson.dumps({feed: {"format": "jsonlines", "batch_item_count": 3}}).decode()
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
    settings = {"FEEDS": batches, "MAX_IDLE_TIME_BEFORE_CLOSE": "2", "CONCURRENT_REQUESTS": "1"}
    with Site(20, delay=0.2) as site:
        with running_nodes(1, workdir=tmp_path / "first", env=env, settings=settings) as first:
            client = redis.Redis.from_url(redis_url)
            client.lpush("pages:start_urls", site.url(0))
            client.close()
            while not (tmp_path / "b-2.jsonl").exists():
                assert first[0].poll() is None, logs(tmp_path / "first")
                time.sleep(0.1)
            other = {**settings, "CRAWLER_NODE_ID": "later"}
            with running_nodes(1, workdir=tmp_path / "later", env=env, settings=other) as later:
                assert wait_for_exit(later, timeout=60) == [1], logs(tmp_path / "later")
            assert wait_for_exit(first, timeout=120) == [0], logs(tmp_path / "first")
        urls = [url for path in tmp_path.glob("b-*.jsonl") for url in urls_in(path)]
        assert sorted(urls) == sorted(site.all_urls())
    assert "is being written by another node" in logs(tmp_path / "later", tail=0)


def test_a_feed_s_own_uri_params_get_the_node_id_too() -> None:
    """A feed's own ``uri_params`` replaced FEED_URI_PARAMS: ``KeyError: 'node_id'`` on the
    signal, no feed written at all (its neighbour's neither), exit 0 (an audit)."""
    feeds = {
        "out/f-%(shard)s-%(node_id)s.jsonl": {"format": "jsonlines", "uri_params": OWN_PARAMS},
        "out/g-%(node_id)s.csv": {"format": "csv"},
    }
    settings = Settings({"FEEDS": feeds, "CRAWLER_NODE_ID": "n-3"})
    use_node_uri_params(settings)
    spider = SimpleNamespace(crawler=SimpleNamespace(settings=settings))
    options = settings.getdict("FEEDS")["out/f-%(shard)s-%(node_id)s.jsonl"]
    params = load_object(options["uri_params"])({"name": "pages"}, spider)
    assert params == {"name": "pages", "shard": "7", "node_id": "n-3"}
    use_node_uri_params(settings)  # wrapped once
    assert settings.getdict("FEEDS")["out/f-%(shard)s-%(node_id)s.jsonl"] == options
