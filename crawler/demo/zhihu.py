"""``python -m crawler.demo.zhihu`` (``make demo-zhihu``): the zhihu spider on 2 nodes, locally.

Starts the local Zhihu mock (``tests/zhihu_mock``: there is no internet here),
Redis and Kafka (or uses ``REDIS_URL`` / ``KAFKA_BOOTSTRAP_SERVERS``), two
``scrapy crawl zhihu`` nodes, seeds a question, a person and a search, waits
until the crawl is done and prints what reached each Kafka topic. One account
logs in once for both nodes through the shared session store.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

from crawler.demo.nodes import start_node, stop_node, wait_for_exit
from crawler.demo.run import say, services
from crawler.kafka.reader import read_topic
from crawler.redis_connection import sync_client
from tests.zhihu_mock import DataConfig, MockConfig, QuestionSpec, ZhihuMock

ITEM_TYPES = ("zhihu_content", "zhihu_comment", "zhihu_creator", "zhihu_question", "zhihu_list")
ACCOUNT, PASSWORD = "tester", "secret-密码-1"  # the mock's demo account
KEYWORD = "Python"


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="crawler-demo-zhihu-"))
    topics = f"demo-{uuid.uuid4().hex[:6]}-{{spider}}-{{item_type}}"
    data = DataConfig(seed=1, questions=(QuestionSpec(100, 600),), people=8, articles=3)
    started = time.monotonic()
    with (
        services(workdir) as (redis_url, bootstrap),
        ZhihuMock(MockConfig(data=data, rate_limit=60)) as mock,
    ):
        base = mock.base_url
        say(f"Zhihu mock {base} | Redis {redis_url} | Kafka {bootstrap}")
        settings = {
            "ZHIHU_WWW_URL": base,
            "ZHIHU_ZHUANLAN_URL": base,
            "ZHIHU_API_URL": f"{base}/api/v4",
            "ZHIHU_ACCOUNTS": ACCOUNT,
            "KAFKA_TOPIC_TEMPLATE": topics,
            "POLITENESS_RATE": "50",  # below the mock's 60 req/s anti-bot limit
            "POLITENESS_BURST": "5",
            "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
        }
        env = {
            "REDIS_URL": redis_url,
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            f"ZHIHU_PASSWORD_{ACCOUNT.upper()}": PASSWORD,
        }
        nodes = [
            start_node(
                "zhihu",
                env=env,
                settings=settings,
                log_path=workdir / f"node-{i}.log",
                node_id=f"zhihu-demo-{i}",
            )
            for i in range(2)
        ]
        try:
            question = next(iter(mock.data.questions))
            person = next(iter(mock.data.people))
            client = sync_client(redis_url)
            client.lpush(
                "zhihu:start_urls",
                f"{base}/question/{question}",
                f"{base}/people/{person}",
                orjson.dumps({"keyword": KEYWORD, "type": "search"}),
            )
            client.close()
            say("Started 2 zhihu nodes; seeded a question, a person and a search")
            codes = wait_for_exit(nodes, timeout=300)
        finally:
            codes = [stop_node(node) for node in nodes]
        found = {
            item_type: read_topic(bootstrap, topics.format(spider="zhihu", item_type=item_type))
            for item_type in ITEM_TYPES
        }
        say("")
        say("Summary")
        for item_type, messages in found.items():
            say(f"  {topics.format(spider='zhihu', item_type=item_type):<40} {len(messages)} items")
        say(f"  logins seen by the site:  {dict(mock.counters.logins)}")
        say(f"  40362 (rate-limit) errors: {mock.counters.errors.get(40362, 0)}")
        say(f"  requests to the site:     {sum(mock.counters.requests.values())}")
        say(f"  whole demo:               {time.monotonic() - started:.1f}s (logs {workdir})")
        for item_type in ("zhihu_content", "zhihu_comment"):
            if found[item_type]:
                say(f"  one {item_type}: {found[item_type][0].value.decode()[:300]}")
    ok = codes == [0, 0] and all(found.values()) and sum(mock.counters.logins.values()) == 1
    if not ok:
        say(f"DEMO FAILED: exit codes {codes}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
