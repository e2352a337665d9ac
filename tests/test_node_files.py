"""Files each node writes alone: feeds in cluster mode (``FEEDS``, ``-o``, ``-O``) and
``JOBDIR``. Two nodes given one path no longer write into it at once (``crawler.node_files``,
``crawler.feed_storage``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import orjson
import redis
from scrapy.settings import Settings
from scrapy.utils.misc import load_object

from crawler.demo.site import Site
from crawler.feed_storage import use_node_uri_params
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


def test_a_project_s_own_uri_params_are_kept_with_the_node_id() -> None:
    settings = Settings({"FEED_URI_PARAMS": f"{__name__}.own_params", "CRAWLER_NODE_ID": "n-3"})
    use_node_uri_params(settings)
    spider = SimpleNamespace(crawler=SimpleNamespace(settings=settings))
    params = load_object(settings["FEED_URI_PARAMS"])({"name": "pages"}, spider)
    assert params == {"name": "pages", "shard": "7", "node_id": "n-3"}
