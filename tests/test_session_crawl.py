"""Three nodes crawl pages behind a login: one login serves all, and one again after expiry."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import redis

from tests.cluster import logs, running_nodes, wait_for_exit, wait_for_log
from tests.login_site import LoginSite
from tests.services import unavailable

MEMBERS = 120


def test_one_login_serves_every_node_and_one_relogin_after_expiry(
    redis_url: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    if shutil.which("chromium") is None:
        unavailable("/usr/bin/chromium is not installed (Debian package chromium)")
    with LoginSite({"alice": "s3cret-pw"}, members=MEMBERS) as site:
        env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": ""}
        settings = {
            "SPIDER_MODULES": "crawler.spiders,tests.spiders",
            "TEST_LOGIN_URL": f"{site.base_url}/login",
            "TEST_LOGIN_PASSWORD": "s3cret-pw",
            "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
            "POLITENESS_RATE": "40",
            "POLITENESS_BURST": "5",
            "CRAWLER_STANDALONE_FEED": "",
        }
        with running_nodes(
            3, workdir=tmp_path, env=env, settings=settings, spider="members"
        ) as nodes:
            for index in range(3):  # a node still starting when the crawl ends would use no session
                assert wait_for_log(tmp_path / f"node-{index}.log", "Reading seeds", 60), logs(
                    tmp_path
                )
            redis_client.lpush("members:start_urls", f"{site.base_url}/members/0")
            deadline = time.monotonic() + 120
            while sum(site.member_hits.values()) < MEMBERS // 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert site.logins == 1
            site.expire_all()  # every node's next request is refused: the session expired
            assert wait_for_exit(nodes, timeout=240) == [0, 0, 0], logs(tmp_path)
        assert site.logins == 2  # one login for the cluster, one re-login after expiry
        assert set(site.member_hits) == {f"/members/{n}" for n in range(MEMBERS)}
    texts = [(tmp_path / f"node-{i}.log").read_text() for i in range(3)]
    assert all("'sessions/used'" in text for text in texts)  # every node used the shared login
    text = "".join(texts)
    assert "'sessions/marked/expired'" in text
    assert "s3cret-pw" not in text  # no secret in any log
