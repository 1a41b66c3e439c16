"""What destinations hold, changed on request rather than by messaging: the console's purge,
removal, copy, move and retry of chosen messages and removal of a durable subscription, and
the stream requests' reads by sequence number and their commits (compatibility X1, streams.py). The
broker hands this to the admin API and to plugins as ``broker.contents``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace

from dovecote.broker import durables
from dovecote.broker.consumer import Consumer, Entry, release_all
from dovecote.broker.queue import NO_SEQUENCE_LIMIT, Queue
from dovecote.broker.regions import Regions
from dovecote.broker.topic import TopicSubscription
from dovecote.core.commands import RemoveSubscriptionInfo
from dovecote.core.destinations import Destination
from dovecote.core.errors import BrokerError
from dovecote.core.message import Message

Subscription = tuple[str, str]
"""A durable subscription's client id and name."""


class Contents:
    def __init__(
        self,
        regions: Regions,
        subscription_removed: Callable[[RemoveSubscriptionInfo, Destination], Awaitable[None]],
    ) -> None:
        self._regions = regions
        self._subscription_removed = subscription_removed

    async def purge(self, destination: Destination) -> int:
        """Remove every message waiting on a queue (not those a consumer holds
        unacknowledged, which its ack or its close settles); returns how many."""
        regions = self._regions
        queue = regions.queues.get(destination)
        if queue is None:
            return 0
        removed = 0
        while True:  # a page at a time from the store, for a backlog only the store holds
            taken = queue.remove_pending()
            await self._remove(queue, taken)
            removed += len(taken)
            if not queue.stored:
                return removed
            regions.paging.page_in(queue)

    async def remove(self, destination: Destination, message_ids: Collection[str]) -> int:
        """Remove the chosen waiting messages of a queue (ActiveMQ's removeMessage); how many
        (a message a consumer holds is its to settle)."""
        queue = await self._paged_in(destination)
        if queue is None:
            return 0
        taken = queue.remove_pending(_chosen(message_ids))
        await self._remove(queue, taken)
        return len(taken)

    async def copy(
        self, destination: Destination, message_ids: Collection[str] | None, target: Destination
    ) -> int:
        """Send copies of a queue's chosen messages (all when None; waiting or in flight) to
        ``target``, as ActiveMQ's copyMessageTo; how many."""
        queue = await self._paged_in(destination)
        if queue is None:
            return 0
        wanted = None if message_ids is None else frozenset(message_ids)
        chosen = [
            _resent(e.full_message(), target)
            for e in _entries(queue)
            if wanted is None or e.message.message_id in wanted
        ]
        await self._regions.route(chosen)
        return len(chosen)

    async def move(
        self,
        destination: Destination,
        message_ids: Collection[str] | None,
        target: Destination | None,
    ) -> int:
        """Move a queue's chosen waiting messages (all when None) to ``target``, or with
        ``target`` None to each one's original destination (ActiveMQ's retry of a DLQ's
        messages; those without one stay). The removal and the sends are one store write."""
        queue = await self._paged_in(destination)
        if queue is None:
            return 0
        chosen = _chosen(message_ids)
        retry = target is None
        taken = queue.remove_pending(
            lambda e: chosen(e) and not (retry and e.message.original_destination is None)
        )
        moved = [_resent(e.full_message(), target) for e in taken]
        ops = self._regions.consume_ops(queue, taken)
        queue.stats.dequeued += len(taken)
        release_all(taken)
        await self._regions.route(moved, extra_ops=ops)
        return len(moved)

    async def remove_subscription(self, client_id: str, name: str) -> None:
        """Remove an offline durable subscription with what it holds (UnknownSubscriptionError
        if there is none, BrokerError while a consumer is attached); plugins hear of it as of
        a client's RemoveSubscriptionInfo (advisories, network bridges)."""
        topic = await durables.remove(self._regions, client_id, name)
        info = RemoveSubscriptionInfo(client_id, name)
        await self._subscription_removed(info, topic)

    async def _paged_in(self, destination: Destination) -> Queue | None:
        queue = self._regions.queues.get(destination)
        if queue is not None:
            await self._regions.paging.page_in_all(queue)
        return queue

    async def sequences(
        self,
        destination: Destination,
        subscription: Subscription | None = None,
        after: int = 0,
        up_to: int = NO_SEQUENCE_LIMIT,
        limit: int = 0,
    ) -> list[int]:
        """The sequence numbers of what a queue, or a durable subscription to a topic, holds
        (waiting or in flight) with ``after < sequence <= up_to``, in order; the first
        ``limit`` of them (0: all). Makes the queue or subscription when it does not exist
        yet: a stream reader starts here."""
        origin = await self._origin(destination, subscription, create=True)
        if isinstance(origin, Queue):
            sequences = origin.pending_sequences(after, up_to, limit)
            held = [e.message.sequence for e in _inflight(origin.consumers)]
        else:
            sequences, held = [], [e.message.sequence for e in _held(origin)]
        held = [s for s in held if after < s <= up_to]
        if not held:
            return sequences  # (the queue's pending ones: in order already)
        sequences.extend(held)
        sequences.sort()
        return sequences[:limit] if limit else sequences

    async def messages(
        self, destination: Destination, subscription: Subscription | None, after: int, up_to: int
    ) -> list[Message]:
        """The messages held with ``after < sequence <= up_to``, in order, not consumed."""
        origin = await self._origin(destination, subscription, create=False)
        # Only the range is sorted: a Spark batch's partitions each ask for a part of it.
        if isinstance(origin, Queue):
            chosen = origin.pending_between(after, up_to)  # (in order)
            inflight = [
                e for e in _inflight(origin.consumers) if after < e.message.sequence <= up_to
            ]
            if inflight:
                chosen.extend(inflight)
                chosen.sort(key=_sequence)
        else:
            chosen = [e for e in _held(origin) if after < e.message.sequence <= up_to]
            chosen.sort(key=_sequence)
        return [entry.full_message() for entry in chosen]

    async def remove_through(
        self, destination: Destination, subscription: Subscription | None, up_to: int
    ) -> int:
        """Remove, durably, every message held with ``sequence <= up_to``; how many."""
        origin = await self._origin(destination, subscription, create=False)
        if origin is None:
            return 0
        if isinstance(origin, Queue):
            removed = origin.remove_pending_through(up_to)
        else:
            removed = [e for e in origin.pending if e.message.sequence <= up_to]
            kept = [e for e in origin.pending if e.message.sequence > up_to]
            origin.pending.clear()
            origin.pending.extend(kept)
        await self._remove(origin, removed)
        return len(removed)

    async def _remove(self, origin: Queue | TopicSubscription, entries: list[Entry]) -> None:
        ops = self._regions.consume_ops(origin, entries)
        if ops:
            await self._regions.store.write(ops)
        if isinstance(origin, Queue):
            origin.stats.dequeued += len(entries)
        release_all(entries)

    async def _origin(
        self, target: Destination, subscription: Subscription | None, create: bool
    ) -> Queue | TopicSubscription | None:
        regions = self._regions
        if target.is_queue:
            queue = regions.queue(target) if create else regions.queues.get(target)
            if queue is not None:
                # Reads by sequence see the whole queue: what only the store held comes in.
                await regions.paging.page_in_all(queue)
            return queue
        if subscription is None:
            raise BrokerError(f"reading topic {target.name} needs a durable subscription")
        client_id, name = subscription
        return await durables.find_or_create(regions, client_id, name, target, create)


