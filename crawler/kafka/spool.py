"""A durable local spool of messages Kafka could not take for now (no Scrapy imports).

Append-only JSON Lines segments, each line written whole (or truncated back
when the disk is full) and fsynced before the append returns. A segment is
locked (``flock``) by its writer, so replays on the same machine never take a
segment another process still writes; a segment left by a dead process is free
and is replayed by the next start.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from crawler.kafka.messages import OutgoingMessage

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SpooledMessage:
    message: OutgoingMessage
    reason: str


def encode_record(message: OutgoingMessage, reason: str) -> bytes:
    """One spool line; the value, UTF-8 JSON on one line, is embedded as it is (checked:
    ``orjson.Fragment`` embeds any bytes), any other (e.g. an ``unencodable`` dead letter's
    Python repr) in base64."""
    if _one_line_json(message.value):
        return _dump(message, reason, orjson.Fragment(message.value), "json") + b"\n"
    value = base64.b64encode(message.value).decode("ascii")
    return _dump(message, reason, value, "base64") + b"\n"


def _one_line_json(value: bytes) -> bool:
    if b"\n" in value or b"\r" in value:
        return False
    try:
        orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    return True


def _dump(message: OutgoingMessage, reason: str, value: Any, encoding: str) -> bytes:
    return orjson.dumps(
        {
            "topic": message.topic,
            "key": message.key.decode("latin-1") if message.key is not None else None,
            "value": value,
            "value_encoding": encoding,
            "headers": [
                [name, v.decode("latin-1") if isinstance(v, bytes) else v]
                for name, v in message.headers
            ],
            "timestamp_ms": message.timestamp_ms,
            "reason": reason,
            "spooled_at": time.time(),
        }
    )


VALUE_START = b',"value":'
VALUE_END = b',"value_encoding":"json",'
COUNT_BLOCK = 1 << 20  # bytes read at a time to count a segment's records


def _embedded_value(line: bytes) -> bytes:
    """The bytes ``encode_record`` embedded, as they were (parsed and dumped again, integers
    beyond 64 bits came back as floats). A ``"`` right after a ``,`` is never in a JSON
    string (there it is ``\\"``): the first ``,"value":`` is the record's (only its topic and
    key come before), and the last ``,"value_encoding":"json",`` ends the value (only
    headers, numbers and strings come after)."""
    start = line.index(VALUE_START) + len(VALUE_START)
    return line[start : line.rindex(VALUE_END, start)]


def decode_record(line: bytes) -> SpooledMessage:
    data = orjson.loads(line)
    if data["value_encoding"] == "base64":
        value = base64.b64decode(data["value"])
    else:
        value = _embedded_value(line)
    key = data["key"]
    message = OutgoingMessage(
        topic=data["topic"],
        key=key.encode("latin-1") if key is not None else None,
        value=value,
        headers=[
            (name, v.encode("latin-1") if isinstance(v, str) else v) for name, v in data["headers"]
        ],
        timestamp_ms=int(data["timestamp_ms"]),
    )
    return SpooledMessage(message, data["reason"])


class JsonLinesLog:
    """An append-only, fsynced JSON Lines file held under an exclusive ``flock``.

    Lines are written whole or not at all: a write or fsync that fails (``ENOSPC``,
    ``EIO``) truncates the file back to where the line began, then raises. Writes are
    unbuffered, so closing never flushes (nor fails on a full disk).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None

    def append(self, line: bytes) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("ab", buffering=0)
            fcntl.flock(self._file, fcntl.LOCK_EX)
        fd = self._file.fileno()
        start = os.fstat(fd).st_size  # we hold the lock: nobody else appends
        try:
            written = 0
            while written < len(line):
                written += os.write(fd, line[written:])
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, start)
            raise

    def close(self) -> None:
        if self._file is not None:
            self._file.close()  # releases the lock
            self._file = None


