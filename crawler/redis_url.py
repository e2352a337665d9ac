"""Where Redis is, from one URL: a server, TLS, Sentinel or Cluster (no Scrapy imports).

``REDIS_URL`` (or a CLI's ``--redis``) alone says how to reach Redis (docs/deployment.md);
:class:`RedisConfig` is what it says, and ``crawler.redis_connection`` makes the clients::

    redis://[[user]:password@]host[:port][/db]                      one server
    rediss://...                                                    one server over TLS
    redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service[/db]
    rediss+sentinel://...                                           TLS to master and sentinels
    redis+cluster://[[user]:password@]host[:port][,host[:port]...]  Redis Cluster (db 0 only)
    rediss+cluster://...                                            Redis Cluster over TLS

Query options: ``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile`` (PEM files),
``ssl_cert_reqs`` (``required`` | ``optional`` | ``none``) and ``ssl_check_hostname``
(``true`` | ``false``) with the ``rediss`` schemes; ``sentinel_username`` and
``sentinel_password`` (AUTH to the sentinels) with Sentinel; ``socket_connect_timeout`` and
``socket_timeout`` (seconds) with any. The credentials before ``@`` are the data nodes'.

A bad URL raises ``ValueError`` naming the setting; messages and :attr:`RedisConfig.display`
never contain a password.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeAlias
from urllib.parse import parse_qsl, unquote

Fail: TypeAlias = Callable[[str], ValueError]  # a problem -> the error naming the setting


class Topology(StrEnum):
    SERVER = "server"
    SENTINEL = "sentinel"
    CLUSTER = "cluster"


SCHEMES: Mapping[str, tuple[Topology, bool]] = {  # scheme -> (topology, TLS)
    "redis": (Topology.SERVER, False),
    "rediss": (Topology.SERVER, True),
    "redis+sentinel": (Topology.SENTINEL, False),
    "rediss+sentinel": (Topology.SENTINEL, True),
    "redis+cluster": (Topology.CLUSTER, False),
    "rediss+cluster": (Topology.CLUSTER, True),
}
DEFAULT_PORT = {Topology.SERVER: 6379, Topology.SENTINEL: 26379, Topology.CLUSTER: 6379}
TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
TLS_OPTIONS = (*TLS_FILES, "ssl_cert_reqs", "ssl_check_hostname")
SENTINEL_OPTIONS = ("sentinel_username", "sentinel_password")
TIMEOUT_OPTIONS = ("socket_connect_timeout", "socket_timeout")
CERT_REQS = ("required", "optional", "none")
REDACTED = "***"
BOOLEANS = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
_HOST_PORT = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:\[\]]+))(?::(?P<port>[0-9]+))?")


def redact_url(url: str) -> str:
    """``url`` with the password before ``@`` and every ``*password*`` query value as ``***``."""
    head, question, query = url.partition("?")
    scheme, sep, rest = head.partition("://")
    userinfo, at, location = rest.rpartition("@")
    if sep and at and ":" in userinfo:
        head = f"{scheme}://{userinfo.partition(':')[0]}:{REDACTED}@{location}"
    if question:
        query = "&".join(
            f"{name}={REDACTED}" if "password" in name.lower() else f"{name}{eq}{value}"
            for name, eq, value in (item.partition("=") for item in query.split("&"))
        )
    return head + question + query


@dataclass(frozen=True, slots=True)
class TlsOptions:
    ca_certs: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    cert_reqs: str = "required"
    check_hostname: bool = True

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of redis-py's TLS connections (``ssl=True`` not included)."""
        return {
            "ssl_ca_certs": self.ca_certs,
            "ssl_certfile": self.certfile,
            "ssl_keyfile": self.keyfile,
            "ssl_cert_reqs": self.cert_reqs,
            "ssl_check_hostname": self.check_hostname,
        }


