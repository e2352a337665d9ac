"""Operator resets of a running frontier: a new epoch, then wait for every live node.

A purge (``crawler purge --force``) and a recrawl (``crawler seed --recrawl``)
change what the nodes must believe: a node keeps a seen-cache of the fingerprints
it sent, and a purged frontier's leases are no longer there. The command writes a
new epoch (``purged:<id>`` or ``recrawl:<id>``, ``crawler.frontier.epoch``); each
node notices it at its next heartbeat, resets, and beats again at once in the new
epoch, which ``heartbeat.lua`` records as ``{<spider>}:epoch:<node>``. The command
waits until every live node has, so what it does next (push seeds) meets nodes that
have forgotten. No Scrapy imports.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from crawler.frontier.epoch import RECRAWL_EPOCH
from crawler.frontier.keys import FrontierKeys
from crawler.lua import text
from crawler.redis_connection import SyncRedis, server_time_ms

POLL_SECONDS = 0.2


@dataclass(frozen=True, slots=True)
class Acknowledged:
    epoch: str
    nodes: list[str]  # live nodes that beat in the new epoch
    late: list[str]  # live nodes that did not within the timeout


def live_nodes(client: SyncRedis, parts: Sequence[FrontierKeys]) -> list[str]:
    """Nodes whose heartbeat is still current (Redis time) in some part, sorted."""
    live: set[str] = set()
    for keys in parts:
        now = server_time_ms(client, keys.nodes)
        live.update(text(node) for node in client.zrangebyscore(keys.nodes, now, "+inf"))
    return sorted(live)


def new_epoch(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex}"


def write_epoch(client: SyncRedis, parts: Sequence[FrontierKeys], epoch: str) -> None:
    for keys in parts:
        client.set(keys.epoch, epoch)


def _beaten(
    client: SyncRedis, parts: Sequence[FrontierKeys], epoch: str, nodes: list[str]
) -> set[str]:
    """Those of ``nodes`` that beat in ``epoch`` in every part (one ``MGET`` per part: a
    part's keys share its slot)."""
    beaten = set(nodes)
    for keys in parts:
        seen = client.mget([keys.node_epoch(node) for node in nodes])
        beaten &= {node for node, found in zip(nodes, seen, strict=True) if text(found) == epoch}
    return beaten


def wait_for_nodes(
    client: SyncRedis, parts: Sequence[FrontierKeys], epoch: str, nodes: list[str], timeout: float
) -> Acknowledged:
    """Wait until each of ``nodes`` beat in ``epoch`` in every part (or ``timeout`` seconds
    passed)."""
    deadline = time.monotonic() + timeout
    waiting = list(nodes)
    while waiting:
        beaten = _beaten(client, parts, epoch, waiting)
        waiting = [node for node in waiting if node not in beaten]
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS)
    return Acknowledged(epoch, [node for node in nodes if node not in waiting], waiting)


def reset_wait(heartbeat_interval: float) -> float:
    """How long a reset waits for the live nodes: a heartbeat to notice it, one to answer."""
    return 3 * heartbeat_interval


def reset_note(acknowledged: Acknowledged | None) -> str:
    """What the live nodes did about a reset, for the operator."""
    if acknowledged is None or not (acknowledged.nodes or acknowledged.late):
        return ""
    note = f"; {len(acknowledged.nodes)} live nodes reset"
    if acknowledged.late:
        note += (
            f", {len(acknowledged.late)} did not answer in time ({', '.join(acknowledged.late)}): "
            "they reset at their next heartbeat"
        )
    return note


def forget_seen(client: SyncRedis, parts: Sequence[FrontierKeys], wait: float) -> Acknowledged:
    """Empty the frontier's dedup (every mode's keys, every part) for a recrawl and write a
    ``recrawl:`` epoch; then wait up to ``wait`` seconds for the live nodes to forget their
    seen-caches. The caller checked that nothing is queued or leased (it would be fetched
    twice)."""
    live = live_nodes(client, parts)
    epoch = new_epoch(RECRAWL_EPOCH)
    for keys in parts:
        client.delete(*keys.dedup_keys())
    write_epoch(client, parts, epoch)
    return wait_for_nodes(client, parts, epoch, live, wait)