class Spool:
    def __init__(self, directory: Path, node_id: str) -> None:
        self.directory = directory
        self.node_id = node_id
        self._segment: JsonLinesLog | None = None
        self._sequence = 0

    def append(self, message: OutgoingMessage, reason: str) -> None:
        if self._segment is None:
            self._sequence += 1
            name = f"{self.node_id}-{int(time.time() * 1000)}-{self._sequence}.jsonl"
            self._segment = JsonLinesLog(self.directory / name)
        self._segment.append(encode_record(message, reason))

    def seal(self) -> None:
        """Close the segment being written; the next append starts a new one."""
        if self._segment is not None:
            self._segment.close()
            self._segment = None

    def has_records(self) -> bool:
        """Whether a segment exists: sealed, or being written by this spool."""
        return self._segment is not None or bool(self.segments())

    def writing(self) -> Path | None:
        return self._segment.path if self._segment is not None else None

    def make_folder(self) -> OSError | None:
        """Make the spider's spool folder (at open: ``crawler spool list|replay --dir`` refuses
        a folder that is not there, a mistyped one); the error when it cannot be made (the
        first spool says so again, and pauses the crawl while Kafka is away)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return exc
        return None

    def segments(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.glob("*.jsonl") if p != self.writing())

    def left(self) -> tuple[int, int]:
        """Records left for a replay (in this spool's segments and in those no process holds),
        and records in segments another process on this host writes or replays now: one a
        line, counted a block at a time (a spool may hold gigabytes)."""
        left = held = 0
        writing = self.writing()
        for path in self.directory.glob("*.jsonl"):
            handle = None if path == writing else claim(path)
            if handle is not None:
                with handle:
                    left += _lines(handle)
                continue
            with contextlib.suppress(FileNotFoundError), path.open("rb") as reading:
                if path == writing:
                    left += _lines(reading)
                else:
                    held += _lines(reading)
        return left, held

    def size(self) -> int:
        """Bytes of every segment (read from other threads: one replayed meanwhile is gone)."""
        total = 0
        for path in self.directory.glob("*.jsonl"):
            with contextlib.suppress(FileNotFoundError):
                total += path.stat().st_size
        return total


def report_left(spool: Spool, spider: str, spool_dir: Path | str) -> None:
    """Say, as a node closes, what its spool folder still holds for a replay (a WARNING with
    the command), and what other processes on this host write or replay now (INFO)."""
    left, held = spool.left()
    if left:
        logger.warning(
            "%d items left in the spool (%s), not in Kafka yet: send them with `crawler "
            "spool replay %s --dir %s` on this host, or start a node here",
            left,
            spool.directory,
            spider,
            spool_dir,
        )
    if held:
        logger.info(
            "%d items in the spool (%s) are in segments another process on this host writes "
            "or replays now",
            held,
            spool.directory,
        )


def _lines(handle: IO[bytes]) -> int:
    lines = 0
    while block := handle.read(COUNT_BLOCK):
        lines += block.count(b"\n")
    return lines


def claim(segment: Path) -> IO[bytes] | None:
    """Lock a sealed segment for replay; None when another process holds it."""
    try:
        handle = segment.open("rb")
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def read_segment(handle: IO[bytes]) -> tuple[list[SpooledMessage], int]:
    """Records of a claimed segment and the number of unreadable lines (a torn last write)."""
    records, broken = [], 0
    for line in handle.read().splitlines():
        if not line.strip():
            continue
        try:
            records.append(decode_record(line))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            broken += 1
    return records, broken


DEAD_LETTER_DIR = "dead-letters"  # in a spider's spool folder: not a segment, never replayed


def dead_letter_file(spool_dir: Path, node_id: str) -> Path:
    """A node's dead-letter file: one per node, so nodes sharing a spool volume never wait
    on each other's lock, and in a folder of its own, so a replay never takes it for a
    segment (its records would go back to the topic that refused them)."""
    return spool_dir / DEAD_LETTER_DIR / f"{node_id}.jsonl"
