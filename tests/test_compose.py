"""Static coherence checks for docker-compose.yml, Dockerfile and .dockerignore.

Nothing here talks to a Docker engine: the files are parsed and cross-checked so that a
wrong host, port, listener or volume name is caught before anyone runs `docker compose up`.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.dockerfile import (
    dockerfile_args,
    exec_form,
    healthcheck_command,
    image_env,
    image_uid,
    image_user,
    image_volumes,
)
from tests.stop_budget import stop_budget

REPO_ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"

REDIS_PORT = 6379
BACKING_SERVICES = ("redis", "kafka")


# --------------------------------------------------------------------------- helpers


@functools.cache
def load_compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict), "docker-compose.yml must be a mapping"
    return data


def service(name: str) -> dict[str, Any]:
    services = load_compose().get("services") or {}
    assert name in services, f"service {name!r} missing from docker-compose.yml"
    svc = services[name]
    assert isinstance(svc, dict)
    return svc


def environment(name: str) -> dict[str, str]:
    """A service's environment as strings, from either the mapping or the list form."""
    env = service(name).get("environment") or {}
    if isinstance(env, list):
        pairs = (item.split("=", 1) for item in env)
        return {key: value for key, value in pairs}
    return {key: "" if value is None else str(value) for key, value in env.items()}


def env_var(name: str, key: str) -> str:
    env = environment(name)
    assert env.get(key), f"{name}: environment variable {key} is not set"
    return env[key]


def command_args(name: str) -> list[str]:
    command = service(name).get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(a) for a in command]


def option_value(args: list[str], option: str) -> str | None:
    """Value following `option` in an argv list (None when the option is absent)."""
    if option not in args:
        return None
    index = args.index(option)
    assert index + 1 < len(args), f"{option} has no value"
    return args[index + 1]


def hostnames(name: str) -> set[str]:
    """Names under which a service is reachable on the compose network."""
    names = {name}
    if hostname := service(name).get("hostname"):
        names.add(str(hostname))
    return names


def split_host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    assert sep and port.isdigit(), f"{address!r} is not host:port"
    return host, int(port)


def parse_listeners(value: str) -> dict[str, tuple[str, int]]:
    """`NAME://host:port,...` -> {NAME: (host, port)}; an empty host means all interfaces."""
    listeners: dict[str, tuple[str, int]] = {}
    for entry in filter(None, (part.strip() for part in value.split(","))):
        listener_name, sep, address = entry.partition("://")
        assert sep, f"listener {entry!r} is not NAME://host:port"
        listeners[listener_name] = split_host_port(address)
    return listeners


