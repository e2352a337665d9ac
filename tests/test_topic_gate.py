"""TopicGate: replayed messages wait for their topic's check, but not for ever."""

from __future__ import annotations

import asyncio
import time

from crawler.kafka.messages import OutgoingMessage
from crawler.kafka.topic_gate import TopicGate


def message(topic: str, original: str | None = None) -> OutgoingMessage:
    headers: list[tuple[str, str | bytes | None]] = []
    if original is not None:
        headers.append(("dlq_original_topic", original.encode()))
    return OutgoingMessage(topic, None, b"{}", headers, 0)


def test_messages_wait_for_their_topics_check_then_go() -> None:
    checked: list[str] = []
    sent: list[str] = []

    async def check(topic: str) -> None:
        await asyncio.sleep(0.05)
        checked.append(topic)

    async def run() -> None:
        gate = TopicGate(check, patience=5)
        for outgoing in (message("a"), message("a.dlq", original="a"), message("b")):
            gate.send(outgoing, lambda _outcome: None, lambda m, _s: sent.append(m.topic))
        assert sent == [] and gate.waiting() == 3
        await gate.close(5)
        gate.send(message("a"), lambda _outcome: None, lambda m, _s: sent.append(m.topic))

    asyncio.run(run())
    assert checked == ["a", "b"]  # a dead letter waits for its original topic's check
    assert sent == ["a", "a.dlq", "b", "a"]  # a checked topic's next message goes at once


def test_a_check_that_does_not_end_lets_its_messages_go_after_the_patience() -> None:
    """A topic whose check retries for ever (a partition without a leader) must not hold
    its messages, and with them every later replay of the spool."""
    sent: list[str] = []

    async def never(_topic: str) -> None:
        await asyncio.sleep(3600)

    async def run() -> float:
        gate = TopicGate(never, patience=0.2)
        began = time.monotonic()
        gate.send(message("a"), lambda _outcome: None, lambda m, _s: sent.append(m.topic))
        while gate.waiting():
            await asyncio.sleep(0.01)
        return time.monotonic() - began

    waited = asyncio.run(run())
    assert sent == ["a"]
    assert 0.2 <= waited < 2
