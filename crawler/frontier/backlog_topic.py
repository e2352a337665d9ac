"""The Kafka backlog topic (``FRONTIER_BACKLOG_TOPIC``): its name, its messages and its
deletion (no Scrapy imports).

A message is one spilled request, as JSON ``{"score": <queue score>, "request": <the request's
JSON>}``, whatever form Redis stored it in. Our nodes write it; what else lands on the topic is
told apart here (``read_back``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from crawler.frontier import codec
from crawler.frontier.client import score_text
from crawler.kafka.config import NO_SECURITY
from crawler.kafka.health import LIBRDKAFKA_LOG
from crawler.kafka.topics import topic_from_template


class UnreadableMessage(ValueError):
    """A message that is not a spilled request; ``kept`` is what its failure record keeps: the
    request's JSON when it has one (``crawler failed retry`` can queue it), else the message."""

    def __init__(self, problem: str, kept: bytes) -> None:
        super().__init__(problem)
        self.kept = kept


def spill_message(score: str, stored: bytes) -> bytes:
    """The message of a request taken to spill: its score and ``stored`` body as JSON;
    ``ValueError`` when the stored body does not decode."""
    request = orjson.Fragment(codec.plain(stored))
    return orjson.dumps({"score": float(score), "request": request})


def read_back(value: bytes) -> tuple[str, bytes]:
    """The queue score (a level's text) and request JSON of a message read back;
    ``UnreadableMessage`` when it is not one of ``spill_message``'s."""
    try:
        found = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise UnreadableMessage(f"not JSON ({exc})", value) from exc
    if not isinstance(found, dict):
        raise UnreadableMessage("not a JSON object", value)
    request = found.get("request")
    if not isinstance(request, dict):
        raise UnreadableMessage(f"its request {request!r} is not a JSON object", value)
    request_json = orjson.dumps(request)
    score = found.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise UnreadableMessage(f"its score {score!r} is not a number", request_json)
    return score_text(float(score)), request_json


def backlog_topic(spills: bool, bootstrap: str, template: str, spider: str) -> str | None:
    """The Kafka backlog topic of ``spider``'s crawls (``FRONTIER_BACKLOG_TOPIC``), which a
    purge deletes; None without a backlog (the crawl ``spills`` nowhere, or no Kafka)."""
    if not (spills and bootstrap):
        return None
    return topic_from_template("FRONTIER_BACKLOG_TOPIC", template, spider)


def purge_backlog(
    bootstrap: str, topic: str, timeout: float = 10.0, *, security: Mapping[str, Any] = NO_SECURITY
) -> str:
    """Delete the backlog topic of a purged crawl (its requests would come back into the
    next crawl); a note for the operator ("" when nothing was ever spilled)."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": LIBRDKAFKA_LOG, **security}
    admin = AdminClient(config)
    try:
        admin.delete_topics([topic], operation_timeout=timeout, request_timeout=timeout)[
            topic
        ].result(timeout)
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return ""  # nothing was ever spilled
        reason = error.str()
    except TimeoutError:
        reason = f"Kafka at {bootstrap} did not answer in {timeout:.0f}s"
    else:
        return f"; deleted the Kafka backlog topic {topic}"
    return (
        f"; the Kafka backlog topic {topic} could not be deleted ({reason}): delete it before "
        "the next crawl, or the requests it holds come back into it"
    )
