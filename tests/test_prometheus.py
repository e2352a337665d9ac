"""Alert rules and the dashboard against real Prometheus tools (Debian's ``prometheus``).

``promtool`` checks the rules and the configuration and runs the rules' unit tests (one per
alert). Then Debian's Prometheus server scrapes a live ``scrapy crawl pages`` node crawling
a local site, and every metric the dashboard and the rules query is found through
Prometheus's HTTP API, with the type docs/metrics.md gives it; every rule evaluates.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from crawler.demo.site import Site
from crawler.devservices import free_port
from tests.cluster import logs, running_nodes, wait_for_log
from tests.services import unavailable

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
ALERT_TESTS = ROOT / "tests" / "prometheus" / "alerts_test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "crawler.json"
METRIC_NAME = re.compile(r"\b((?:crawler|process)_[a-z_]+)\b")
METRICS_LINE = re.compile(r"Metrics on http://[^:]+:(\d+)/metrics")
# Families whose samples only come with their first label value (a failure's reason, a
# session's health, a pipeline's exception): Prometheus knows them from their HELP and TYPE
# lines until then.
ON_OCCURRENCE = {
    "crawler_kafka_failed_total",
    "crawler_sessions",
    "crawler_item_errors_total",
    "crawler_redis_clock_steps_total",
}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} is not installed (Debian's prometheus package; make setup)")
    return path


def promtool(*args: str) -> str:
    result = subprocess.run(
        [tool("promtool"), *args], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def alert_names() -> list[str]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"]]


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def rule_queries() -> list[str]:
    groups = yaml.safe_load(ALERTS.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def queried_metrics() -> set[str]:
    return {
        name
        for query in dashboard_queries() + rule_queries()
        for name in METRIC_NAME.findall(query)
    }


# --------------------------------------------------------------------------- promtool


def test_rules_and_config_pass_promtool_check() -> None:
    assert "SUCCESS: 12 rules found" in promtool("check", "rules", str(ALERTS))
    assert "SUCCESS: 1 rule files found" in promtool("check", "config", str(CONFIG))


def test_alert_unit_tests_pass() -> None:
    assert "SUCCESS" in promtool("test", "rules", str(ALERT_TESTS))


def test_every_alert_has_a_unit_test_that_fires_it() -> None:
    tests = yaml.safe_load(ALERT_TESTS.read_text())["tests"]
    fired = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    quiet = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if not case["exp_alerts"]
    }
    names = alert_names()
    assert len(names) == 12
    assert fired == quiet == set(names)


def test_dashboard_panels_cover_the_issue() -> None:
    titles = [panel["title"] for panel in json.loads(DASHBOARD.read_text())["panels"]]
    for wanted in (
        "Pages per minute",
        "Items delivered",
        "Kafka failures",
        "Kafka spool",
        "Queue depth",
        "Leases",
        "Live nodes",
        "Politeness waits",
        "Cooldowns",
        "Sessions by health",
        "Dead letters",
    ):
        assert any(title.startswith(wanted) for title in titles), (wanted, titles)


def test_dashboard_is_provisioned_with_its_datasource() -> None:
    provisioning = ROOT / "deploy" / "grafana" / "provisioning"
    providers = yaml.safe_load((provisioning / "dashboards" / "crawler.yml").read_text())
    [provider] = providers["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    sources = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    [source] = sources["datasources"]
    assert (source["type"], source["url"]) == ("prometheus", "http://prometheus:9090")
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    used = {panel["datasource"]["uid"] for panel in panels}
    used |= {target["datasource"]["uid"] for panel in panels for target in panel["targets"]}
    assert used == {source["uid"]}


# --------------------------------------------------------------------------- a live node


def api(base: str, path: str, **params: str) -> Any:
    url = f"http://{base}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.loads(response.read())
    assert body["status"] == "success", body
    return body["data"]


def query(base: str, expression: str) -> list[dict[str, Any]]:
    data = api(base, "/api/v1/query", query=expression)
    result: list[dict[str, Any]] = data["result"]
    return result


@contextlib.contextmanager
def prometheus(workdir: Path, target: str) -> Iterator[str]:
    """Debian's Prometheus scraping ``target`` every second, with the alert rules; yields
    its ``host:port``."""
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "crawler", "static_configs": [{"targets": [target]}]}],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            tool("prometheus"),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://{base}/-/ready", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail((workdir / "prometheus.log").read_text()[-3000:])
                time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}")


def test_prometheus_scrapes_every_metric_the_dashboard_and_rules_query(
    redis_url: str,
    redis_client: redis.Redis,
    kafka_bootstrap: str,
    topic_template: str,
    tmp_path: Path,
) -> None:
    env = {"REDIS_URL": redis_url, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    settings = {
        "METRICS_PORTS": "0",
        "KAFKA_TOPIC_TEMPLATE": topic_template,
        "POLITENESS_RATE": "50",  # some requests wait for their slot
        "POLITENESS_COOLDOWN": "2",
    }
    # One page answers 429 once: a cooldown, counted, retried.
    answer_once = {"/p/7.html": (429, {"Retry-After": "1"})}
    with (
        Site(120, delay=0.01, answer_once=answer_once) as site,
        running_nodes(1, workdir=tmp_path, env=env, settings=settings) as nodes,
    ):
        node_log = tmp_path / "node-0.log"
        assert wait_for_log(node_log, "Metrics on http", timeout=60), logs(tmp_path)
        match = METRICS_LINE.search(node_log.read_text())
        assert match, logs(tmp_path)
        with prometheus(tmp_path, f"127.0.0.1:{match.group(1)}") as base:
            redis_client.lpush("pages:start_urls", site.url(0))

            def crawled() -> bool:
                found = query(base, "sum(crawler_pages_total)")
                return bool(found) and float(found[0]["value"][1]) >= site.pages

            wait_for(crawled, 120, f"{site.pages} pages in Prometheus\n{logs(tmp_path)}")
            time.sleep(3)  # a few more scrapes: rates over settled counters
            assert nodes[0].poll() is None, logs(tmp_path)
            health = f"http://127.0.0.1:{match.group(1)}/healthz"
            with urllib.request.urlopen(health, timeout=10) as response:
                assert json.loads(response.read()) == {"redis": "ok", "kafka": "ok"}

            metadata = api(base, "/api/v1/targets/metadata", match_target='{job="crawler"}')
            types = {entry["metric"]: entry["type"] for entry in metadata}
            assert "unknown" not in types.values(), types
            for name in sorted(queried_metrics()):
                family = re.sub(r"_(bucket|count|sum)$", "", name)
                family_type = types.get(family) or types.get(name.removesuffix("_total"))
                assert family_type, (name, sorted(types))
                if name in ON_OCCURRENCE:
                    continue
                assert query(base, name), f"{name} has no samples in Prometheus"
            assert types["crawler_download_latency_seconds"] == "histogram"
            assert types["crawler_queue_depth"] == "gauge"

            for expression in dashboard_queries():
                query(base, expression.replace("$__rate_interval", "30s"))  # valid PromQL
            cooling = query(base, "crawler_politeness_cooldown_seconds")
            assert [s["metric"]["site"] for s in cooling] == [site.base_url.split("//")[1]], cooling
            assert query(base, 'crawler_politeness_cooldowns_total{reason="429"}')
            rules = api(base, "/api/v1/rules")["groups"][0]["rules"]
            assert sorted(rule["name"] for rule in rules) == sorted(alert_names())
            assert {rule["health"] for rule in rules} == {"ok"}, rules
            assert {rule["state"] for rule in rules} == {"inactive"}, rules  # a healthy crawl
    text = node_log.read_text()
    assert not re.search(r"^%\d\|", text, re.MULTILINE), text[-3000:]  # no raw librdkafka line
