"""Attaching a consumer to what it draws from (a queue, a topic subscription of its own, a
durable subscription, or a queue's contents once for a browser), and detaching it: what it
held and its application had not acknowledged goes back, redelivered or in place."""

from __future__ import annotations

from dovecote.broker import durables
from dovecote.broker.connection import ConnectionState, ConsumerRecord, Origin
from dovecote.broker.consumer import Browse, Consumer, Entry, handed_over, release_all
from dovecote.broker.deadletters import DeadLetters
from dovecote.broker.queue import Queue
from dovecote.broker.regions import Regions
from dovecote.broker.topic import TopicSubscription, pending_limit
from dovecote.core.errors import BrokerError


async def attach(regions: Regions, state: ConnectionState, consumer: Consumer) -> Origin:
    """Where a new consumer draws from (None for a browser, which is served here and now)."""
    info = consumer.info
    destination = info.destination
    if info.browser:
        browse(regions, consumer)
        return None
    if destination.is_queue:
        queue = regions.queue(destination)
        queue.add_consumer(consumer)
        return queue
    if info.subscription_name:
        if state.info.client_id is None:
            raise BrokerError("a durable subscription needs a client id on its connection")
        return await durables.attach(regions, state.client_id, consumer)
    limit = pending_limit(
        regions.settings.policies.for_destination(destination).pending_message_limit,
        info.maximum_pending_message_limit,
    )
    sub = TopicSubscription(destination, consumer, pending_limit=limit)
    return regions.add_topic_subscription(sub)


def browse(regions: Regions, consumer: Consumer) -> None:
    """A queue browser gets what the queue holds (not expired, matching its selector), a
    prefetch's worth at a time, then the end of the browse."""
    destination = consumer.info.destination
    queue = regions.queues.get(destination) if destination.is_queue else None
    messages = regions.paging.browse(queue) if queue is not None else iter(())
    walk = consumer.browse = Browse(consumer, messages, regions.clock)
    walk.pump()


def detach(
    regions: Regions, state: ConnectionState, record: ConsumerRecord
) -> tuple[Origin, list[Entry]]:
    """Take a consumer off its origin; return the origin and the entries to give back."""
    origin = record.origin
    if origin is None:
        return None, []
    # Messages acked in an open transaction stay with it until commit or rollback.
    held = {
        e.message_id
        for tx in state.transactions.values()
        for ack in tx.acks
        if ack.record is record
        for e in ack.entries
    }
    if isinstance(origin, Queue):
        returned = origin.remove_consumer(record.consumer)
    else:
        returned = origin.detach()
        if regions.events is not None:  # (what it knew of a slow subscriber)
            regions.events.forget(record.consumer.info.consumer_id)
        if origin.durable is None:
            regions.drop_topic_subscription(origin)
            # A non-durable subscription's messages go with it.
            release_all(returned)
            release_all(origin.remove_pending())
            return origin, []
    return origin, [e for e in returned if e.message_id not in held]


async def give_back(
    dead_letters: DeadLetters, origin: Origin, entries: list[Entry], last_delivered: int
) -> None:
    """Return a leaving consumer's messages: those its application was handed are
    redelivered (counted), those it only prefetched go back in place as they were."""
    if origin is None or not entries:
        return
    seen, unseen = handed_over(entries, last_delivered, isinstance(origin, Queue))
    if unseen:
        origin.requeue(unseen)
    await dead_letters.redeliver(origin, seen)
