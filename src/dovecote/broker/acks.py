"""Settling a consumer's ack: what each kind of ack does to the entries it names (compatibility C5,
T1): free the prefetch window, remove the messages from the store and the memory usage, hold
them in a transaction, dead-letter or expire them. The broker finds the consumer and
dispatches afterwards; this module changes only what the ack names."""

from __future__ import annotations

from dovecote.broker.connection import ConnectionState, ConsumerRecord, TransactedAck
from dovecote.broker.consumer import release_all
from dovecote.broker.deadletters import DeadLetters
from dovecote.broker.queue import Queue
from dovecote.broker.regions import Regions, consumes
from dovecote.broker.topic import TopicSubscription
from dovecote.core.commands import AckType, MessageAck


async def settle_ack(
    regions: Regions,
    dead_letters: DeadLetters,
    state: ConnectionState,
    record: ConsumerRecord,
    ack: MessageAck,
) -> Queue | TopicSubscription | None:
    """Apply an ack; the origin whose consumer it made room for (to dispatch next)."""
    consumer, origin = record.consumer, record.origin
    if origin is None:  # a browser: its acks consume nothing, they make room for more
        if consumer.browse is not None:
            consumer.browse.acked(ack)
        return None
    entries = consumer.acked_entries(ack)
    if not entries:  # an individual ack of a message not in flight: nothing to do
        return None
    match ack.ack_type:
        case AckType.DELIVERED:
            consumer.free_window(entries)
        case AckType.STANDARD | AckType.INDIVIDUAL | AckType.UNMATCHED:
            if ack.transaction_id is not None:
                tx = state.transaction_of(ack)
                consumer.free_window(entries)
                tx.acks.append(TransactedAck(record, entries))
            else:
                ops = regions.consume_ops(origin, entries)
                if ops:  # (non-persistent messages have nothing to remove)
                    # Awaited even when not synced: a later receipt to this client means its
                    # acks before it are written (kill -9 does not bring them back).
                    await regions.store.write(ops, sync=ack.sync)
                consumer.settle(entries)
                release_all(entries)
                if isinstance(origin, Queue):
                    origin.stats.dequeued += len(entries)
                if regions.events is not None and consumes(origin):
                    await regions.events.consumed(entries)
        case AckType.POISON:
            consumer.settle(entries)
            await dead_letters.dead_letter(origin, entries, ack.poison_cause)
        case AckType.REDELIVERED:
            for entry in entries:
                entry.redelivery_counter += 1
        case AckType.EXPIRED:
            consumer.settle(entries)
            await dead_letters.expire(origin, entries)
    return origin
