"""Which Kafka failures pass and which never will (no Scrapy imports).

One classification for every message the sender produces, items and dead letters alike: a
permanent failure would be refused again (dead-lettered, or for a dead letter written to the
node's file); any other is transient (spooled and replayed).
"""

from __future__ import annotations

from confluent_kafka import KafkaError, Message

# delivery reports of these are permanent; every other failed report is transient
PERMANENT_ERRORS = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_MSG_SIZE,
        KafkaError.INVALID_MSG,
        KafkaError.INVALID_RECORD,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError._INVALID_ARG,
        KafkaError.INVALID_TIMESTAMP,  # outside the broker's window: would be refused again
        KafkaError.TOPIC_EXCEPTION,  # an invalid topic name
    }
)
# The broker refuses a whole batch for one of its records (librdkafka reports the error for
# each message of the batch): a message failed so is sent again alone before it is
# dead-lettered. The others (authorization, a topic's name) would refuse each one alike.
BATCH_ERRORS = frozenset(
    {
        KafkaError.INVALID_TIMESTAMP,
        KafkaError.INVALID_RECORD,  # e.g. a record without a key in a compacted topic
        KafkaError.INVALID_MSG,  # the broker's CORRUPT_MESSAGE
        KafkaError.MSG_SIZE_TOO_LARGE,  # the batch is larger than the topic's max.message.bytes
        KafkaError.RECORD_LIST_TOO_LARGE,
    }
)
BROKER_DOWN_ERRORS = frozenset({KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT})
# produce() refusals that pass: metadata lags behind a new topic or a late broker; fatal
# errors recreate the producer; a full local queue (ItemProducer.send returns False for it)
# empties; every other produce() refusal is permanent
TRANSIENT_PRODUCE_ERRORS = frozenset(
    {
        KafkaError._QUEUE_FULL,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._FATAL,
    }
)
UNKNOWN_TOPIC_ERRORS = frozenset({KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART})
PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
# transient failures of the node's own making, which say nothing of the broker: no outage
LOCAL_ERRORS = PURGED | {KafkaError._QUEUE_FULL}


def unproven(error: KafkaError | None, message: Message) -> bool:
    """A delivery report of success without an offset: librdkafka's "implicit acknowledgement"
    of a batch that failed (``Not leader for partition``, as at a new topic's first produce)
    once a batch sent after it succeeded. A broker with no state for the producer may have
    written the later batch only (a reproduction: 1 and 3 of 400 items acknowledged so and not
    in the topic): no proof that Kafka holds the message."""
    return error is None and message.offset() is None


def is_permanent(error: KafkaError, *, at_produce: bool = False) -> bool:
    """Whether Kafka would refuse the message again: a failed delivery report
    (``at_produce``: a refusal ``produce()`` raised)."""
    if at_produce:
        return error.code() not in TRANSIENT_PRODUCE_ERRORS
    return error.code() in PERMANENT_ERRORS


def error_reason(error: KafkaError) -> str:
    return str(error.name()).lower()
