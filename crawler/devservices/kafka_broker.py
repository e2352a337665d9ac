"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) without Docker.

Runs ``kafka.Kafka`` from the Maven Central jars (see :mod:`crawler.devservices.jars`) on a
local JVM, bound to loopback only.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from crawler.devservices import _proc
from crawler.devservices.jars import ensure_kafka_jars
from crawler.devservices.ports import port_accepts, port_is_free
from crawler.devservices.process import LocalProcess

logger = logging.getLogger(__name__)

LOG_FILE = "broker.log"
PROPERTIES_FILE = "server.properties"
LOG4J_FILE = "log4j2.properties"
LOG_DIRS = "kraft-logs"
MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
DEFAULT_MESSAGE_MAX_BYTES = 1_048_588  # Kafka's own default, stated explicitly

# Modest JVM settings for small (2-core) machines; the heap comes from the config.
JVM_FLAGS: tuple[str, ...] = (
    "-server",
    "-XX:+UseSerialGC",
    "-XX:CICompilerCount=2",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
)
# The storage tool runs for a second: skip the optimising JIT.
TOOL_JVM_FLAGS: tuple[str, ...] = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Xmx256m",
)

_FALLBACK_LOG4J = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""


@dataclass(frozen=True)
class KafkaBrokerConfig:
    port: int
    controller_port: int
    data_dir: Path
    host: str = "127.0.0.1"
    heap: str = "512m"
    # None: ensure_kafka_jars() (downloaded once, then cached per user)
    jars_dir: Path | None = None
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    extra_properties: tuple[tuple[str, str], ...] = ()  # appended to server.properties


def random_cluster_id() -> str:
    """A 22-character base64url id, the form ``kafka-storage random-uuid`` prints."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        # A leading dash would read as a command-line option.
        if not text.startswith("-"):
            return text


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else ``java`` from PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = Path(java_home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            raise RuntimeError(f"JAVA_HOME={java_home} has no executable bin/java")
        return str(java)
    found = shutil.which("java")
    if found is None:
        raise RuntimeError("no Java runtime: set JAVA_HOME or put `java` (17+) on PATH")
    return found


def server_properties(config: KafkaBrokerConfig, log_dirs: Path) -> dict[str, str]:
    """The broker's server.properties for a single-node combined KRaft cluster."""
    host = config.host
    props: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"{host}:{config.controller_port}",
        "listeners": f"PLAINTEXT://{host}:{config.port},CONTROLLER://{host}:{config.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{config.port},CONTROLLER://{host}:{config.controller_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(log_dirs),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "auto.create.topics.enable": "true",
        "delete.topic.enable": "true",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
        "message.max.bytes": str(config.message_max_bytes),
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "background.threads": "2",
    }
    props.update(dict(config.extra_properties))
    return props


