"""``python -m crawler.devservices up|down|status|env``: long-lived local Redis and Kafka.

State (pid files, data, logs) lives in ``--dir`` / ``$CRAWLER_SERVICES_DIR`` (default
``<repo>/.services``)::

    redis.pid  redis.addr  redis/   (append-only file, redis.log)
    kafka.pid  kafka.addr  kafka/   (server.properties, broker.log, kraft-logs/)

The data directories persist across ``down``/``up``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import logging
import os
import shlex
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from crawler.devservices import _proc
from crawler.devservices.kafka_broker import KafkaBroker, KafkaBrokerConfig
from crawler.devservices.redis_server import RedisServer, RedisServerConfig

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
SERVICES: tuple[str, ...] = ("redis", "kafka")
_REPO_ROOT = Path(__file__).resolve().parents[2]


class UsageError(Exception):
    """Bad command-line arguments or environment values."""


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    redis_port: int
    kafka_port: int
    kafka_controller_port: int
    kafka_heap: str
    services: tuple[str, ...]

    def pid_file(self, service: str) -> Path:
        return self.state_dir / f"{service}.pid"

    def addr_file(self, service: str) -> Path:
        return self.state_dir / f"{service}.addr"

    def data_dir(self, service: str) -> Path:
        return self.state_dir / service


def default_state_dir() -> Path:
    env = os.environ.get("CRAWLER_SERVICES_DIR")
    if env:
        return Path(env).expanduser()
    root = _REPO_ROOT if (_REPO_ROOT / "pyproject.toml").is_file() else Path.cwd()
    return root / ".services"


def _env_port(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    return _parse_port(raw, f"${name}")


def _parse_port(raw: str, what: str) -> int:
    try:
        port = int(raw)
    except ValueError:
        raise UsageError(f"{what} must be a port number, not {raw!r}") from None
    if not 0 < port < 65536:
        raise UsageError(f"{what} must be between 1 and 65535, not {port}")
    return port


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="state dir (default: $CRAWLER_SERVICES_DIR or <repo>/.services)",
    )
    common.add_argument("--redis-port", default=None, help="default: $REDIS_PORT or 6379")
    common.add_argument("--kafka-port", default=None, help="default: $KAFKA_PORT or 9092")
    common.add_argument(
        "--kafka-controller-port",
        default=None,
        help="default: $KAFKA_CONTROLLER_PORT or 9093",
    )
    common.add_argument(
        "--kafka-heap",
        default=None,
        help="JVM heap of the broker (default: $KAFKA_HEAP or 512m)",
    )
    common.add_argument("--only", choices=SERVICES, default=None, help="act on one service only")
    common.add_argument("-v", "--verbose", action="store_true", help="debug logging")

    parser = argparse.ArgumentParser(
        prog="python -m crawler.devservices",
        description="Run real local Redis and Kafka (KRaft) for development, without Docker.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{up,down,status,env}")
    sub.add_parser(
        "up",
        parents=[common],
        help="start the services (idempotent) and print the export line",
    )
    sub.add_parser("down", parents=[common], help="stop the services started by `up`")
    sub.add_parser("status", parents=[common], help="show whether each service runs")
    sub.add_parser("env", parents=[common], help="print the export line")
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    def port(value: str | None, flag: str, env: str, default: int) -> int:
        return _env_port(env, default) if value is None else _parse_port(value, flag)

    only: str | None = args.only
    return Settings(
        state_dir=(args.dir or default_state_dir()).expanduser().absolute(),
        redis_port=port(args.redis_port, "--redis-port", "REDIS_PORT", 6379),
        kafka_port=port(args.kafka_port, "--kafka-port", "KAFKA_PORT", 9092),
        kafka_controller_port=port(
            args.kafka_controller_port,
            "--kafka-controller-port",
            "KAFKA_CONTROLLER_PORT",
            9093,
        ),
        kafka_heap=args.kafka_heap or os.environ.get("KAFKA_HEAP") or "512m",
        services=SERVICES if only is None else (only,),
    )


# -- per-service helpers ----------------------------------------------------------------------


def _redis(settings: Settings) -> RedisServer:
    return RedisServer(
        RedisServerConfig(port=settings.redis_port, data_dir=settings.data_dir("redis"), host=HOST)
    )


def _kafka(settings: Settings) -> KafkaBroker:
    config = KafkaBrokerConfig(
        port=settings.kafka_port,
        controller_port=settings.kafka_controller_port,
        data_dir=settings.data_dir("kafka"),
        host=HOST,
        heap=settings.kafka_heap,
    )
    return KafkaBroker(config)


def _is_running(service: str, pid: int) -> bool:
    return RedisServer.is_running(pid) if service == "redis" else KafkaBroker.is_running(pid)


def _running_pid(settings: Settings, service: str) -> int | None:
    pid = _proc.read_pid_file(settings.pid_file(service))
    return pid if pid is not None and _is_running(service, pid) else None


def _configured_addr(settings: Settings, service: str) -> str:
    port = settings.redis_port if service == "redis" else settings.kafka_port
    return f"{HOST}:{port}"


def _addr(settings: Settings, service: str) -> str:
    """host:port of a running service (as recorded by `up`), else the configured one."""
    if _running_pid(settings, service) is not None:
        with contextlib.suppress(OSError):
            recorded = settings.addr_file(service).read_text(encoding="utf-8").strip()
            if recorded:
                return recorded
    return _configured_addr(settings, service)


def export_line(settings: Settings) -> str:
    """The exports for a shell (``eval``): the services' addresses, and the project's
    ``.venv/bin`` first on ``PATH`` (``scrapy``, ``crawler``)."""
    parts: list[str] = []
    if "redis" in settings.services:
        parts.append(f"REDIS_URL=redis://{_addr(settings, 'redis')}/0")
    if "kafka" in settings.services:
        parts.append(f"KAFKA_BOOTSTRAP_SERVERS={_addr(settings, 'kafka')}")
    venv_bin = shlex.quote(str(Path(sys.executable).parent))
    return "export " + " ".join(parts) + f' PATH={venv_bin}:"$PATH"'


def next_steps(settings: Settings) -> str:
    """What to paste next, with the addresses this run chose (comments: ``eval``-safe)."""
    lines = ["# In each shell: the export line above, then for example:", "#   scrapy crawl pages"]
    if "redis" in settings.services:
        lines.append("#   crawler seed pages https://example.com/")
        lines.append(
            '#   (or: redis-cli -u "$REDIS_URL" lpush pages:start_urls https://example.com/)'
        )
    if "kafka" in settings.services:
        lines.append("#   crawler consume spider-pages-items --from-beginning")
    return "\n".join(lines)


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    """Serialise concurrent up/down runs on the same state dir."""
    state_dir.mkdir(parents=True, exist_ok=True)
    ignore = state_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")
    with (state_dir / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# -- commands ---------------------------------------------------------------------------------


def cmd_up(settings: Settings) -> int:
    with _locked(settings.state_dir):
        for service in settings.services:
            pid_file = settings.pid_file(service)
            pid = _running_pid(settings, service)
            if pid is not None:
                logger.info(
                    "%s: already running (pid %d) at %s",
                    service,
                    pid,
                    _addr(settings, service),
                )
                continue
            _proc.remove_file(pid_file)
            logger.info(
                "%s: starting at %s (data in %s)",
                service,
                _configured_addr(settings, service),
                settings.data_dir(service),
            )
            server: RedisServer | KafkaBroker = (
                _redis(settings) if service == "redis" else _kafka(settings)
            )
            try:
                server.start()
            except RuntimeError as exc:
                others = [
                    s for s in SERVICES if s != service and _running_pid(settings, s) is not None
                ]
                hint = f" ({', '.join(others)} left running; `down` stops it)" if others else ""
                raise RuntimeError(f"{service} failed to start: {exc}{hint}") from exc
            started_pid = server.pid
            assert started_pid is not None
            _proc.write_pid_file(pid_file, started_pid)
            settings.addr_file(service).write_text(
                _configured_addr(settings, service) + "\n", encoding="utf-8"
            )
    print(export_line(settings), flush=True)
    print(next_steps(settings), flush=True)
    return 0


def cmd_down(settings: Settings) -> int:
    with _locked(settings.state_dir):
        # Kafka first: clients shutting down may still flush into it.
        for service in reversed(settings.services):
            pid_file = settings.pid_file(service)
            if service == "redis":
                stopped = RedisServer.stop_pid_file(pid_file)
            else:
                stopped = KafkaBroker.stop_pid_file(pid_file)
            _proc.remove_file(settings.addr_file(service))
            if stopped is None:
                print(f"{service}: not running")
            else:
                print(f"{service}: stopped (pid {stopped})")
    return 0


def cmd_status(settings: Settings) -> int:
    for service in settings.services:
        pid = _running_pid(settings, service)
        addr = _addr(settings, service)
        if pid is None:
            print(f"{service}: stopped ({addr})")
        else:
            print(f"{service}: running (pid {pid}) at {addr}")
    return 0


def cmd_env(settings: Settings) -> int:
    print(export_line(settings))
    return 0


COMMANDS = {"up": cmd_up, "down": cmd_down, "status": cmd_status, "env": cmd_env}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # --help (0) or a usage error (already printed)
        return 0 if exc.code in (0, None) else 1
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        stream=sys.stderr,
        format="%(message)s",
    )
    try:
        settings = settings_from_args(args)
        return COMMANDS[args.command](settings)
    except (UsageError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 1
