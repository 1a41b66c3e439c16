"""Usage and paging: what each message weighs on (memory, store, temp), producer flow
control (compatibility S4), and the store cursor that keeps a queue's messages in the store while
memory is past its mark, reading them back a page at a time as they are dispatched.

The regions charge every entry they take in here, and page a queue in before dispatching
it; nothing here routes or dispatches.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from dovecote.broker.consumer import Entry
from dovecote.broker.policy import BrokerSettings
from dovecote.broker.queue import Queue
from dovecote.broker.usage import SystemUsage, TempStore, Usage
from dovecote.core.destinations import Destination
from dovecote.core.errors import DovecoteError
from dovecote.core.message import Message
from dovecote.store.api import PagingStore, PersistenceAdapter, QueuePage, QueuePosition

if TYPE_CHECKING:
    from dovecote.broker.message_events import MessageEvents

log = logging.getLogger("dovecote.broker")

CURSOR_HIGH_WATER_MARK = 0.7
"""ActiveMQ's cursorMemoryHighWaterMark: past this share of its memory limit, a store
cursor keeps persistent messages out of memory."""
PAGE_IN_BELOW = 200
"""A queue with messages in the store only reads more once fewer than this wait in memory."""
PAGE_IN_CHUNK = 100
"""Messages read from the store at a time, up to ``2 * PAGE_IN_BELOW`` waiting or the
memory mark."""

PAGES_PER_TURN = 10
"""Pages a whole-queue read (``page_in_all``) takes before the loop's next turn."""

QueueReader = Callable[[Destination, QueuePosition, int], QueuePage]


class Paging:
    def __init__(self, settings: BrokerSettings, store: PersistenceAdapter) -> None:
        self.settings = settings
        # A store that reads a queue back a page at a time (the journal) holds the queue
        # messages the store cursor keeps out of memory; for others the bodies wait in the
        # temp store.
        self._reader: QueueReader | None = (
            store.read_queue if isinstance(store, PagingStore) else None
        )
        self.usage = SystemUsage(
            settings.memory_limit,
            settings.store_limit,
            settings.temp_limit,
            settings.send_fail_if_no_space,
        )
        self.temp = TempStore(settings.temp_directory, self.usage.temp)
        self._charges_of: dict[Destination, tuple[tuple[Usage, ...], tuple[Usage, ...]]] = {}
        self._store_only: tuple[Usage, ...] = (self.usage.store,)
        self._temp_only: tuple[Usage, ...] = (self.usage.temp,)
        self._flow_control_of: dict[Destination, bool] = {}  # (policies are fixed at start)
        self._unreadable: set[Destination] = set()
        """Queues whose stored messages the store could not read (logged once until it can)."""
        self.events: MessageEvents | None = None
        """Told of a send finding memory full (broker/message_events.py), while set."""

    # -- usage ---------------------------------------------------------------------------

    def memory_usage(self, destination: Destination) -> Usage:
        return self._charges(destination)[0][0]

    def _charges(self, destination: Destination) -> tuple[tuple[Usage, ...], tuple[Usage, ...]]:
        """What an entry of the destination is charged to: (its memory), (its memory, the
        store). One tuple of each for all its entries, not one per entry: a tuple of usages
        is a container the collector walks for as long as the entry lives."""
        charges = self._charges_of.get(destination)
        if charges is None:
            limit = self.settings.policies.for_destination(destination).memory_limit
            memory = Usage(f"{destination} memory", limit, parent=self.usage.memory)
            # (Typed so, each is one object: compiled, a fixed-length tuple is made anew
            # each time it is stored as a Python object.)
            in_memory: tuple[Usage, ...] = (memory,)
            in_memory_and_store: tuple[Usage, ...] = (memory, self.usage.store)
            charges = self._charges_of[destination] = (in_memory, in_memory_and_store)
        return charges

    async def admit(self, message: Message) -> None:
        """Producer flow control (compatibility S4): wait (or fail) while a usage the message would
        weigh on is full."""
        for destination in message.destination.components():
            for usage in self._limits(message, destination):
                if usage.full and self.events is not None and usage.parent is self.usage.memory:
                    await self.events.full(destination, usage, message)
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

    def charge(self, entry: Entry) -> None:
        """Count a new entry in the usages it weighs on; a non-persistent one that finds
        memory full on a destination without flow control is spilled to the temp store."""
        message = entry.message
        in_memory, in_memory_and_store = self._charges(message.destination)
        memory = in_memory[0]
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
                entry.charged = self._store_only
            else:
                entry.charged = in_memory_and_store
        elif memory.full and message.body:
            entry.spill = (self.temp, self.temp.put(message.body))
            entry.message = replace(message, body=b"")
            entry.charged = self._temp_only
        else:
            entry.charged = in_memory
        for usage in entry.charged:
            usage.charge(entry.size)

    def charge_copies(self, message: Message, entries: list[Entry]) -> None:
        """``charge`` the entries of one topic message (one per subscription): in the
        common case, a non-persistent message while memory has room, all in one amount
        (this runs once per delivery of a fan-out)."""
        charged = self._charges(message.destination)[0]
        memory = charged[0]
        if message.persistent or memory.full:
            for entry in entries:
                self.charge(entry)
            return
        for entry in entries:
            entry.charged = charged
        memory.charge(message.size * len(entries))

    # -- the store cursor: queue messages held by the store only ---------------------------

    def held_by_store(self, queue: Queue, message: Message) -> bool:
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

    def hold_stored(self, queue: Queue, message: Message) -> None:
        queue.hold_stored(message)
        self.usage.store.charge(message.size)

    def page_in(self, queue: Queue, everything: bool = False, most: int = 0) -> None:
        """Read a stored queue's next messages while few wait in memory, as many as fit
        below the memory mark (one at least when none wait), or all of them (``most``:
        no more than that many)."""
        reader = self._reader
        if reader is None:
            return
        memory = self.memory_usage(queue.destination)
        goal = max(queue.stored - most, 0) if most else 0
        while queue.stored > goal:
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
            in_memory_and_store = self._charges(queue.destination)[1]
            for entry in queue.take_page(page):
                # Charged to the store when it was held there; now to memory as well.
                entry.charged = in_memory_and_store
                memory.charge(entry.size)

    async def page_in_all(self, queue: Queue) -> None:
        """Bring every stored message of a queue into memory (for readers that need the
        whole queue at once: stream offsets), a few pages at a time with a turn of the loop
        between them, so that other connections and the admin API are answered meanwhile."""
        left = queue.stored  # (those stored meanwhile are another read's)
        while queue.stored and left > 0:
            before = queue.stored
            self.page_in(queue, everything=True, most=PAGES_PER_TURN * PAGE_IN_CHUNK)
            if queue.stored >= before:
                return  # the store cannot read them now: they wait (page_in said so)
            left -= before - queue.stored
            await asyncio.sleep(0)

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