def _chosen(message_ids: Collection[str] | None) -> Callable[[Entry], bool]:
    if message_ids is None:
        return lambda entry: True
    wanted = frozenset(message_ids)
    return lambda entry: entry.message.message_id in wanted


def _resent(message: Message, target: Destination | None) -> Message:
    """A message sent on by the broker (ActiveMQ's BrokerSupport.resend): to ``target`` or
    back to its original destination, which then is where it came from, never redelivered."""
    to = target if target is not None else message.original_destination
    assert to is not None
    return replace(
        message, destination=to, original_destination=message.destination, redelivery_counter=0
    )


def _sequence(entry: Entry) -> int:
    return entry.message.sequence


def _inflight(consumers: list[Consumer]) -> list[Entry]:
    return [entry for consumer in consumers for entry in consumer.inflight.values()]


def _held(origin: Queue | TopicSubscription | None) -> list[Entry]:
    """Everything the destination holds (waiting or dispatched), in no particular order."""
    if origin is None:
        return []
    if isinstance(origin, Queue):
        return [*origin.pending_entries(), *_inflight(origin.consumers)]
    consumers = [origin.consumer] if origin.consumer is not None else []
    return [*origin.pending, *_inflight(consumers)]


def _entries(origin: Queue | TopicSubscription | None) -> list[Entry]:
    """Everything the destination holds (waiting or dispatched), in sequence order."""
    entries = _held(origin)
    entries.sort(key=_sequence)
    return entries
