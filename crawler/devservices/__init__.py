"""Real local services (Redis, Kafka) for development, demos and tests, without Docker.

``python -m crawler.devservices up|down|status|env`` manages long-lived services; the
classes below start throwaway ones (e.g. on :func:`free_port` ports in a temp dir).
"""

from __future__ import annotations

from crawler.devservices.jars import ensure_kafka_jars
from crawler.devservices.kafka_broker import KafkaBroker, KafkaBrokerConfig
from crawler.devservices.ports import free_port
from crawler.devservices.redis_server import RedisServer, RedisServerConfig

__all__ = [
    "KafkaBroker",
    "KafkaBrokerConfig",
    "RedisServer",
    "RedisServerConfig",
    "ensure_kafka_jars",
    "free_port",
]
