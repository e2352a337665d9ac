"""Where the tests get Redis and Kafka from.

In order: the environment (``REDIS_URL``, ``KAFKA_BOOTSTRAP_SERVERS``), then
testcontainers when a Docker engine answers, then real local processes started
by ``crawler.devservices`` on free ports. Under ``CI=true`` a service that
cannot be had fails the run; elsewhere the tests that need it are skipped.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
import redis
from confluent_kafka.admin import AdminClient

from crawler.devservices import (
    KafkaBroker,
    KafkaBrokerConfig,
    RedisServer,
    RedisServerConfig,
    free_port,
)

REDIS_IMAGE = "redis:7.2"
KAFKA_IMAGE = "apache/kafka:4.1.0"


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def unavailable(message: str) -> NoReturn:
    if running_in_ci():
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)


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
    client = redis.Redis.from_url(url, socket_connect_timeout=3)
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
        server = RedisServer(RedisServerConfig(port=free_port(), data_dir=workdir / "redis"))
        try:
            server.start()
        except (RuntimeError, OSError) as exc:
            unavailable(f"a local redis-server could not be started: {exc}")
        try:
            yield server.url, server
        finally:
            server.stop()


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
        config = KafkaBrokerConfig(
            port=free_port(), controller_port=free_port(), data_dir=workdir / "kafka"
        )
        broker = KafkaBroker(config)
        try:
            broker.start()
        except (RuntimeError, OSError) as exc:
            unavailable(f"a local Kafka broker could not be started: {exc}")
        try:
            yield broker.bootstrap_servers, broker
        finally:
            broker.stop()


@contextlib.contextmanager
def _container(module: str, class_name: str, image: str) -> Iterator[Any]:
    import importlib

    try:
        container_class = getattr(importlib.import_module(module), class_name)
    except ImportError as exc:
        unavailable(f"a Docker engine answers but testcontainers is not installed: {exc}")
    with container_class(image) as container:
        yield container
