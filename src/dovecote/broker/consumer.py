"""A consumer as the broker sees it: its prefetch window and what is in flight to it.

An ``Entry`` is one message waiting in a destination (a queue, or one topic subscription's
pending list) with the redelivery counter the broker keeps for it. Dispatching moves the
entry into a consumer's in-flight map until an ack settles it or the consumer leaves and
the destination takes it back (compatibility C2, C4, R1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace

from dovecote.broker.usage import TempStore, Usage
from dovecote.core.commands import (
    LAST_DELIVERED_UNKNOWN,
    AckType,
    ConsumerInfo,
    MessageAck,
    MessageDispatch,
)
from dovecote.core.errors import BrokerError
from dovecote.core.message import Message
from dovecote.core.selector import Selector, compile_selector

DispatchSink = Callable[[MessageDispatch], None]


class Dispatched:
    """What a dispatch pass leaves for the broker to settle in the store. (A plain class: a
    NamedTuple is built through an interpreted ``__new__`` even from compiled code, and one
    is made per dispatch pass.)"""

    __slots__ = ("expired", "settled")

    def __init__(self) -> None:
        self.expired: list[Entry] = []
        self.settled: list[Entry] = []


class Entry:
    __slots__ = (
        "charged", "message", "redelivery_counter", "seq", "size", "spill",
        "window_freed",
    )  # fmt: skip

    def __init__(self, message: Message, seq: int) -> None:
        self.message = message
        self.seq = seq
        self.redelivery_counter = message.redelivery_counter
        # Set by a DELIVERED ack or a transacted ack: the prefetch room is given back
        # before the message is settled.
        self.window_freed = False
        self.size = message.size
        # The usages this entry is counted in, released once when the broker drops it.
        self.charged: tuple[Usage, ...] = ()
        # Where the body waits on disk when the entry was spilled out of memory.
        self.spill: tuple[TempStore, tuple[int, int]] | None = None

    @property
    def message_id(self) -> str:
        return self.message.message_id

    def full_message(self) -> Message:
        """The message with its body, read back from the temp store if it was spilled, and
        the broker's redelivery counter."""
        message = self.message
        if self.spill is not None:
            store, where = self.spill
            message = replace(message, body=store.get(where))
        if self.redelivery_counter != message.redelivery_counter:
            message = message.with_redelivery(self.redelivery_counter)
        return message

    def release(self) -> None:
        """The broker is done with this entry: give back what it was counted in."""
        for usage in self.charged:
            usage.release(self.size)
        self.charged = ()
        if self.spill is not None:
            self.spill[0].drop()
            self.spill = None


def release_all(entries: Iterable[Entry]) -> None:
    """``release`` each entry; the entries counted in the same usages one after another
    (a dispatch pass's, mostly) are given back in one amount: this runs for every message
    settled, and each release walks the usage's parents and wakes blocked producers."""
    run: tuple[Usage, ...] = ()
    amount = 0
    for entry in entries:
        charged = entry.charged
        if entry.spill is not None or not charged:
            entry.release()
            continue
        if charged != run:
            for usage in run:
                usage.release(amount)
            run, amount = charged, 0
        amount += entry.size
        entry.charged = ()
    for usage in run:
        usage.release(amount)


