"""The node's HTTP server: ``/metrics``, ``/healthz`` and ``/readyz`` (no Scrapy).

A threading WSGI server in a daemon thread, on the first free port of a range.
``/healthz`` (liveness) answers 200 while the process runs, without I/O: it says what the
node's components last met. ``/readyz`` (readiness) asks Redis now and answers 200 when it
answers (or the node runs without Redis), else 503. Both carry ``{"redis": ..., "kafka": ...}``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import orjson
from prometheus_client import CollectorRegistry, make_wsgi_app

Health = Callable[[bool], Mapping[str, str]]  # True: ask Redis now (readiness)
StartResponse = Callable[[str, list[tuple[str, str]]], Any]

READY = "ok"  # the value of "redis" that makes a node ready ("off": no Redis needed)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _IPv6Server(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - wsgiref's name
        return


def application(
    registry: CollectorRegistry, health: Health, scraped: Callable[[], None] | None = None
) -> Callable[..., Iterable[bytes]]:
    """The WSGI app; ``scraped`` is called after each /metrics body is collected."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path not in {"/healthz", "/readyz"}:
            collected: Iterable[bytes] = metrics(environ, start_response)
            if scraped is not None:
                scraped()
            return collected
        readiness = path == "/readyz"
        state = dict(health(readiness))
        ready = not readiness or state.get("redis") in {READY, "off"}
        body = orjson.dumps(state)
        start_response(
            "200 OK" if ready else "503 Service Unavailable",
            [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
        )
        return [body]

    return app


def serve(
    host: str,
    ports: tuple[int, int],
    registry: CollectorRegistry,
    health: Health,
    scraped: Callable[[], None] | None = None,
) -> WSGIServer:
    """Serve on the first free port of ``ports`` in a daemon thread; return the server."""
    server_class = _IPv6Server if ":" in host else _Server
    app = application(registry, health, scraped)
    last_error: OSError | None = None
    for port in range(ports[0], ports[1] + 1):
        try:
            server = make_server(host, port, app, server_class, _QuietHandler)
        except OSError as exc:
            last_error = exc
            continue
        threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
        return server
    given = str(ports[0]) if ports[0] == ports[1] else f"{ports[0]}-{ports[1]}"
    raise ValueError(  # a refusal at start, named in one line
        f"METRICS_PORTS={given}: no free port on METRICS_HOST={host!r} ({last_error})"
    )
