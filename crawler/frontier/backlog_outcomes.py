"""What one spill to the backlog topic did with each of its leases, and the counts of spills
and of the backlog's steps (no Scrapy imports; used by ``crawler.frontier.backlog`` and
``crawler.frontier.backlog_spill``)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from crawler.frontier.keys import FrontierKeys


@dataclass(frozen=True, slots=True)
class SpillCounts:
    spilled: int = 0  # acknowledged by Kafka: out of Redis
    refused: int = 0  # given back to the queue
    damaged: int = 0  # unreadable: failed, with a record
    unsure: int = 0  # of the refused, sent and timed out, purged or unanswered: maybe in Kafka
    reclaimed: int = 0  # in Kafka, and reclaimed by another node first: skipped when read back

    def __add__(self, other: SpillCounts) -> SpillCounts:
        return SpillCounts(
            self.spilled + other.spilled,
            self.refused + other.refused,
            self.damaged + other.damaged,
            self.unsure + other.unsure,
            self.reclaimed + other.reclaimed,
        )


@dataclass(slots=True)
class SpillOutcomes:
    """What became of each lease of one spill, as the delivery reports come in."""

    # the part's epoch when the spill began ('' without one): Redis that lost its data since
    # has lost the spill's leases too, which are then not another node's
    epoch: str = ""
    # the spill's own id, its messages' keys' prefix: a lease id alone comes again once the
    # part's counter starts over (Redis lost its data) while older messages wait in Kafka
    spill_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    acked: dict[str, int] = field(default_factory=dict)  # lease id -> its message's offset
    failed: list[str] = field(default_factory=list)
    unsure: list[str] = field(default_factory=list)  # failed after they may have been written
    sent: set[str] = field(default_factory=set)
    settled: set[str] = field(default_factory=set)  # spilled, failed or given back
    # recorded unsure: queued again whatever report comes after (its message is to be skipped)
    marked: set[str] = field(default_factory=set)
    # acknowledged, but their leases expired and another node took them
    reclaimed: set[str] = field(default_factory=set)

    @property
    def prefix(self) -> str:
        """The prefix of the keys of the spill's messages."""
        return f"{self.spill_id}:"

    def key(self, lease_id: str) -> str:
        """The key of the message of ``lease_id``'s request: unique to this spill."""
        return self.prefix + lease_id

    def maybe_written(self, lease_id: str) -> bool:
        """Whether Kafka may hold the message of ``lease_id`` though the spill cannot count it
        as spilled: sent, and not acknowledged (or recorded unsure already) nor failed for sure
        (a timeout or a purge after it was sent is no sure failure)."""
        if lease_id in self.marked:
            return True
        if lease_id not in self.sent or lease_id in self.acked:
            return False
        return lease_id not in self.failed or lease_id in self.unsure


@dataclass(eq=False, slots=True)  # each is itself: kept in a list, removed by identity
class Unsettled:
    """A spill's leases not settled when it raised or was cancelled."""

    keys: FrontierKeys
    rest: list[str]
    out: SpillOutcomes
    unsure: list[str]
    pending: asyncio.Future[int] | None = None  # its give-back under way, or a stop cut short


class Stats(Protocol):
    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None: ...


@dataclass(frozen=True, slots=True)
class Step:
    spilled: int
    refilled: int
    refused: int  # spilled requests Kafka did not acknowledge (released back to the queue)
    read_errors: int = 0  # errors the consumer reported instead of messages
    undecodable: int = 0  # taken to spill, their stored body unreadable: failed, with a record
    refill_undecodable: int = 0  # messages read back that were not spilled requests: the same
    refill_skipped: int = 0  # read again after a reader died before committing them: skipped
    refill_lost: int = 0  # gone from the topic before they were read back (its retention)
    topic_lost: int = 0  # waited in a topic made again (deleted by hand, or by another client)
    unsure: int = 0  # of the refused, sent and timed out, purged or unanswered: maybe in Kafka
    refill_requeued: int = 0  # read back, written all the same after ``unsure``: skipped
    spill_reclaimed: int = 0  # acknowledged after another node reclaimed them: queued, skipped
    bounds_differ: int = 0  # 1: live nodes were found keeping another FRONTIER_QUEUE_MAX (said)

    @classmethod
    def of_spills(cls, spills: SpillCounts) -> Step:
        return cls(
            spills.spilled,
            0,
            spills.refused,
            undecodable=spills.damaged,
            unsure=spills.unsure,
            spill_reclaimed=spills.reclaimed,
        )

    def count(self, stats: Stats) -> None:
        """Add what the step did to the node's stats."""
        for name, count in (
            ("frontier/spilled", self.spilled),
            ("frontier/refilled", self.refilled),
            ("frontier/spill_refused", self.refused),
            ("frontier/spill_unsure", self.unsure),
            ("frontier/spill_reclaimed", self.spill_reclaimed),
            ("frontier/backlog_bounds_differ", self.bounds_differ),
            ("frontier/refill_requeued_skipped", self.refill_requeued),
            ("frontier/backlog_read_error", self.read_errors),
            ("frontier/spill_undecodable", self.undecodable),
            ("frontier/refill_undecodable", self.refill_undecodable),
            ("frontier/refill_skipped", self.refill_skipped),
            ("frontier/refill_lost", self.refill_lost),
            ("frontier/backlog_lost", self.topic_lost),
        ):
            if count:
                stats.inc_value(name, count)
