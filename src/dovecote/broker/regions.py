"""The broker's destinations: queues and topic subscriptions, and everything that moves
messages between them: routing a send (store first, then enqueue and dispatch), settling
what dispatch settled, redelivery with its limit, expiry and the dead-letter queues.

The broker owns one ``Regions`` (ActiveMQ calls these the queue and topic regions); the
regions own the destinations, which own their pending entries. Nothing here knows about
connections or protocols.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import replace
from itertools import count

from dovecote.broker.connection import LocalTransaction, Origin
from dovecote.broker.consumer import Dispatched, Entry, release_all
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.queue import Queue, QueueStats
from dovecote.broker.sequencer import Sequencer
from dovecote.broker.topic import TopicSubscription
from dovecote.broker.usage import SystemUsage, TempStore, Usage
from dovecote.core.destinations import Destination, destination_matches
from dovecote.core.errors import DovecoteError
from dovecote.core.ids import ConsumerId
from dovecote.core.message import Message
from dovecote.store.api import (
    AckSubscription,
    AddMessage,
    PagedRecovery,
    PagingStore,
    PersistenceAdapter,
    QueuePage,
    QueuePosition,
    RecoveredState,
    RemoveMessage,
    StoreOp,
    UpdateRedelivery,
)

log = logging.getLogger("dovecote.broker")

DLQ_CAUSE_PROPERTY = "dlqDeliveryFailureCause"
CURSOR_HIGH_WATER_MARK = 0.7
"""ActiveMQ's cursorMemoryHighWaterMark: past this share of its memory limit, a store
cursor keeps persistent messages out of memory."""
PAGE_IN_BELOW = 200
"""A queue with messages in the store only reads more once fewer than this wait in memory."""
PAGE_IN_CHUNK = 100
"""Messages read from the store at a time, up to ``2 * PAGE_IN_BELOW`` waiting or the
memory mark."""

QueueReader = Callable[[Destination, QueuePosition, int], QueuePage]


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
        # A store that reads a queue back a page at a time (the journal) holds the queue
        # messages the store cursor keeps out of memory; for others the bodies wait in the
        # temp store.
        self._reader: QueueReader | None = (
            store.read_queue if isinstance(store, PagingStore) else None
        )
        self.clock = clock
        self.usage = SystemUsage(
            settings.memory_limit,
            settings.store_limit,
            settings.temp_limit,
            settings.send_fail_if_no_space,
        )
        self.temp = TempStore(settings.temp_directory)
        self._memory: dict[Destination, Usage] = {}
        self._flow_control_of: dict[Destination, bool] = {}  # (policies are fixed at start)
        self.queues: dict[Destination, Queue] = {}
        self.topic_subs: dict[Destination, list[TopicSubscription]] = {}
        self.wildcard_subs: list[TopicSubscription] = []
        self.durables: dict[tuple[str, str], TopicSubscription] = {}
        self.sequencer = Sequencer()
        self.topic_stats: dict[Destination, QueueStats] = {}
        """Counters per topic (queues keep their own); a topic exists once sent to."""
        self._topic_seq = count(1)
        self._unreadable: set[Destination] = set()
        """Queues whose stored messages the store could not read (logged once until it can)."""

    def load(self, recovered: RecoveredState | PagedRecovery) -> None:
        """Fill the destinations from what the store recovered at start: whole messages, or
        (from a paging store) each queue's count, its messages left in the store to be paged
        in as they are dispatched; those weigh on the store limit only, as with the store
        cursor."""
        self.temp.open()
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
                    self._charge(queue.enqueue(message))
            else:
                queue.stored, queue.stored_bytes = held.count, held.size
                queue.stats.enqueued += held.count
                self.usage.store.charge(held.size)
        for recovered_sub in recovered.subscriptions:
            durable = recovered_sub.subscription
            sub = self.add_topic_subscription(
                TopicSubscription(durable.destination, durable=durable)
            )
            for message in recovered_sub.pending:
                entry = Entry(message, next(self._topic_seq))
                self._charge(entry)
                sub.offer(entry)

    # -- the store cursor: queue messages held by the store only ---------------------------

    def _held_by_store(self, queue: Queue, message: Message) -> bool:
        """Whether a new queue message stays in the store only: always while older ones do
        (send order), else once its destination's memory is past the cursor's mark."""
        if self._reader is None or not message.persistent:
            return False
        if queue.stored:
            return True
        return bool(message.body) and (
            self.memory_usage(message.destination).above(CURSOR_HIGH_WATER_MARK)
            and self.settings.policies.for_destination(message.destination).store_cursor
        )

    def page_in(self, queue: Queue, everything: bool = False) -> None:
        """Read a stored queue's next messages while few wait in memory, as many as fit
        below the memory mark (one at least when none wait), or all of them."""
        reader = self._reader
        if reader is None:
            return
        memory = self.memory_usage(queue.destination)
        while queue.stored:
            if everything:
                limit = PAGE_IN_CHUNK
            elif queue.pending_count >= 2 * PAGE_IN_BELOW:
                return
            else:
                room = memory.room_below(CURSOR_HIGH_WATER_MARK)
                average = max(queue.stored_bytes // queue.stored, 1)
                limit = PAGE_IN_CHUNK if room is None else min(PAGE_IN_CHUNK, room // average)
                if limit <= 0:
                    if queue.pending_count:
                        return
                    limit = 1
            # Never past the messages counted: the index may already hold a message whose
            # send has not come back from the store to be counted (and held) yet.
            try:
                page = reader(queue.destination, queue.stored_from, min(limit, queue.stored))
            except (DovecoteError, OSError) as exc:
                # The store cannot read now (a full disk holding its index back): the
                # messages wait there, the next dispatch tries again, and the connection
                # that set this dispatch off is not the one to hear of it.
                if queue.destination not in self._unreadable:
                    self._unreadable.add(queue.destination)
                    log.warning("%s: %d stored messages cannot be read now (%s); they wait",
                                queue.destination, queue.stored, exc)  # fmt: skip
                return
            self._unreadable.discard(queue.destination)
            if page.lost:
                # Damaged in the store (which logged them and dropped them): no longer held.
                queue.stored -= page.lost
                queue.stored_bytes -= page.lost_bytes
                self.usage.store.release(page.lost_bytes)
            elif not page.messages:
                log.warning("%s: %d messages expected in the store were not found",
                            queue.destination, queue.stored)  # fmt: skip
            for entry in queue.take_page(page):
                # Charged to the store when it was held there; now to memory as well.
                entry.charged = (memory, self.usage.store)
                memory.charge(entry.size)

    def page_in_all(self, queue: Queue) -> None:
        """Bring every stored message of a queue into memory (for readers that need the
        whole queue at once: stream offsets)."""
        self.page_in(queue, everything=True)

    def forget_stored(self, queue: Queue) -> None:
        """A removed queue's stored messages go with it (the store removes them)."""
        self.usage.store.release(queue.stored_bytes)
        queue.stored = queue.stored_bytes = 0

    def browse(self, queue: Queue) -> Iterator[Message]:
        """Everything a queue holds, those left in the store last, read a page at a time."""
        yield from queue.browse()
        reader, start, left = self._reader, queue.stored_from, queue.stored
        while reader is not None and left > 0:
            page = reader(queue.destination, start, min(PAGE_IN_CHUNK, left))
            if not page.messages:
                return
            yield from page.messages
            start, left = page.next, left - len(page.messages) - page.lost

    def queue(self, destination: Destination) -> Queue:
        queue = self.queues.get(destination)
        if queue is None:
            queue = self.queues[destination] = Queue(destination)
        return queue

    def topic_counters(self, destination: Destination) -> QueueStats:
        stats = self.topic_stats.get(destination)
        if stats is None:
            stats = self.topic_stats[destination] = QueueStats()
        return stats

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
            self.topic_subs.setdefault(sub.destination, []).append(sub)
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

    def offer(self, sub: TopicSubscription, message: Message) -> None:
        """Give one subscription a message of its own (advisory replays)."""
        entry = Entry(message, next(self._topic_seq))
        self._charge(entry)
        dropped = sub.offer(entry)
        if dropped is not None:
            dropped.release()

    # -- usage ---------------------------------------------------------------------------

    def memory_usage(self, destination: Destination) -> Usage:
        usage = self._memory.get(destination)
        if usage is None:
            limit = self.settings.policies.for_destination(destination).memory_limit
            usage = Usage(f"{destination} memory", limit, parent=self.usage.memory)
            self._memory[destination] = usage
        return usage

    async def admit(self, message: Message) -> None:
        """Producer flow control (SPEC S4): wait (or fail) while a usage the message would
        weigh on is full."""
        for destination in message.destination.components():
            for usage in self._limits(message, destination):
                await self.usage.wait_for(usage, str(destination))

    def admits_now(self, message: Message) -> bool:
        """True when ``admit`` would neither wait nor fail (every send checks: no await)."""
        for destination in message.destination.components():
            for usage in self._limits(message, destination):
                if usage.full:
                    return False
        return True

    def _limits(self, message: Message, destination: Destination) -> tuple[Usage, ...]:
        """The usages that hold back a send of ``message`` to ``destination``."""
        memory = self.memory_usage(destination)
        if message.persistent:
            return (self.usage.store, memory)
        if self._flow_control(destination):
            return (memory,)
        return (self.usage.temp,)

    def _flow_control(self, destination: Destination) -> bool:
        flow_control = self._flow_control_of.get(destination)
        if flow_control is None:
            policy = self.settings.policies.for_destination(destination)
            flow_control = self._flow_control_of[destination] = policy.producer_flow_control
        return flow_control

    def _charge(self, entry: Entry) -> None:
        """Count a new entry in the usages it weighs on; a non-persistent one that finds
        memory full on a destination without flow control is spilled to the temp store."""
        message = entry.message
        memory = self.memory_usage(message.destination)
        if message.persistent:
            if (
                message.body
                and memory.above(CURSOR_HIGH_WATER_MARK)
                and self.settings.policies.for_destination(message.destination).store_cursor
            ):
                # The store cursor for a store that cannot read a queue back a page at a
                # time (and for durable subscriptions): the body waits in the temp store (a
                # cache never fsynced); the entry weighs on the store limit only.
                entry.message = replace(message, body=b"")
                entry.spill = (self.temp, self.temp.put(message.body))
                entry.charged = (self.usage.store,)
            else:
                entry.charged = (memory, self.usage.store)
        elif memory.full and message.body:
            entry.spill = (self.temp, self.temp.put(message.body))
            entry.message = replace(message, body=b"")
            entry.charged = (self.usage.temp,)
        else:
            entry.charged = (memory,)
        for usage in entry.charged:
            usage.charge(entry.size)

    def _charge_copies(self, message: Message, entries: list[Entry]) -> None:
        """``_charge`` the entries of one topic message (one per subscription): in the
        common case, a non-persistent message while memory has room, all in one amount
        (this runs once per delivery of a fan-out)."""
        memory = self.memory_usage(message.destination)
        if message.persistent or memory.full:
            for entry in entries:
                self._charge(entry)
            return
        charged = (memory,)
        for entry in entries:
            entry.charged = charged
        memory.charge(message.size * len(entries))

    async def route(
        self, messages: Iterable[Message], extra_ops: Iterable[StoreOp] = (), sync: bool = True
    ) -> None:
        """Store (persistent ones, in one batch; the write synced unless ``sync`` is False:
        nobody waits for it) and then deliver messages to destinations."""
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
                        ops.append(AddMessage(message))
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
            if self._held_by_store(queue, message):
                queue.hold_stored(message)
                self.usage.store.charge(message.size)
            else:
                self._charge(queue.enqueue(message))
        touched: dict[int, TopicSubscription] = {}
        for message, subs in to_topics:
            entries = [Entry(message, next(self._topic_seq)) for _ in subs]
            self._charge_copies(message, entries)
            for sub, entry in zip(subs, entries, strict=True):
                dropped = sub.offer(entry)
                if dropped is not None:
                    dropped.release()
                    log.debug("pending limit dropped %s on %s", dropped.message_id, sub.destination)
                touched[id(sub)] = sub
        if stamped:
            sequencer.closed(first_seq)
        for queue in queues.values():
            await self._dispatch_queue(queue)
        for sub in touched.values():
            await self._dispatch_sub(sub)

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
                self.page_in(queue)
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
            # Auto-acked on dispatch: nobody waits for these removals, so they need no sync
            # of their own (KahaDB syncs only acks a client asked a response for); a crash
            # before the next sync may redeliver them (at least once, SPEC M7).
            self.write_behind(self.consume_ops(origin, done.settled))
        if done.expired:
            await self.expire(origin, done.expired)

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
            # (The journal's write is a future already; asyncio.ensure_future, interpreted,
            # cost ~2% of the broker's CPU with sync sends for finding that out.)
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

    async def redeliver(self, origin: Origin, entries: list[Entry]) -> None:
        """Return entries for redelivery with their counter raised (SPEC R1); past the
        policy's limit they go to the dead-letter queue instead (R2)."""
        if not entries or origin is None:
            return
        limit = self.settings.policies.for_destination(entries[0].message.destination)
        back: list[Entry] = []
        dead: list[Entry] = []
        ops: list[StoreOp] = []
        for entry in entries:
            entry.redelivery_counter += 1
            if 0 <= limit.maximum_redeliveries < entry.redelivery_counter:
                dead.append(entry)
                continue
            back.append(entry)
            message = entry.message
            if message.persistent:
                ops.append(
                    UpdateRedelivery(
                        message.destination, message.message_id, entry.redelivery_counter
                    )
                )
        if ops:
            await self.store.write(ops)
        origin.requeue(back)
        if dead:
            cause = f"redelivery count {dead[0].redelivery_counter} exceeded the maximum"
            await self.dead_letter(origin, dead, cause)
        await self.dispatch(origin)

    async def expire(self, origin: Queue | TopicSubscription, entries: list[Entry]) -> None:
        """Expired messages are never delivered (SPEC R4): to the DLQ or dropped."""
        if isinstance(origin, Queue):
            origin.stats.expired += len(entries)
        await self.dead_letter(origin, entries, "message expired", expired=True)

    async def dead_letter(
        self,
        origin: Queue | TopicSubscription,
        entries: list[Entry],
        cause: str,
        expired: bool = False,
    ) -> None:
        """Remove entries from their origin, copying those the policy keeps to its DLQ."""
        ops = self.consume_ops(origin, entries)
        copies: list[Message] = []
        for entry in entries:
            message = entry.full_message()
            entry.release()
            strategy = self.settings.policies.for_destination(message.destination).dead_letter
            target = strategy.dead_letter_destination(message.destination)
            if target == message.destination or not strategy.wants(message.persistent, expired):
                log.info(
                    "discarding %s from %s: %s", message.message_id, message.destination, cause
                )
                continue
            properties = dict(message.properties)
            properties[DLQ_CAUSE_PROPERTY] = cause
            copies.append(
                replace(
                    message,
                    destination=target,
                    original_destination=message.destination,
                    expiration=0 if expired else message.expiration,
                    redelivery_counter=entry.redelivery_counter,
                    properties=properties,
                )
            )
        if isinstance(origin, Queue):
            origin.stats.dequeued += len(entries)
        await self.route(copies, extra_ops=ops)

    async def sweep_expired(self) -> None:
        now = self.clock()
        for queue in list(self.queues.values()):
            expired = queue.remove_pending(lambda e: e.message.is_expired(now))
            if expired:
                await self.expire(queue, expired)
        for subs in [*self.topic_subs.values(), self.wildcard_subs]:
            for sub in list(subs):
                expired = sub.remove_pending(now)
                if expired:
                    await self.expire(sub, expired)

    # -- transactions ----------------------------------------------------------------------

    async def commit(self, tx: LocalTransaction) -> None:
        # Acks and sends become durable in one store batch: the commit is atomic (SPEC T1).
        ops: list[StoreOp] = []
        for ack in tx.acks:
            if ack.record.origin is not None:
                ops.extend(self.consume_ops(ack.record.origin, ack.entries))
        await self.route(tx.sends, extra_ops=ops)
        for ack in tx.acks:
            ack.record.consumer.settle(ack.entries)
            release_all(ack.entries)
            if isinstance(ack.record.origin, Queue):
                ack.record.origin.stats.dequeued += len(ack.entries)
            await self.dispatch(ack.record.origin)

    async def rollback(
        self, tx: LocalTransaction, redeliver: bool, live: Container[ConsumerId]
    ) -> None:
        """Undo a transaction's acks; ``live``: the consumers still attached."""
        for ack in tx.acks:
            consumer, origin = ack.record.consumer, ack.record.origin
            if origin is None:
                continue
            if consumer.info.consumer_id not in live:
                # The consumer is gone; its acked messages were held back for this moment.
                await self.redeliver(origin, ack.entries)
            elif redeliver:
                await self.redeliver(origin, consumer.take_back(ack.entries))
            else:
                # The client redelivers these itself; they stay in flight to it.
                consumer.restore_window(ack.entries)


def log_failure(what: str) -> Callable[[asyncio.Future[None]], None]:
    """A done-callback for work started and not awaited: logs its failure, if any."""

    def check(done: asyncio.Future[None]) -> None:
        if not done.cancelled() and (error := done.exception()) is not None:
            log.error("%s failed: %s", what, error)

    return check
