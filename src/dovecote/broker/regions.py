"""The broker's destinations: queues and topic subscriptions, and routing between them:
a send is stored first, then enqueued and dispatched; what dispatch settled is removed from
the store behind it.

The broker owns one ``Regions`` (ActiveMQ calls these the queue and topic regions); the
regions own the destinations, which own their pending entries. Beside them, by concern:
``paging.py`` (what each message weighs on, flow control, the store cursor),
``deadletters.py`` (redelivery, expiry, dead-letter queues; dispatch hands the entries it
finds expired there through ``on_expired``) and ``transactions.py``. Nothing here knows
about connections or protocols.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from itertools import count
from typing import TYPE_CHECKING

from dovecote.broker.connection import Origin
from dovecote.broker.consumer import Dispatched, Entry, release_all
from dovecote.broker.paging import PAGE_IN_BELOW, Paging
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.queue import Queue, QueueStats
from dovecote.broker.sequencer import Sequencer
from dovecote.broker.topic import TopicSubscription
from dovecote.core.appended_blocks import AppendedBlock
from dovecote.core.destinations import Destination, destination_matches
from dovecote.core.message import Message
from dovecote.store.api import (
    AckSubscription,
    AddMessage,
    PagedRecovery,
    PersistenceAdapter,
    RecoveredState,
    RemoveMessage,
    StoreOp,
)

if TYPE_CHECKING:
    from dovecote.broker.message_events import MessageEvents

log = logging.getLogger("dovecote.broker")

ExpiryHandler = Callable[[Queue | TopicSubscription, list[Entry]], Awaitable[None]]
CreationHandler = Callable[[list[Destination]], Awaitable[None]]
Accepted = Callable[[], None] | None
"""Called once a send is stored and enqueued, before its dispatch (``route``)."""


def now_ms() -> int:
    return int(time.time() * 1000)


class Regions:
    def __init__(
        self,
        settings: BrokerSettings,
        store: PersistenceAdapter,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.paging = Paging(settings, store)
        self.queues: dict[Destination, Queue] = {}
        self.topic_subs: dict[Destination, list[TopicSubscription]] = {}
        self.wildcard_subs: list[TopicSubscription] = []
        self.durables: dict[tuple[str, str], TopicSubscription] = {}
        self.sequencer = Sequencer()
        self.topic_stats: dict[Destination, QueueStats] = {}
        """Counters per topic (queues keep their own); a topic exists once sent to."""
        self._topic_seq = count(1)
        self.on_expired: ExpiryHandler = self.drop
        """Where dispatch hands the entries it finds expired: the broker sets its dead
        letters (regions on their own drop them)."""
        self.on_created: CreationHandler | None = None
        """Told of the queues and topics that came to exist (set by a broker whose plugins
        watch destinations: advisories); None keeps no list."""
        self.created: list[Destination] = []
        """Made since ``on_created`` was last told (only while it is set)."""
        self.events: MessageEvents | None = None
        """Message events for plugins (broker/message_events.py), None while none listens."""

    def load(self, recovered: RecoveredState | PagedRecovery) -> None:
        """Fill the destinations from what the store recovered at start: whole messages, or
        (from a paging store) each queue's count, its messages left in the store to be paged
        in as they are dispatched; those weigh on the store limit only, as with the store
        cursor."""
        self.paging.temp.open()
        if isinstance(recovered, PagedRecovery):
            last_queued = max((q.last_sequence for q in recovered.queues.values()), default=0)
        else:
            last_queued = max(
                (m.sequence for ms in recovered.queues.values() for m in ms), default=0
            )
        self.sequencer.recovered(
            last_queued,
            max((m.sequence for i in recovered.subscriptions for m in i.pending), default=0),
        )
        for destination, held in recovered.queues.items():
            queue = self.queue(destination)
            if isinstance(held, list):
                for message in held:
                    self.paging.charge(queue.enqueue(message))
            else:
                queue.stored, queue.stored_bytes = held.count, held.size
                queue.stats.enqueued += held.count
                self.paging.usage.store.charge(held.size)
        for recovered_sub in recovered.subscriptions:
            durable = recovered_sub.subscription
            sub = self.add_topic_subscription(
                TopicSubscription(durable.destination, durable=durable)
            )
            for message in recovered_sub.pending:
                entry = Entry(message, next(self._topic_seq))
                self.paging.charge(entry)
                sub.offer(entry)

    def queue(self, destination: Destination) -> Queue:
        queue = self.queues.get(destination)
        if queue is None:
            queue = self.queues[destination] = Queue(destination)
            if self.on_created is not None:
                self.created.append(destination)
        return queue

    def topic_counters(self, destination: Destination) -> QueueStats:
        stats = self.topic_stats.get(destination)
        if stats is None:
            if self.on_created is not None and destination not in self.topic_subs:
                self.created.append(destination)
            stats = self.topic_stats[destination] = QueueStats()
        return stats

    async def create(self, destination: Destination) -> None:
        """Make a destination exist before anything is sent to it (a producer's, or one a
        DestinationInfo names), as ActiveMQ does; temporary ones are made otherwise."""
        for part in destination.components():
            if part.is_temporary or part.is_wildcard:
                continue
            if part.is_queue:
                self.queue(part)
            elif part not in self.topic_subs:
                self.topic_counters(part)
        await self.announce_created()

    async def announce_created(self) -> None:
        """Tell ``on_created`` of the destinations made since it was last told."""
        if self.created and self.on_created is not None:
            created, self.created = self.created, []
            await self.on_created(created)

    def topic_subscriptions(self, destination: Destination) -> list[TopicSubscription]:
        """The subscriptions a message sent to ``destination`` reaches."""
        subs = list(self.topic_subs.get(destination, ()))
        subs.extend(
            s for s in self.wildcard_subs if destination_matches(s.destination, destination)
        )
        return subs

    def add_topic_subscription(self, sub: TopicSubscription) -> TopicSubscription:
        if sub.destination.is_wildcard or sub.destination.is_composite:
            self.wildcard_subs.append(sub)
        else:
            subs = self.topic_subs.get(sub.destination)
            if subs is None:
                subs = self.topic_subs[sub.destination] = []
                if self.on_created is not None and sub.destination not in self.topic_stats:
                    self.created.append(sub.destination)
            subs.append(sub)
        if sub.durable is not None:
            self.durables[(sub.durable.client_id, sub.durable.name)] = sub
        return sub

    def drop_topic_subscription(self, sub: TopicSubscription) -> None:
        if sub.destination.is_wildcard or sub.destination.is_composite:
            self.wildcard_subs.remove(sub)
        else:
            subs = self.topic_subs.get(sub.destination, [])
            if sub in subs:
                subs.remove(sub)
        if sub.key is not None:
            self.durables.pop(sub.key, None)

    async def offer(self, sub: TopicSubscription, messages: Iterable[Message]) -> None:
        """Give one subscription messages of its own, those it matches (advisory replays,
        as ActiveMQ's targetConsumerId), and dispatch them; nothing is stored."""
        for message in messages:
            if destination_matches(sub.destination, message.destination) and sub.matches(message):
                entry = Entry(message, next(self._topic_seq))
                self.paging.charge(entry)
                dropped = sub.offer(entry)
                if dropped is not None:
                    dropped.release()
        await self._dispatch_sub(sub)

    async def route(
        self,
        messages: Iterable[Message],
        extra_ops: Iterable[StoreOp] = (),
        sync: bool = True,
        accepted: Accepted = None,
        blocks: Mapping[int, AppendedBlock] | None = None,
    ) -> None:
        """Store (persistent ones, in one batch; the write synced unless ``sync`` is False:
        nobody waits for it) and then deliver messages to destinations. ``accepted`` is
        called once they are stored and enqueued, before they are dispatched: a sender's
        answer need not wait for the dispatch (nor does ActiveMQ's). ``blocks``: the Append
        blocks among ``messages``, by the id of their first (LocalTransaction.blocks)."""
        ops: list[StoreOp] = list(extra_ops)
        to_queues: list[Message] = []
        to_topics: list[tuple[Message, list[TopicSubscription]]] = []
        sequencer = self.sequencer
        first_seq = sequencer.last + 1
        clock = sequencer.clock()
        for original in messages:
            for destination in original.destination.components():
                if destination.is_queue:
                    message = original.routed(destination, sequencer.next_at(clock))
                    to_queues.append(message)
                    if message.persistent:
                        block = blocks.get(id(original)) if blocks else None
                        ops.append(AddMessage(message, block))
                    continue
                message = original
                if destination != original.destination:
                    message = replace(original, destination=destination)
                subs = [s for s in self.topic_subscriptions(destination) if s.matches(message)]
                if any(s.durable is not None for s in subs):
                    message = replace(message, sequence=sequencer.next_at(clock))
                self.topic_counters(destination).enqueued += 1
                to_topics.append((message, subs))
                if message.persistent:
                    ops.extend(self._durable_topic_ops(message, subs))
        # Until enqueued, the numbers just given out are not visible to streaming readers.
        stamped = sequencer.last >= first_seq
        if stamped:
            sequencer.opened(first_seq)
        try:
            if ops:
                await self.store.write(ops, sync=sync)
        except BaseException:
            if stamped:
                sequencer.closed(first_seq)
            raise
        # Enqueue everything first, then dispatch each destination once.
        queues: dict[Destination, Queue] = {}
        for message in to_queues:
            queue = queues.get(message.destination) or self.queue(message.destination)
            queues[message.destination] = queue
            if self.paging.held_by_store(queue, message):
                self.paging.hold_stored(queue, message)
            else:
                self.paging.charge(queue.enqueue(message))
        touched: dict[int, TopicSubscription] = {}
        for message, subs in to_topics:
            entries = [Entry(message, next(self._topic_seq)) for _ in subs]
            self.paging.charge_copies(message, entries)
            for sub, entry in zip(subs, entries, strict=True):
                dropped = sub.offer(entry)
                if dropped is not None:
                    dropped.release()
                    log.debug("pending limit dropped %s on %s", dropped.message_id, sub.destination)
                    if self.events is not None:
                        await self.events.discarded(sub, dropped)
                touched[id(sub)] = sub
        if stamped:
            sequencer.closed(first_seq)
        if accepted is not None:
            accepted()
        events = self.events
        if events is not None:
            await events.delivered([*to_queues, *(message for message, _ in to_topics)])
        for queue in queues.values():
            await self._dispatch_queue(queue)
        for sub in touched.values():
            await self._dispatch_sub(sub)
            if events is not None:
                await events.dispatched(sub)
        if self.created:
            await self.announce_created()

    def _durable_topic_ops(
        self, message: Message, matching: list[TopicSubscription]
    ) -> list[StoreOp]:
        """Store a persistent topic message if a durable subscription needs it; the durable
        subscriptions whose selector skips it ack it at once (ActiveMQ's UNMATCHED ack)."""
        durables = [s for s in self.topic_subscriptions(message.destination) if s.durable]
        if not any(s in matching for s in durables):
            return []
        ops: list[StoreOp] = [AddMessage(message)]
        for sub in durables:
            if sub not in matching and sub.durable is not None:
                d = sub.durable
                ops.append(AckSubscription(d.destination, d.client_id, d.name, message.message_id))
        return ops

    async def dispatch(self, origin: Origin) -> None:
        match origin:
            case Queue():
                await self._dispatch_queue(origin)
            case TopicSubscription():
                await self._dispatch_sub(origin)

    async def _dispatch_queue(self, queue: Queue) -> None:
        while True:
            if queue.stored and queue.consumers:
                self.paging.page_in(queue)
            dispatched = queue.stats.dispatched
            done = queue.dispatch(self.clock())
            await self._settle_dispatched(queue, done)
            # Consumers may have room for more than one page of a stored backlog.
            progress = queue.stats.dispatched > dispatched or done.expired
            if not (queue.stored and progress and queue.pending_count < PAGE_IN_BELOW):
                return

    async def _dispatch_sub(self, sub: TopicSubscription) -> None:
        await self._settle_dispatched(sub, sub.dispatch(self.clock()))

    async def _settle_dispatched(self, origin: Queue | TopicSubscription, done: Dispatched) -> None:
        if done.settled:
            if isinstance(origin, Queue):
                origin.stats.dequeued += len(done.settled)
            else:
                # Counted per run of one destination (a subscription's entries mostly are).
                run: Destination | None = None
                stats = None
                for entry in done.settled:
                    destination = entry.message.destination
                    if destination is not run or stats is None:
                        run, stats = destination, self.topic_counters(destination)
                    stats.dispatched += 1
                    stats.dequeued += 1
            release_all(done.settled)
            if self.events is not None and consumes(origin):
                await self.events.consumed(done.settled)
            # Auto-acked on dispatch: nobody waits for these removals, so they need no sync
            # of their own (KahaDB syncs only acks a client asked a response for); a crash
            # before the next sync may redeliver them (at least once, compatibility M7).
            self.write_behind(self.consume_ops(origin, done.settled))
        if done.expired:
            await self.on_expired(origin, done.expired)

    def write_behind(self, ops: list[StoreOp]) -> None:
        """Start an unsynced, lazy store write and go on without waiting for it: the
        removals of messages settled on dispatch. It takes its place in the store's order
        now (whatever is written after it comes after it) and joins the next group written
        (a sync send's add: one index transaction for both); a failure is logged, and its
        messages come back after a restart. Waiting would hold the sender's receipt behind
        a second store write. The price: a broker killed within a few ms of the dispatch
        delivers the message again (at least once, as after any crash)."""
        if ops:
            write = self.store.write(ops, sync=False, lazy=True)
            # (The journal's write is a future already: asyncio.ensure_future is interpreted,
            # a cost on every sync send for finding that out.)
            pending = write if isinstance(write, asyncio.Future) else asyncio.ensure_future(write)
            pending.add_done_callback(log_failure("a store write nobody waited for"))

    def consume_ops(self, origin: Queue | TopicSubscription, entries: list[Entry]) -> list[StoreOp]:
        ops: list[StoreOp] = []
        for entry in entries:
            message = entry.message
            if not message.persistent:
                continue
            if isinstance(origin, Queue):
                ops.append(RemoveMessage(origin.destination, message.message_id))
            elif origin.durable is not None:
                d = origin.durable
                ops.append(AckSubscription(d.destination, d.client_id, d.name, message.message_id))
        return ops

    async def drop(self, origin: Queue | TopicSubscription, entries: list[Entry]) -> None:
        """Remove entries from their origin's keeping: the store's and the usages'."""
        self.write_behind(self.consume_ops(origin, entries))
        release_all(entries)


def consumes(origin: Queue | TopicSubscription) -> bool:
    """Its acks are what ActiveMQ calls consumed: a queue's, or a durable subscription's."""
    return isinstance(origin, Queue) or origin.durable is not None


def log_failure(what: str) -> Callable[[asyncio.Future[None]], None]:
    """A done-callback for work started and not awaited: logs its failure, if any."""

    def check(done: asyncio.Future[None]) -> None:
        if not done.cancelled() and (error := done.exception()) is not None:
            log.error("%s failed: %s", what, error)

    return check