class Consumer:
    __slots__ = (
        "_deleted", "_freed", "browse", "inflight", "info", "pulls", "selector", "sink",
        "takes_all", "unwritten",
    )  # fmt: skip

    def __init__(self, info: ConsumerInfo, sink: DispatchSink) -> None:
        self.info = info
        self.sink = sink
        self.selector: Selector | None = (
            compile_selector(info.selector) if info.selector and info.selector.strip() else None
        )
        self.takes_all = (
            self.selector is None and not info.no_local and info.additional_predicate is None
        )
        """Every message matches it (no selector, no noLocal)."""
        self.inflight: dict[str, Entry] = {}
        self._deleted = 0
        """Entries deleted from ``inflight`` since it was last made anew (see settle)."""
        self._freed = 0
        self.pulls = 0
        self.unwritten = 0
        """Auto-acked deliveries the connection has not yet handed to its socket: they fill
        the prefetch window like unacked ones, so that a slow reader holds the dispatch back
        instead of the broker queueing a whole backlog in its write buffer."""
        self.browse: Browse | None = None
        """Set for a queue browser: what it has still to be sent."""

    @property
    def room(self) -> int:
        """How many more messages may be dispatched to it now."""
        if self.info.prefetch_size <= 0:
            return 1 if self.pulls > 0 else 0
        return self.info.prefetch_size - (len(self.inflight) - self._freed) - self.unwritten

    def written(self) -> None:
        """Its connection handed what it was given to the socket: the auto-acked deliveries
        leave the window (a browser's walk goes on)."""
        self.unwritten = 0
        if self.browse is not None:
            self.browse.pump()

    def matches(self, message: Message) -> bool:
        if self.info.no_local and message.connection_id == str(self.info.consumer_id.connection_id):
            return False
        predicate = self.info.additional_predicate
        if predicate is not None and not predicate(message):
            return False
        return self.selector is None or self.selector.matches(message.selector_value)

    def deliver(self, entry: Entry) -> bool:
        """Send the entry to the client; True when it is settled at once (auto ack)."""
        auto = self.info.auto_ack
        if auto:
            self.unwritten += 1
        else:
            self.inflight[entry.message_id] = entry
        if self.pulls:
            self.pulls -= 1
        message = entry.message
        # (full_message only when it has work to do: this runs once per delivery.)
        if entry.spill is not None or entry.redelivery_counter != message.redelivery_counter:
            message = entry.full_message()
        self.sink(MessageDispatch(self.info.consumer_id, message, entry.seq))
        return auto

    def acked_entries(self, ack: MessageAck) -> list[Entry]:
        """The in-flight entries an ack covers, without settling them."""
        if ack.last_message_id not in self.inflight:
            if ack.ack_type is AckType.INDIVIDUAL:
                # As ActiveMQ: ignored, not refused (an ack from before a failover, say).
                return []
            raise BrokerError(
                f"consumer {ack.consumer_id} has no unacknowledged message {ack.last_message_id}"
            )
        if ack.ack_type in (AckType.STANDARD, AckType.DELIVERED):
            # Cumulative: everything dispatched from first_message_id (or the oldest) up to
            # and including last_message_id. (A loop, not list() of a generator: compiled,
            # the dict walk is native.)
            last_id = ack.last_message_id
            first_id = ack.first_message_id
            started = first_id is None
            covered: list[Entry] = []
            for message_id, entry in self.inflight.items():
                if not started and message_id == first_id:
                    started = True
                if started:
                    covered.append(entry)
                if message_id == last_id:
                    break
            if ack.ack_type is AckType.STANDARD and first_id is not None:
                # As ActiveMQ: an ack that does not match what was dispatched (a client's
                # ack from before a failover, say) acks nothing rather than the wrong ones.
                if not started:
                    raise BrokerError(f"Unmatched acknowledge: no message {first_id} in flight")
                if ack.transaction_id is None and len(covered) != ack.message_count:
                    raise BrokerError(
                        f"Unmatched acknowledge: expected message count ({ack.message_count})"
                        f" differs from count in dispatched-list ({len(covered)})"
                    )
            return covered
        return [self.inflight[ack.last_message_id]]

    def free_window(self, entries: list[Entry]) -> None:
        for entry in entries:
            if not entry.window_freed and entry.message_id in self.inflight:
                entry.window_freed = True
                self._freed += 1

    def restore_window(self, entries: list[Entry]) -> None:
        """Undo ``free_window``: the entries count against the prefetch again."""
        for entry in entries:
            if entry.window_freed and entry.message_id in self.inflight:
                entry.window_freed = False
                self._freed -= 1

    def settle(self, entries: list[Entry]) -> None:
        """Drop acknowledged (or moved) entries from the in-flight map."""
        inflight = self.inflight
        for entry in entries:
            # (A lookup and a delete: compiled, both native; pop with a default is a call.)
            if entry.message_id not in inflight:
                continue
            del inflight[entry.message_id]
            self._deleted += 1
            if entry.window_freed:
                self._freed -= 1
                entry.window_freed = False
        # A dict keeps a deleted entry's slot until it grows again, and a walk from its start
        # (a cumulative ack) steps over every one: settled in dispatch order, they pile up in
        # front of the live ones, up to two thirds of the most the dict ever held. A copy has
        # none; made once 4*sqrt(live) have been deleted, its cost spread over those deletes
        # is about that of the shorter walk (a Java consumer acks each message, with a
        # thousand in flight).
        deleted = self._deleted
        if deleted >= 64 and deleted * deleted >= 16 * len(inflight):
            self.inflight = dict(inflight)
            self._deleted = 0

    def take_back(self, entries: list[Entry] | None = None) -> list[Entry]:
        """Remove entries (all when None) from flight for redelivery, in dispatch order."""
        if entries is None:
            taken = list(self.inflight.values())
            self.inflight.clear()
            self._deleted = 0
            self._freed = 0
        else:
            taken = [e for e in entries if e.message_id in self.inflight]
            self.settle(taken)
        for entry in taken:
            entry.window_freed = False
        return taken


