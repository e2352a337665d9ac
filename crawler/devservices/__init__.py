"""Real local services (Redis, Kafka) for development, demos and tests, without Docker.

``python -m crawler.devservices up|down|status|env`` manages long-lived services; the
classes below start throwaway ones (e.g. on :func:`free_port` ports in a temp dir), also a
Redis Cluster, a Sentinel setup and a TLS Redis for the tests of those topologies.
"""

from __future__ import annotations

from crawler.devservices.jars import ensure_kafka_jars
from crawler.devservices.kafka_broker import KafkaBroker, KafkaBrokerConfig
from crawler.devservices.ports import free_port
from crawler.devservices.redis_cluster import LocalRedisCluster, RedisClusterConfig
from crawler.devservices.redis_sentinel import LocalSentinel, RedisSentinelConfig
from crawler.devservices.redis_server import RedisServer, RedisServerConfig
from crawler.devservices.redis_tls import TlsRedisServer

__all__ = [
    "KafkaBroker",
    "KafkaBrokerConfig",
    "LocalRedisCluster",
    "LocalSentinel",
    "RedisClusterConfig",
    "RedisSentinelConfig",
    "RedisServer",
    "RedisServerConfig",
    "TlsRedisServer",
    "ensure_kafka_jars",
    "free_port",
]