def parse_csv(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def parse_quorum_voters(value: str) -> dict[int, tuple[str, int]]:
    """`id@host:port,...` -> {id: (host, port)}."""
    voters: dict[int, tuple[str, int]] = {}
    for entry in parse_csv(value):
        node_id, sep, address = entry.partition("@")
        assert sep and node_id.isdigit(), f"quorum voter {entry!r} is not id@host:port"
        voters[int(node_id)] = split_host_port(address)
    return voters


def depends_on_conditions(name: str) -> dict[str, str]:
    """depends_on as {service: condition}; the list form means service_started."""
    depends_on = service(name).get("depends_on") or {}
    if isinstance(depends_on, list):
        return {dep: "service_started" for dep in depends_on}
    return {
        dep: (spec or {}).get("condition", "service_started") for dep, spec in depends_on.items()
    }


def publishes_fixed_host_port(port: str | int | dict[str, Any]) -> bool:
    """True when a `ports` entry binds a specific host port (which blocks scaling)."""
    if isinstance(port, dict):
        return bool(port.get("published"))
    # Short syntax: [HOST_IP:][HOST_PORT:]CONTAINER_PORT[/PROTOCOL]
    parts = str(port).split("/")[0].rsplit(":", 2)
    return len(parts) > 1 and bool(parts[-2])


def named_volume_mounts(svc: dict[str, Any]) -> dict[str, str]:
    """{target: volume name} for a service's named volumes (not binds or anonymous ones)."""
    mounts: dict[str, str] = {}
    for mount in svc.get("volumes") or []:
        if isinstance(mount, dict):
            if mount.get("type", "volume") == "volume" and mount.get("source"):
                mounts[str(mount["target"])] = str(mount["source"])
            continue
        source, sep, rest = str(mount).partition(":")
        if sep and not source.startswith(("/", ".", "~", "$")):
            mounts[rest.split(":")[0]] = source
    return mounts


def parse_duration_seconds(value: str | int) -> float:
    """Compose duration (`30s`, `1m30s`, `500ms`) in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    text = str(value)
    matches = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", text)
    assert matches and "".join(n + u for n, u in matches) == text, f"bad duration {value!r}"
    return sum(float(number) * units[unit] for number, unit in matches)


# --------------------------------------------------------------------------- compose


def test_compose_uses_the_spec_format_without_version() -> None:
    assert "version" not in load_compose(), "the Compose spec has no top-level version"


@pytest.mark.parametrize("name", ["redis", "kafka", "crawler"])
def test_service_exists(name: str) -> None:
    service(name)


def test_crawler_builds_from_repo_root_dockerfile() -> None:
    build = service("crawler").get("build")
    context = build.get("context", ".") if isinstance(build, dict) else build
    dockerfile = build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
    assert context in (".", "./"), f"crawler should build from the repo root, got {build!r}"
    assert (REPO_ROOT / dockerfile).is_file()


def test_crawler_is_scalable() -> None:
    crawler = service("crawler")
    assert "container_name" not in crawler, "container_name prevents --scale crawler=N"
    fixed = [p for p in crawler.get("ports") or [] if publishes_fixed_host_port(p)]
    assert not fixed, f"fixed host ports prevent --scale crawler=N: {fixed}"


@pytest.mark.parametrize("dependency", BACKING_SERVICES)
def test_crawler_waits_for_healthy_dependency(dependency: str) -> None:
    assert depends_on_conditions("crawler").get(dependency) == "service_healthy"
    healthcheck = service(dependency).get("healthcheck") or {}
    test = healthcheck.get("test")
    assert test and not healthcheck.get("disable"), f"{dependency} needs a healthcheck"
    assert test not in ("NONE", ["NONE"]), f"{dependency}'s healthcheck is disabled"


def test_kafka_healthcheck_allows_for_startup() -> None:
    healthcheck = service("kafka")["healthcheck"]
    assert parse_duration_seconds(healthcheck["start_period"]) > 0


def test_crawler_redis_url_points_at_redis_service() -> None:
    url = urlsplit(env_var("crawler", "REDIS_URL"))
    assert url.scheme in ("redis", "rediss")
    assert url.hostname in hostnames("redis")
    port = url.port or REDIS_PORT
    configured = option_value(command_args("redis"), "--port") or str(REDIS_PORT)
    assert port == int(configured) == REDIS_PORT


def test_crawler_kafka_bootstrap_matches_an_advertised_listener() -> None:
    advertised = parse_listeners(env_var("kafka", "KAFKA_ADVERTISED_LISTENERS"))
    controller_names = set(parse_csv(env_var("kafka", "KAFKA_CONTROLLER_LISTENER_NAMES")))
    client_endpoints = {
        address for name, address in advertised.items() if name not in controller_names
    }
    for server in parse_csv(env_var("crawler", "KAFKA_BOOTSTRAP_SERVERS")):
        host, port = split_host_port(server)
        assert host in hostnames("kafka"), f"{server} is not the kafka service"
        assert (host, port) in client_endpoints, f"{server} is not advertised by kafka"


def test_kafka_advertised_listeners_are_bound() -> None:
    listeners = parse_listeners(env_var("kafka", "KAFKA_LISTENERS"))
    advertised = parse_listeners(env_var("kafka", "KAFKA_ADVERTISED_LISTENERS"))
    for name, (_, port) in advertised.items():
        assert name in listeners, f"advertised listener {name} is not in KAFKA_LISTENERS"
        assert listeners[name][1] == port, f"listener {name} advertises a different port"


def test_kafka_listeners_have_security_protocols() -> None:
    protocol_map = dict(
        entry.split(":", 1)
        for entry in parse_csv(env_var("kafka", "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"))
    )
    for name in parse_listeners(env_var("kafka", "KAFKA_LISTENERS")):
        assert name in protocol_map, f"listener {name} has no security protocol"


def test_kafka_runs_kraft_combined_mode() -> None:
    roles = set(parse_csv(env_var("kafka", "KAFKA_PROCESS_ROLES")))
    assert roles == {"broker", "controller"}

    node_id = int(env_var("kafka", "KAFKA_NODE_ID"))
    voters = parse_quorum_voters(env_var("kafka", "KAFKA_CONTROLLER_QUORUM_VOTERS"))
    assert node_id in voters, "kafka's own node id must be a quorum voter"
    voter_host, voter_port = voters[node_id]
    assert voter_host in hostnames("kafka")

    listeners = parse_listeners(env_var("kafka", "KAFKA_LISTENERS"))
    controller_names = parse_csv(env_var("kafka", "KAFKA_CONTROLLER_LISTENER_NAMES"))
    controller_ports = {listeners[n][1] for n in controller_names if n in listeners}
    assert controller_ports, "no controller listener in KAFKA_LISTENERS"
    assert voter_port in controller_ports, "quorum voter port is not a controller listener"


@pytest.mark.parametrize(
    "key",
    [
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
    ],
)
def test_kafka_single_node_replication_factors(key: str) -> None:
    assert env_var("kafka", key) == "1"


def test_kafka_log_dirs_are_on_a_named_volume() -> None:
    log_dir = env_var("kafka", "KAFKA_LOG_DIRS")
    mounts = named_volume_mounts(service("kafka"))
    assert log_dir in mounts, f"{log_dir} is not on a named volume; data dies with the container"


def test_redis_persists_with_append_only_file() -> None:
    args = command_args("redis")
    assert option_value(args, "--appendonly") == "yes"
    data_dir = option_value(args, "--dir") or "/data"
    assert data_dir in named_volume_mounts(service("redis")), f"{data_dir} is not on a volume"


def test_named_volumes_are_declared() -> None:
    declared = set(load_compose().get("volumes") or {})
    for name, svc in (load_compose().get("services") or {}).items():
        missing = set(named_volume_mounts(svc).values()) - declared
        assert not missing, f"{name} uses undeclared volumes {sorted(missing)}"


def test_crawler_environment_and_lifecycle() -> None:
    crawler = service("crawler")
    assert environment("crawler").get("CRAWLER_PROFILE") == "prod"
    assert crawler.get("restart") == "unless-stopped"
    needed = stop_budget({k: str(v) for k, v in environment("crawler").items()})
    grace = parse_duration_seconds(crawler.get("stop_grace_period", "10s"))
    assert grace >= needed + 10, (grace, needed)
    command = command_args("crawler")
    assert not command or command[:2] == ["scrapy", "crawl"], command


def test_crawler_writable_paths_are_named_volumes() -> None:
    """The paths the image declares writable (spool with its dead-letter file, .scrapy)
    survive a container: each is a named volume of the crawler service."""
    from settings import base

    volumes = image_volumes()
    workdir = dockerfile_args("WORKDIR")[-1]
    assert str(Path(workdir) / base.KAFKA_SPOOL_DIR) in volumes, volumes
    assert str(Path(workdir) / ".scrapy") in volumes, volumes
    mounts = named_volume_mounts(service("crawler"))
    for path in volumes:
        assert path in mounts, f"{path} is a VOLUME of the image but no named volume in compose"


def test_crawler_runs_as_the_image_user() -> None:
    assert "user" not in service("crawler"), "the image's USER (crawler, uid 10001) must stay"
    assert image_user() == "crawler"
    assert image_uid("crawler") == 10001


def test_crawler_health_is_checked_on_healthz_at_its_metrics_port() -> None:
    assert "healthcheck" not in service("crawler"), "the image's HEALTHCHECK applies"
    urls = [urlsplit(arg) for arg in " ".join(healthcheck_command()).split("'") if "://" in arg]
    assert [(url.hostname, url.port, url.path) for url in urls] == [
        ("127.0.0.1", crawler_metrics_port(), "/healthz")
    ]
    env = image_env()
    assert env["CRAWLER_SETTING_METRICS_PORTS"] == str(crawler_metrics_port())
    # The container's interface; 127.0.0.1 outside containers.
    assert env["METRICS_HOST"] == "0.0.0.0"  # noqa: S104


# --------------------------------------------------------------------------- Dockerfile


def test_dockerfile_base_image_is_python_311_slim() -> None:
    assert dockerfile_args("FROM")[0].split()[0] == "python:3.11-slim"


def test_dockerfile_cmd_runs_scrapy_crawl() -> None:
    cmds = dockerfile_args("CMD")
    assert cmds, "Dockerfile has no CMD"
    assert exec_form(cmds[-1])[:2] == ["scrapy", "crawl"]


def test_dockerfile_runs_as_non_root() -> None:
    users = dockerfile_args("USER")
    assert users, "Dockerfile never switches away from root"
    assert users[-1].split(":")[0] not in ("root", "0")


def test_dockerfile_installs_the_project() -> None:
    copied = " ".join(dockerfile_args("COPY")).split()
    for source in ("pyproject.toml", "scrapy.cfg", "crawler", "settings"):
        assert source in copied, f"Dockerfile does not COPY {source}"
    assert any("pip install" in run for run in dockerfile_args("RUN"))
    assert dockerfile_args("WORKDIR")[-1] == "/app"
    assert any("CRAWLER_PROFILE=prod" in env for env in dockerfile_args("ENV"))


@pytest.mark.parametrize("pattern", [".git", ".venv", ".services"])
def test_dockerignore_excludes(pattern: str) -> None:
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    assert pattern in {line.strip() for line in lines}


# --------------------------------------------------------------------------- monitoring

PROMETHEUS_DIR = REPO_ROOT / "deploy" / "prometheus"
PROMETHEUS_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
PROMETHEUS_CONFIG_TARGET = "/etc/prometheus/prometheus.yml"
GRAFANA_MOUNTS = {  # target in the grafana container -> folder of this repository
    "/etc/grafana/provisioning": REPO_ROOT / "deploy" / "grafana" / "provisioning",
    "/var/lib/grafana/dashboards": REPO_ROOT / "deploy" / "grafana" / "dashboards",
}


def crawler_metrics_port() -> int:
    """The port a crawler node serves /metrics on: first of METRICS_PORTS (-s or default)."""
    from crawler.extensions.metrics import parse_port_range
    from settings import base

    configured = str(base.METRICS_PORTS)
    args = command_args("crawler")
    for index, arg in enumerate(args[:-1]):
        if arg == "-s" and args[index + 1].startswith("METRICS_PORTS="):
            configured = args[index + 1].split("=", 1)[1]
    first, last = parse_port_range(configured)
    assert first == last != 0, f"METRICS_PORTS={configured}: Prometheus needs one fixed port"
    return first


def bind_mounts(svc: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """{target: (source, read_only)} for a service's bind mounts (short or long syntax)."""
    mounts: dict[str, tuple[str, bool]] = {}
    for mount in svc.get("volumes") or []:
        if isinstance(mount, dict):
            if mount.get("type") == "bind":
                mounts[str(mount["target"])] = (str(mount["source"]), bool(mount.get("read_only")))
            continue
        source, _, rest = str(mount).partition(":")
        if source.startswith((".", "/")):
            target, _, mode = rest.partition(":")
            mounts[target] = (source, "ro" in mode.split(","))
    return mounts


@functools.cache
def prometheus_config() -> dict[str, Any]:
    data = yaml.safe_load(PROMETHEUS_CONFIG.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_prometheus_is_an_optional_monitoring_service() -> None:
    prometheus = service("prometheus")
    assert prometheus.get("profiles") == ["monitoring"]
    assert str(prometheus["image"]).startswith("prom/prometheus:")
    assert "profiles" not in service("crawler"), "crawler nodes must run without a profile"


def test_prometheus_config_and_rules_are_mounted_read_only() -> None:
    mounts = bind_mounts(service("prometheus"))
    target = str(Path(PROMETHEUS_CONFIG_TARGET).parent)
    assert target in mounts, mounts
    source, read_only = mounts[target]
    assert (REPO_ROOT / source).resolve() == PROMETHEUS_DIR
    assert read_only
    command = " ".join(command_args("prometheus"))
    assert not command or f"--config.file={PROMETHEUS_CONFIG_TARGET}" in command
    rule_files = prometheus_config().get("rule_files") or []
    assert "alerts.yml" in rule_files, rule_files
    for rule_file in rule_files:  # relative to the config file, in the mounted folder
        assert (PROMETHEUS_DIR / rule_file).is_file(), f"{rule_file} is not in {PROMETHEUS_DIR}"


def test_grafana_is_provisioned_from_the_repository() -> None:
    grafana = service("grafana")
    assert grafana.get("profiles") == ["monitoring"]
    assert str(grafana["image"]).startswith("grafana/grafana:")
    mounts = bind_mounts(grafana)
    for target, folder in GRAFANA_MOUNTS.items():
        assert target in mounts, f"grafana does not mount {target}"
        source, read_only = mounts[target]
        assert (REPO_ROOT / source).resolve() == folder
        assert read_only, f"{target} must be mounted read-only"
        assert folder.is_dir(), f"{folder} does not exist"
    assert "3000:3000" in [str(port) for port in grafana.get("ports") or []]


def test_prometheus_publishes_its_ui_port() -> None:
    assert "9090:9090" in [str(port) for port in service("prometheus").get("ports") or []]


def test_prometheus_scrapes_every_crawler_replica_on_its_metrics_port() -> None:
    port = crawler_metrics_port()
    assert str(port) in [str(p) for p in service("crawler").get("expose") or []]
    jobs = {job["job_name"]: job for job in prometheus_config()["scrape_configs"]}
    discovery = jobs["crawler"]["dns_sd_configs"]
    assert discovery, "the crawler job must discover replicas through Docker DNS"
    for entry in discovery:
        assert entry["names"] == ["crawler"], "compose DNS answers the service name"
        assert entry.get("type") == "A"
        assert entry["port"] == port
    assert jobs["crawler"].get("metrics_path", "/metrics") == "/metrics"
