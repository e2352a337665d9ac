"""``KAFKA_BOOTSTRAP_SERVERS`` checked at start (no Scrapy imports): a value librdkafka cannot
use (``http://host:9092``, ``host:abc``, ``a:9092;b:9092``) only logs a parse error per client
and every item waits in the spool, so the node refuses it, naming the setting."""

from __future__ import annotations

import re

# librdkafka's form: [protocol://]host[:port], entries separated by commas (or spaces)
BROKER = re.compile(
    r"(?:(?P<protocol>[A-Za-z_]+)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)"
    r"(?::(?P<port>[0-9]+))?"
)
PROTOCOLS = frozenset({"plaintext", "ssl", "sasl_plaintext", "sasl_ssl"})


def check_bootstrap_servers(value: str, name: str = "KAFKA_BOOTSTRAP_SERVERS") -> None:
    """Raise ``ValueError`` naming ``name`` when ``value`` is no broker list librdkafka can
    use (``host:port``, comma-separated)."""
    entries = [entry for entry in re.split(r"[,\s]+", value) if entry]
    if not entries:
        raise ValueError(f"{name}={value!r} names no broker: give host:port[,host:port...]")
    for entry in entries:
        match = BROKER.fullmatch(entry)
        if match is None:
            problem = "is not host:port"
        elif (protocol := match["protocol"]) and protocol.lower() not in PROTOCOLS:
            problem = f"has protocol {protocol}://, not one of {', '.join(sorted(PROTOCOLS))}"
        elif match["port"] is not None and not 0 < int(match["port"]) < 65536:
            problem = f"has port {match['port']}, not 1-65535"
        else:
            continue
        raise ValueError(
            f"{name}={value!r}: {entry!r} {problem} (brokers are host:port, separated by "
            "commas: kafka1:9092,kafka2:9092)"
        )