class Browse:
    """A queue browser's walk over what its queue holds, sent a prefetch's worth at a time
    as the browser acknowledges what it read (ActiveMQ's QueueBrowserSubscription), so a
    browser of a long queue never has the whole queue in the connection's write buffer; the
    end of the browse (a dispatch without a message) follows the last message."""

    __slots__ = ("_clock", "_consumer", "_messages", "_unacked", "done")

    def __init__(
        self, consumer: Consumer, messages: Iterator[Message], clock: Callable[[], int]
    ) -> None:
        self._consumer = consumer
        self._messages = messages
        self._clock = clock
        self._unacked: dict[str, None] = {}
        """Ids of the messages sent and not yet acknowledged, in the order sent."""
        self.done = False

    def acked(self, ack: MessageAck) -> None:
        """The browser read these: the window opens (its acks consume nothing)."""
        unacked = self._unacked
        last_id = ack.last_message_id
        if ack.ack_type in (AckType.STANDARD, AckType.DELIVERED) and last_id in unacked:
            while unacked:  # cumulative: everything sent up to and including last_id
                message_id = next(iter(unacked))
                del unacked[message_id]
                if message_id == last_id:
                    break
        else:
            unacked.pop(last_id, None)
        self.pump()

    def pump(self) -> None:
        """Send what the browser has room for; the end once there is nothing left."""
        consumer = self._consumer
        info = consumer.info
        prefetch = info.prefetch_size
        now = self._clock()
        while not self.done:
            in_window = consumer.unwritten if info.auto_ack else len(self._unacked)
            if 0 < prefetch <= in_window:
                return
            message = next(self._messages, None)
            if message is None:
                self.done = True
                consumer.sink(MessageDispatch(info.consumer_id, None))
                return
            if message.is_expired(now) or not consumer.matches(message):
                continue
            if info.auto_ack:
                consumer.unwritten += 1
            else:
                self._unacked[message.message_id] = None
            consumer.sink(MessageDispatch(info.consumer_id, message))


def handed_over(
    entries: list[Entry], last_delivered: int, queue: bool
) -> tuple[list[Entry], list[Entry]]:
    """Split a leaving consumer's entries (in dispatch order) into those its application
    was handed and those it only prefetched, by the RemoveInfo's last delivered sequence,
    as ActiveMQ does: for a queue, everything up to the entry of that sequence (none when
    no entry has it); for a durable subscription, every sequence up to it (0: all)."""
    if last_delivered == LAST_DELIVERED_UNKNOWN:
        return entries, []
    if queue:
        for i, entry in enumerate(entries):
            if entry.seq == last_delivered:
                return entries[: i + 1], entries[i + 1 :]
        return [], entries
    if last_delivered == 0:
        return entries, []
    seen = [e for e in entries if e.seq <= last_delivered]
    return seen, [e for e in entries if e.seq > last_delivered]
