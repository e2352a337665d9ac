"""The frontier's epoch: noticing a wiped or replaced Redis (no Scrapy imports).

The first node to open a spider's frontier writes a random epoch to
``{<spider>}:epoch``; every node remembers it and sends it with each heartbeat.
A Redis restarted without persistence (or another server behind the same URL)
has no epoch, or another one: the heartbeat then does nothing but report it.
The node that sees it logs an ERROR, adopts the frontier's new epoch (creating
it if there is none), records an incident in ``{<spider>}:incidents`` (what it
knew, what it re-enqueued) and re-enqueues every request it holds, so work in
flight is not lost with the data; requests that were only queued in the lost
data are gone, and ``crawler status`` says so instead of "finished". A forced
``crawler purge`` writes an epoch starting with ``purged:``: nodes then drop what
they hold and their seen-caches instead (nothing to recover: the operator reset it);
``crawler seed --recrawl`` writes one starting with ``recrawl:``: the dedup was emptied,
so nodes only forget their seen-caches and keep their work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from crawler.frontier import codec
from crawler.frontier.client import Finish, NewRequest
from crawler.frontier.partitioned import PartitionedFrontier
from crawler.scope import site_of

logger = logging.getLogger(__name__)

PURGED_EPOCH = "purged:"  # the prefix of the epoch a forced purge writes
RECRAWL_EPOCH = "recrawl:"  # ``crawler seed --recrawl``: the dedup was emptied, keep the work


def operator_reset(epoch: str) -> str | None:
    """The reset an operator wrote into some part of ``epoch`` (``PURGED_EPOCH`` or
    ``RECRAWL_EPOCH``; a reset writes every part, a node may see it half written)."""
    for prefix in (PURGED_EPOCH, RECRAWL_EPOCH):
        if any(part.startswith(prefix) for part in epoch.split(" ")):
            return prefix
    return None


@dataclass(frozen=True, slots=True)
class Recovery:
    epoch: str  # the frontier's epoch from now on
    requeued: int


def _requeued(body: bytes, fingerprint: str) -> NewRequest:
    """A held request, queued again in the part of its site with its priority whatever the new
    dedup holds (a write in the new data may have leased it already: that lease is finished),
    its ``fingerprint`` recorded there (a link to it found later is not queued again)."""
    try:
        stored = codec.loads(body)
        score, site = -float(stored.get("priority", 0)), site_of(str(stored.get("url", "")))
    except (ValueError, TypeError, AttributeError):
        score, site = 0.0, ""
    return NewRequest(fingerprint=fingerprint, score=score, body=body, force=True, site=site)


async def recover(
    client: PartitionedFrontier,
    known: str,
    found: str,
    held: list[bytes],
    lease_ids: list[str],
    *,
    fingerprint: Callable[[bytes], str],
) -> Recovery:
    """The frontier's epoch is ``found`` ("" for a part = none), not ``known``: adopt it,
    record the incident, drop this node's leases of ``lease_ids`` (the ids it holds) that
    the new data has, and re-enqueue ``held`` (the request bodies this node holds), each with
    its dedup ``fingerprint``.

    Writes and lease calls that ran between Redis coming back and this heartbeat took leases
    in the new data; their requests are among ``held`` and queued again here, so those lease
    records would only wait out the lease timeout (a stalled crawl) to be reclaimed and
    fetched once more. Both go in one write per part (the node leases nothing meanwhile);
    a lease id that is another node's in the new data is not touched (``stolen``)."""
    epoch = found if client.whole(found) else await client.open_epoch()
    logger.error(
        "The frontier %s lost its data (epoch %s, now %s): Redis was restarted without "
        "persistence, flushed, replaced, or rolled back (a failover to a replica that was "
        "behind, an older snapshot). Re-enqueuing the %d requests this node holds; requests "
        "that were only queued in the data lost are lost (crawler status shows the incident; "
        "the node exits 1 at its end)",
        client.keys.tag,
        known,
        epoch if client.whole(found) else f"{epoch} (new)",
        len(held),
    )
    await client.record_incident(
        orjson.dumps(
            {
                "kind": "frontier_lost",
                "node": client.node_id,
                "at": time.time(),
                "epoch_before": known,
                "epoch_after": epoch,
                "requeued": len(held),
            }
        )
    )
    if held or lease_ids:  # the leases finished as done: their bodies are among those queued
        await client.complete_turn(
            [_requeued(body, fingerprint(body)) for body in held],
            [(Finish(lease_id, "done"), []) for lease_id in lease_ids],
        )
    return Recovery(epoch=epoch, requeued=len(held))