@dataclass(frozen=True, slots=True)
class RedisConfig:
    """Where and how to reach Redis, parsed from a URL by :meth:`from_url`."""

    topology: Topology
    hosts: tuple[tuple[str, int], ...]
    db: int = 0
    service: str = ""  # Sentinel: the master's name
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: TlsOptions | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = field(default=None, repr=False)
    socket_connect_timeout: float | None = None
    socket_timeout: float | None = None

    @classmethod
    def from_url(cls, url: str, setting: str = "REDIS_URL") -> RedisConfig:
        """Parse and validate ``url``; a ``ValueError`` names ``setting`` (password hidden)."""
        return _parse(url.strip(), setting)

    @property
    def display(self) -> str:
        """The URL without credentials or query options, for logs and messages."""
        scheme = next(
            name
            for name, (topology, tls) in SCHEMES.items()
            if topology is self.topology and tls == (self.tls is not None)
        )
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.hosts)
        path = {
            Topology.SERVER: f"/{self.db}",
            Topology.SENTINEL: f"/{self.service}/{self.db}",
            Topology.CLUSTER: "",
        }[self.topology]
        return f"{scheme}://{hosts}{path}"

    def connection_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of a connection to a data node (not Sentinel's own); options
        the URL leaves out keep redis-py's defaults."""
        kwargs = _given(
            username=self.username,
            password=self.password,
            socket_connect_timeout=self.socket_connect_timeout,
            socket_timeout=self.socket_timeout,
        )
        if self.topology is not Topology.CLUSTER:
            kwargs["db"] = self.db
        if self.tls is not None:
            kwargs.update(self.tls.kwargs())
        return kwargs

    def with_timeouts(
        self, socket_timeout: float | None, socket_connect_timeout: float | None
    ) -> RedisConfig:
        """This config with the timeouts given (``None``: the URL's)."""
        overrides = _given(
            socket_timeout=socket_timeout, socket_connect_timeout=socket_connect_timeout
        )
        return dataclasses.replace(self, **overrides)

    def sentinel_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the clients that ask the sentinels for the master."""
        kwargs = _given(
            username=self.sentinel_username,
            password=self.sentinel_password,
            socket_connect_timeout=self.socket_connect_timeout,
            socket_timeout=self.socket_timeout,
        )
        if self.tls is not None:
            kwargs.update(ssl=True, **self.tls.kwargs())
        return kwargs


def _given(**kwargs: Any) -> dict[str, Any]:
    return {name: value for name, value in kwargs.items() if value is not None}


def _hosts(netloc: str, topology: Topology, fail: Fail) -> tuple[tuple[str, int], ...]:
    hosts: list[tuple[str, int]] = []
    for item in netloc.split(","):
        match = _HOST_PORT.fullmatch(item.strip())
        if match is None:
            raise fail(f"{item.strip()!r} is not host[:port]")
        port = int(match["port"] or DEFAULT_PORT[topology])
        if not 0 < port < 65536:
            raise fail(f"port {port} is not between 1 and 65535")
        hosts.append((unquote(match["v6"] or match["host"]), port))
    if topology is Topology.SERVER and len(hosts) != 1:
        raise fail("redis:// and rediss:// name one host; Sentinel and Cluster URLs name several")
    return tuple(hosts)


def _path(path: str, topology: Topology, fail: Fail) -> tuple[str, int]:
    """(service, db) from the URL path."""
    parts = [unquote(part) for part in path.strip("/").split("/")] if path.strip("/") else []
    if topology is Topology.SENTINEL:
        if not parts or not parts[0]:
            raise fail("a Sentinel URL names the master's service: redis+sentinel://h:p/<service>")
        service, parts = parts[0], parts[1:]
    else:
        service = ""
    if len(parts) > 1:
        raise fail(f"path {path!r} has more parts than [/service]/db")
    db_text = parts[0] if parts else "0"
    if not re.fullmatch(r"[0-9]+", db_text):  # isdigit() took other scripts' digits, "²"
        raise fail(f"database {db_text!r} is not a number >= 0")
    db = int(db_text)
    if topology is Topology.CLUSTER and db != 0:
        raise fail(f"a Redis Cluster has only database 0, not {db}")
    return service, db


def _options(query: str, topology: Topology, tls: bool, fail: Fail) -> dict[str, str]:
    allowed = set(TIMEOUT_OPTIONS)
    if tls:
        allowed.update(TLS_OPTIONS)
    if topology is Topology.SENTINEL:
        allowed.update(SENTINEL_OPTIONS)
    options: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name in options:
            raise fail(f"option {name} is given twice")
        if name not in allowed:
            hint = " (TLS options need rediss)" if name in TLS_OPTIONS else ""
            raise fail(f"unknown option {name}{hint}; allowed here: {', '.join(sorted(allowed))}")
        options[name] = value
    return options


def _tls(options: Mapping[str, str], fail: Fail) -> TlsOptions:
    for name in TLS_FILES:
        if name in options and not Path(options[name]).is_file():
            raise fail(f"{name}={options[name]!r} is not a file")
    cert_reqs = options.get("ssl_cert_reqs", "required").lower()
    if cert_reqs not in CERT_REQS:
        raise fail(f"ssl_cert_reqs={cert_reqs!r} is not one of {', '.join(CERT_REQS)}")
    check_text = options.get("ssl_check_hostname", "true").lower()
    if check_text not in BOOLEANS:
        raise fail(f"ssl_check_hostname={check_text!r} is not true or false")
    if ("ssl_certfile" in options) != ("ssl_keyfile" in options):
        raise fail("ssl_certfile and ssl_keyfile (the client certificate) go together")
    return TlsOptions(
        ca_certs=options.get("ssl_ca_certs"),
        certfile=options.get("ssl_certfile"),
        keyfile=options.get("ssl_keyfile"),
        cert_reqs=cert_reqs,
        check_hostname=BOOLEANS[check_text],
    )


def _timeout(options: Mapping[str, str], name: str, fail: Fail) -> float | None:
    if name not in options:
        return None
    try:
        value = float(options[name])
    except ValueError:
        value = 0.0
    if not value > 0:
        raise fail(f"{name}={options[name]!r} must be a number of seconds > 0")
    return value


def _parse(url: str, setting: str) -> RedisConfig:
    def fail(problem: str) -> ValueError:
        return ValueError(f"{setting}={redact_url(url)!r}: {problem}")

    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise fail(f"the scheme must be one of {', '.join(f'{s}://' for s in SCHEMES)}")
    topology, tls = SCHEMES[scheme.lower()]
    if "#" in rest:
        raise fail("a Redis URL has no #fragment")
    location, _, query = rest.partition("?")
    userinfo, at, location = location.rpartition("@")  # a password may hold "/" or "@"
    netloc, slash, path = location.partition("/")
    if not netloc:
        raise fail("no host")
    username, colon, password = userinfo.partition(":") if at else ("", "", "")
    service, db = _path(slash + path, topology, fail)
    options = _options(query, topology, tls, fail)
    return RedisConfig(
        topology=topology,
        hosts=_hosts(netloc, topology, fail),
        db=db,
        service=service,
        username=unquote(username) or None,
        password=unquote(password) if colon else None,
        tls=_tls(options, fail) if tls else None,
        sentinel_username=options.get("sentinel_username") or None,
        sentinel_password=options.get("sentinel_password") or None,
        socket_connect_timeout=_timeout(options, "socket_connect_timeout", fail),
        socket_timeout=_timeout(options, "socket_timeout", fail),
    )
