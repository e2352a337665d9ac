"""Where the tests get Redis and Kafka from.

In order: the environment (``REDIS_URL``, ``KAFKA_BOOTSTRAP_SERVERS``), then
testcontainers when a Docker engine answers, then real local processes started
by ``crawler.devservices`` on free ports. Under ``CI=true`` a service that
cannot be had fails the run; elsewhere the tests that need it are skipped.

The other Redis topologies come from ``REDIS_CLUSTER_URL``, ``REDIS_SENTINEL_URL`` and
``REDIS_TLS_URL``, else from local ``redis-server`` processes (a 3-master cluster, a master
with one sentinel, a TLS server with certificates made for the run). Not from containers:
behind Docker's port mapping, cluster masters and sentinels announce addresses the host
cannot reach.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

import pytest
import redis
from confluent_kafka.admin import AdminClient

from crawler.devservices import (
    KafkaBroker,
    KafkaBrokerConfig,
    LocalRedisCluster,
    LocalSentinel,
    RedisClusterConfig,
    RedisSentinelConfig,
    RedisServer,
    RedisServerConfig,
    TlsRedisServer,
    free_port,
)
from crawler.redis_connection import sync_client

REDIS_IMAGE = "redis:7.2"
KAFKA_IMAGE = "apache/kafka:4.1.0"


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def unavailable(message: str) -> NoReturn:
    if running_in_ci():
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)


CHROMIUM = "/usr/bin/chromium"  # Debian's, which Playwright drives here (BROWSER_EXECUTABLE)


def need_chromium() -> None:
    if not shutil.which(CHROMIUM):
        unavailable(f"{CHROMIUM} is not installed (Debian package chromium)")


def docker_engine_answers(socket_path: str = "/var/run/docker.sock") -> bool:
    """True when a Docker engine answers ``GET /_ping`` on its local socket."""
    if os.environ.get("DOCKER_HOST", "unix://").split("://")[0] != "unix":
        return True  # a remote engine: let testcontainers try it
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(3)
            connection.connect(socket_path)
            connection.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            status_line = connection.recv(64).split(b"\r\n", 1)[0]
    except OSError:
        return False
    return status_line.split(b" ")[1:2] == [b"200"]


def check_redis(url: str) -> None:
    try:
        client = sync_client(url, socket_connect_timeout=3)
    except redis.exceptions.RedisClusterException as exc:
        unavailable(f"Redis at {url} does not answer: {exc}")
    try:
        client.ping()
    except redis.RedisError as exc:
        unavailable(f"Redis at {url} does not answer: {exc}")
    finally:
        client.close()


def check_kafka(bootstrap: str) -> None:
    try:
        AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    except Exception as exc:  # noqa: BLE001 - librdkafka raises KafkaException
        unavailable(f"Kafka at {bootstrap} does not answer: {exc}")


@contextlib.contextmanager
def redis_service(workdir: Path) -> Iterator[tuple[str, RedisServer | None]]:
    """Yield a Redis URL and, when the tests started it, the server handle."""
    if url := os.environ.get("REDIS_URL"):
        check_redis(url)
        yield url, None
    elif docker_engine_answers():
        with _container("testcontainers.redis", "RedisContainer", REDIS_IMAGE) as container:
            host, port = container.get_container_host_ip(), container.get_exposed_port(6379)
            yield f"redis://{host}:{port}/0", None
    else:
        config = RedisServerConfig(port=free_port(), data_dir=workdir / "redis")
        with started(RedisServer(config), "redis-server") as server:
            yield server.url, server


class _Launcher(Protocol):
    def start(self, timeout: float = ...) -> None: ...

    def stop(self) -> None: ...


Launched = TypeVar("Launched", bound=_Launcher)


@contextlib.contextmanager
def started(server: Launched, what: str, timeout: float | None = None) -> Iterator[Launched]:
    """``server`` started here (it failing: a local ``what`` is unavailable), stopped at the
    end; ``timeout``: the server's own start timeout unless given."""
    try:
        if timeout is None:
            server.start()
        else:
            server.start(timeout)
    except (RuntimeError, OSError) as exc:
        unavailable(f"a local {what} could not be started: {exc}")
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def _redis_topology(
    variable: str, what: str, launcher: Callable[[], tuple[_Launcher, str]]
) -> Iterator[str]:
    """The URL in ``$variable`` (checked), else one of a local ``launcher`` started now."""
    if url := os.environ.get(variable):
        check_redis(url)
        yield url
        return
    server, url = launcher()
    with started(server, what, timeout=30.0):
        yield url


def redis_cluster_service(workdir: Path) -> contextlib.AbstractContextManager[str]:
    """A ``redis+cluster://`` URL: ``$REDIS_CLUSTER_URL`` or 3 local masters."""

    def launcher() -> tuple[_Launcher, str]:
        ports = tuple(free_port() for _ in range(3))
        bus_ports = tuple(free_port() for _ in range(3))
        cluster = LocalRedisCluster(RedisClusterConfig(ports, bus_ports, workdir))
        return cluster, cluster.url

    return _redis_topology("REDIS_CLUSTER_URL", "Redis Cluster", launcher)


def redis_sentinel_service(workdir: Path) -> contextlib.AbstractContextManager[str]:
    """A ``redis+sentinel://`` URL: ``$REDIS_SENTINEL_URL`` or a local master and sentinel."""

    def launcher() -> tuple[_Launcher, str]:
        sentinel = LocalSentinel(RedisSentinelConfig(free_port(), free_port(), workdir))
        return sentinel, sentinel.url

    return _redis_topology("REDIS_SENTINEL_URL", "Redis Sentinel", launcher)


def redis_tls_service(workdir: Path) -> contextlib.AbstractContextManager[str]:
    """A ``rediss://`` URL: ``$REDIS_TLS_URL`` or a local TLS server (client certificate)."""

    def launcher() -> tuple[_Launcher, str]:
        server = TlsRedisServer(RedisServerConfig(port=free_port(), data_dir=workdir), free_port())
        return server, server.tls_url

    return _redis_topology("REDIS_TLS_URL", "TLS Redis", launcher)


@contextlib.contextmanager
def kafka_service(workdir: Path) -> Iterator[tuple[str, KafkaBroker | None]]:
    """Yield Kafka bootstrap servers and, when the tests started it, the broker handle."""
    if bootstrap := os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        check_kafka(bootstrap)
        yield bootstrap, None
    elif docker_engine_answers():
        with _container("testcontainers.kafka", "KafkaContainer", KAFKA_IMAGE) as container:
            yield container.get_bootstrap_server(), None
    else:
        with own_kafka_broker(workdir / "kafka") as broker:
            yield broker.bootstrap_servers, broker


@contextlib.contextmanager
def _container(module: str, class_name: str, image: str) -> Iterator[Any]:
    import importlib

    try:
        container_class = getattr(importlib.import_module(module), class_name)
    except ImportError as exc:
        unavailable(f"a Docker engine answers but testcontainers is not installed: {exc}")
    with container_class(image) as container:
        yield container


@contextlib.contextmanager
def own_kafka_broker(data_dir: Path) -> Iterator[KafkaBroker]:
    """A local Kafka broker, which a test may pause (SIGSTOP) or stop; resumed and stopped
    at the end."""
    config = KafkaBrokerConfig(port=free_port(), controller_port=free_port(), data_dir=data_dir)
    with started(KafkaBroker(config), "Kafka broker") as broker:
        try:
            yield broker
        finally:
            if broker.pid is not None:
                broker.resume()  # a paused broker does not stop
