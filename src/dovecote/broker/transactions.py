"""Local transactions (compatibility T1): a commit makes its sends and acks durable in one store
batch, then delivers the sends and settles the acks; a rollback undoes the acks."""

from __future__ import annotations

from collections.abc import Container

from dovecote.broker.connection import LocalTransaction
from dovecote.broker.consumer import release_all
from dovecote.broker.deadletters import DeadLetters
from dovecote.broker.queue import Queue
from dovecote.broker.regions import Regions
from dovecote.core.collector import NoCollections
from dovecote.core.ids import ConsumerId
from dovecote.store.api import StoreOp

LARGE_COMMIT_SENDS = 1000
"""A commit of this many sends or more runs with the collector paused (NoCollections): the
objects each send makes on its way to the store, most of them freed by its end, go unwalked;
the messages and entries the queues keep go to the oldest generation, unwalked too."""


async def commit(regions: Regions, tx: LocalTransaction) -> None:
    if len(tx.sends) < LARGE_COMMIT_SENDS:
        await _commit(regions, tx)
        return
    with NoCollections(promote=True):
        await _commit(regions, tx)


async def _commit(regions: Regions, tx: LocalTransaction) -> None:
    # Acks and sends become durable in one store batch: the commit is atomic (compatibility T1).
    ops: list[StoreOp] = []
    for ack in tx.acks:
        if ack.record.origin is not None:
            ops.extend(regions.consume_ops(ack.record.origin, ack.entries))
    await regions.route(tx.sends, extra_ops=ops, blocks=tx.blocks)
    for ack in tx.acks:
        ack.record.consumer.settle(ack.entries)
        release_all(ack.entries)
        if isinstance(ack.record.origin, Queue):
            ack.record.origin.stats.dequeued += len(ack.entries)
        await regions.dispatch(ack.record.origin)


async def rollback(
    dead_letters: DeadLetters, tx: LocalTransaction, redeliver: bool, live: Container[ConsumerId]
) -> None:
    """Undo a transaction's acks; ``live``: the consumers still attached."""
    for ack in tx.acks:
        consumer, origin = ack.record.consumer, ack.record.origin
        if origin is None:
            continue
        if consumer.info.consumer_id not in live:
            # The consumer is gone; its acked messages were held back for this moment.
            await dead_letters.redeliver(origin, ack.entries)
        elif redeliver:
            await dead_letters.redeliver(origin, consumer.take_back(ack.entries))
        else:
            # The client redelivers these itself; they stay in flight to it.
            consumer.restore_window(ack.entries)
