"""End to end: three nodes share one Redis and deliver every page to Kafka exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import orjson
import redis

from crawler.demo.site import Site, page_title
from crawler.kafka.messages import item_key
from crawler.kafka.reader import read_topic
from tests.cluster import delivery_evidence, logs, running_nodes, tracebacks, wait_for_exit


def test_three_nodes_deliver_every_page_once(
    redis_url: str,
    redis_client: redis.Redis,
    kafka_bootstrap: str,
    topic_template: str,
    site_500: Site,
    tmp_path: Path,
) -> None:
    topic = topic_template.format(spider="pages")
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    settings = {
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "MAX_IDLE_TIME_BEFORE_CLOSE": "3",
        # librdkafka's idempotence log (producer ids, at DEBUG): evidence if a page goes missing
        "KAFKA_PRODUCER_CONFIG": '{"debug": "eos"}',
        "LOG_LEVEL": "DEBUG",
    }
    with running_nodes(3, workdir=tmp_path, env=env, settings=settings) as nodes:
        redis_client.lpush("pages:start_urls", site_500.url(0))
        codes = wait_for_exit(nodes, timeout=240)
    assert codes == [0, 0, 0], logs(tmp_path)
    assert tracebacks(tmp_path) == [], logs(tmp_path)

    messages = read_topic(kafka_bootstrap, topic, expected=site_500.pages, timeout=60)
    urls = Counter(orjson.loads(message.value)["url"] for message in messages)
    missing = site_500.all_urls() - set(urls)
    assert not missing, delivery_evidence(tmp_path, kafka_bootstrap, topic, missing)
    assert set(urls) == site_500.all_urls()
    assert [url for url, seen in urls.items() if seen > 1] == []

    by_url = {orjson.loads(m.value)["url"]: m for m in messages}
    for index in (0, 7, 499):
        message = by_url[site_500.url(index)]
        expected_title = orjson.dumps(page_title(index))
        assert expected_title in message.value  # UTF-8 bytes as they are, not \u escapes
        assert orjson.loads(message.value)["title"] == page_title(index)
        assert message.key == item_key("page", site_500.url(index))
        assert message.headers["spider"] == b"pages"
        assert message.headers["item_type"] == b"page"
        assert message.headers["node_id"] in {b"node-0", b"node-1", b"node-2"}
    # Every node pulled work from the shared frontier.
    assert len({m.headers["node_id"] for m in messages}) == 3
    # The shared state outlives the nodes: nothing wiped it at close; nothing is left leased.
    assert redis_client.scard("{pages}:dupefilter:exact") == site_500.pages
    assert redis_client.zcard("{pages}:leases") == 0
    assert redis_client.get("{pages}:queue:count") == b"0"