def _write_properties(path: Path, props: Mapping[str, str]) -> None:
    lines = ["# Written by crawler.devservices.kafka_broker; rewritten on every start."]
    lines += [f"{key}={value}" for key, value in props.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


class KafkaBroker(LocalProcess):
    """Start/stop one local Kafka broker (KRaft combined mode) on ``host:port``.

    ``data_dir`` holds server.properties, broker.log and the log dirs; starting again with
    the same ``data_dir`` keeps the cluster id and all topics. The JVM runs in its own
    session, so it survives the Python process that started it.
    """

    label = "Kafka broker"
    needle = MAIN_CLASS
    start_timeout = 120.0
    stop_timeout = 30.0

    @property
    def address(self) -> str:
        return self.bootstrap_servers

    def __init__(self, config: KafkaBrokerConfig) -> None:
        self.config = config
        super().__init__()

    # -- properties ---------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.config.host}:{self.config.port}"

    @property
    def log_path(self) -> Path:
        return self.config.data_dir / LOG_FILE

    @property
    def properties_path(self) -> Path:
        return self.config.data_dir / PROPERTIES_FILE

    @property
    def log_dirs(self) -> Path:
        return self.config.data_dir.resolve() / LOG_DIRS

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> None:
        """Format storage if new, launch the broker and wait until it serves metadata."""
        if self.pid is not None:
            raise RuntimeError(f"Kafka broker is already running (pid {self.pid})")
        cfg = self.config
        for port in (cfg.port, cfg.controller_port):
            if not port_is_free(port, cfg.host):
                raise RuntimeError(f"cannot start Kafka: {cfg.host}:{port} is already in use")
        started = time.monotonic()
        jars = (cfg.jars_dir or ensure_kafka_jars()).resolve()
        deadline = time.monotonic() + timeout  # a first-run jar download is not counted
        java = java_executable()
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        data_dir = cfg.data_dir.resolve()
        _proc.rotate_log(self.log_path)
        _write_properties(self.properties_path, server_properties(cfg, self.log_dirs))
        log4j = self._log4j_config(jars)
        common = [
            f"-Dlog4j2.configurationFile={log4j}",
            f"-Dkafka.logs.dir={data_dir}",
            "-cp",
            f"{jars}/*",
        ]
        if not (self.log_dirs / "meta.properties").is_file():
            self._format_storage(java, common)
        command = [java, f"-Xms{cfg.heap}", f"-Xmx{cfg.heap}", *JVM_FLAGS, *common]
        command += [MAIN_CLASS, str(self.properties_path.resolve())]
        with self.log_path.open("ab") as log:
            try:
                self._proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=data_dir,
                    start_new_session=True,
                )
            except OSError as exc:
                raise RuntimeError(f"cannot run {java!r}: {exc}") from exc
        try:
            self._wait_ready(deadline, timeout)
        except BaseException:
            self._kill_quietly()
            raise
        logger.info(
            "Kafka broker up at %s (pid %d, %.1fs)",
            self.bootstrap_servers,
            self._proc.pid,
            time.monotonic() - started,
        )

    def _log4j_config(self, jars: Path) -> Path:
        shipped = jars.parent / LOG4J_FILE  # written by scripts/kafka-jars.sh
        if shipped.is_file():
            return shipped
        fallback = self.config.data_dir.resolve() / LOG4J_FILE
        fallback.write_text(_FALLBACK_LOG4J, encoding="utf-8")
        return fallback

    def _format_storage(self, java: str, common: list[str]) -> None:
        cluster_id = random_cluster_id()
        command = [java, *TOOL_JVM_FLAGS, *common, STORAGE_TOOL, "format"]
        command += [
            "-t",
            cluster_id,
            "-c",
            str(self.properties_path.resolve()),
            "--standalone",
        ]
        logger.info("Formatting Kafka storage in %s (cluster id %s)", self.log_dirs, cluster_id)
        with self.log_path.open("ab") as log:
            try:
                result = subprocess.run(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.config.data_dir,
                    timeout=120,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise RuntimeError(f"Kafka storage format failed: {exc}") from exc
        if result.returncode != 0:
            raise RuntimeError(
                f"Kafka storage format failed (exit code {result.returncode}); "
                f"log {self.log_path}:\n{_proc.log_tail(self.log_path)}"
            )

    def _wait_ready(self, deadline: float, timeout: float) -> None:
        assert self._proc is not None
        cfg = self.config
        admin: AdminClient | None = None
        last_error = "broker port not open yet"
        while True:
            code = self._proc.poll()
            if code is not None:
                raise RuntimeError(
                    f"Kafka broker exited with code {code} during startup; "
                    f"log {self.log_path}:\n{_proc.log_tail(self.log_path)}"
                )
            # Wait for the listener before creating a client: librdkafka would log every
            # refused connection attempt to stderr.
            if port_accepts(cfg.port, cfg.host):
                if admin is None:
                    admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
                try:
                    metadata = admin.list_topics(
                        timeout=min(5.0, max(0.5, deadline - time.monotonic()))
                    )
                except KafkaException as exc:
                    last_error = str(exc)
                else:
                    if metadata.brokers:
                        return
                    last_error = "metadata lists no brokers yet"
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"Kafka broker at {self.bootstrap_servers} not ready within {timeout:.0f}s "
                    f"({last_error}); log {self.log_path}:\n{_proc.log_tail(self.log_path)}"
                )
            time.sleep(0.2)

    def pause(self) -> None:
        """SIGSTOP the broker: it stops answering but keeps its sockets (an outage)."""
        pid = self._require_pid()
        os.kill(pid, signal.SIGSTOP)
        logger.info("Kafka broker at %s paused (SIGSTOP)", self.bootstrap_servers)

    def resume(self) -> None:
        """SIGCONT a paused broker."""
        pid = self._require_pid()
        os.kill(pid, signal.SIGCONT)
        logger.info("Kafka broker at %s resumed (SIGCONT)", self.bootstrap_servers)

    def _require_pid(self) -> int:
        pid = self.pid
        if pid is None:
            raise RuntimeError("Kafka broker is not running")
        return pid
