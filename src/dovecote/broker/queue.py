"""A queue: each message to one consumer, spread across consumers by their prefetch windows.

Pending messages wait in one FIFO per priority (9 first, compatibility C8). A dispatch pass takes
messages from the highest priority down and hands each to the next consumer, in round-robin
order, that has prefetch room and whose selector matches (consumers of a higher priority
first); message groups pin a group to the consumer that got its first message, and
exclusive consumers take everything while present.
A message no consumer can take now is set aside and put back in place, and a pass looks at
no more than ``PAGE_SIZE`` of those, as ActiveMQ's maxPageSize bounds its paging.

With a paging store, the newest part of a long persistent backlog is held by the store
alone (``stored`` messages from position ``stored_from`` on) and paged in, in send order, as
the pending ones run low; while any are there, new persistent messages join them, so send
order holds. Priorities then order messages within what is paged in (ActiveMQ's store cursor
without prioritizedMessages does the same).
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice, pairwise

from dovecote.broker.consumer import Consumer, Dispatched, Entry
from dovecote.core.destinations import Destination
from dovecote.core.ids import ConsumerId
from dovecote.core.message import Message
from dovecote.store.api import QueuePage, QueuePosition

PAGE_SIZE = 200
NO_SEQUENCE_LIMIT = 1 << 62
"""Above every broker sequence number (``pending_sequences`` without an upper bound)."""
_PRIORITIES = range(9, -1, -1)


class QueueStats:
    __slots__ = ("dequeued", "dispatched", "enqueued", "expired")

    def __init__(self) -> None:
        self.enqueued = 0
        self.dequeued = 0
        self.dispatched = 0
        self.expired = 0


class Queue:
    def __init__(self, destination: Destination) -> None:
        self.destination = destination
        self._pending: list[deque[Entry]] = [deque() for _ in range(10)]
        self._pending_count = 0
        self._in_sequence_order = True
        """Each bucket holds its entries in sequence order, not only in arrival order (what
        the messages' store writes usually give): a stream read then finds its range by
        bisection, not by a walk over the whole backlog. Checked at every insertion."""
        self.consumers: list[Consumer] = []
        self._groups: dict[str, ConsumerId] = {}
        self._mixed_priorities = False
        self._seq = 0
        self.stats = QueueStats()
        self.stored = 0
        self.stored_bytes = 0
        self.stored_from: QueuePosition = (0, 0)

    # -- content ---------------------------------------------------------------------------

    def enqueue(self, message: Message) -> Entry:
        self._seq += 1
        entry = Entry(message, self._seq)
        bucket = self._pending[_clamp(message.priority)]
        self._note_order(bucket, message.sequence)
        bucket.append(entry)
        self._pending_count += 1
        self.stats.enqueued += 1
        return entry

    def _note_order(self, bucket: deque[Entry], sequence: int) -> None:
        """Before ``sequence`` is appended to ``bucket``."""
        if not self._pending_count:
            self._in_sequence_order = True  # (empty buckets are in order)
        elif bucket and sequence < bucket[-1].message.sequence:
            self._in_sequence_order = False

    def hold_stored(self, message: Message) -> None:
        """Leave a stored message to the store until it is paged in. Messages reach a
        queue in the order of their sequence numbers (given out before the store write that
        orders them), so the first ``stored`` of the store's messages from ``stored_from``
        are exactly these."""
        if not self.stored:
            self.stored_from = (message.sequence, 0)
        self.stored += 1
        self.stored_bytes += message.size
        self.stats.enqueued += 1

    def take_page(self, page: QueuePage) -> list[Entry]:
        """Queue the messages of a page read from ``stored_from``."""
        entries: list[Entry] = []
        for message in page.messages:
            self._seq += 1
            entry = Entry(message, self._seq)
            bucket = self._pending[_clamp(message.priority)]
            self._note_order(bucket, message.sequence)
            bucket.append(entry)
            self._pending_count += 1
            entries.append(entry)
            self.stored_bytes -= entry.size
        self.stored -= len(entries)
        self.stored_from = page.next
        if not page.messages or self.stored <= 0:
            self.stored = self.stored_bytes = 0
        return entries

    def requeue(self, entries: list[Entry]) -> None:
        """Put entries back for redelivery, each in its original place by sequence (each
        bucket is in sequence order)."""
        by_priority: dict[int, list[Entry]] = {}
        for entry in entries:
            by_priority.setdefault(_clamp(entry.message.priority), []).append(entry)
        for priority, returning in by_priority.items():
            returning.sort(key=_by_seq)
            bucket = self._pending[priority]
            if not bucket or returning[-1].seq < bucket[0].seq:
                # The usual case: they were dispatched from the head, so they go back
                # before everything still waiting (no walk over a long backlog).
                if bucket:
                    returning.append(bucket[0])
                self._note_returning(returning)
                if bucket:
                    returning.pop()
                bucket.extendleft(reversed(returning))
            else:
                merged = list(heapq.merge(bucket, returning, key=_by_seq))
                self._note_returning(merged)
                bucket.clear()
                bucket.extend(merged)
            self._pending_count += len(returning)

    def _note_returning(self, entries: list[Entry]) -> None:
        """Whether ``entries``, about to be a bucket's head (or all of it), are in order."""
        if not self._pending_count:
            self._in_sequence_order = True
        if self._in_sequence_order:
            sequences = [e.message.sequence for e in entries]
            if any(a > b for a, b in pairwise(sequences)):
                self._in_sequence_order = False

    @property
    def pending_count(self) -> int:
        return self._pending_count

    @property
    def waiting(self) -> bool:
        """Messages wait for a consumer (in memory or in the store only)."""
        return self._pending_count > 0 or self.stored > 0

    @property
    def inflight_count(self) -> int:
        return sum(len(c.inflight) for c in self.consumers)

    def size(self) -> int:
        """Messages held: waiting (in memory or in the store only) plus in flight
        (ActiveMQ's queue size)."""
        return self._pending_count + self.stored + self.inflight_count

    def pending_entries(self) -> Iterator[Entry]:
        for priority in _PRIORITIES:
            yield from self._pending[priority]

    def browse(self) -> list[Message]:
        """Everything held, in flight first by sequence, without consuming (compatibility C9)."""
        entries = [e for c in self.consumers for e in c.inflight.values()]
        entries.extend(self.pending_entries())
        entries.sort(key=lambda e: (-_clamp(e.message.priority), e.seq))
        return [e.full_message() for e in entries]

    def pending_between(self, after: int, up_to: int) -> list[Entry]:
        """Pending entries with ``after < sequence <= up_to``, in sequence order (a stream
        reader's range)."""
        if self._in_sequence_order:
            return self._bisected(after, up_to)
        walked = [
            entry
            for bucket in self._pending
            for entry in bucket
            if after < entry.message.sequence <= up_to
        ]
        walked.sort(key=_by_sequence)
        return walked

    def pending_sequences(
        self, after: int = 0, up_to: int = NO_SEQUENCE_LIMIT, limit: int = 0
    ) -> list[int]:
        """The sequence numbers of the pending entries with ``after < sequence <= up_to``,
        in order (a stream reader's plan); the first ``limit`` of them (0: all)."""
        if self._in_sequence_order:
            return [entry.message.sequence for entry in self._bisected(after, up_to, limit)]
        # (Its own walk: taken from pending_between's entries, sorted by key, a plan over a
        # 100,000-message backlog took twice as long.)
        sequences = [
            entry.message.sequence
            for bucket in self._pending
            for entry in bucket
            if after < entry.message.sequence <= up_to
        ]
        sequences.sort()  # (mostly in order already: one pass)
        if limit:
            del sequences[limit:]
        return sequences

    def _bisected(self, after: int, up_to: int, limit: int = 0) -> list[Entry]:
        """``pending_between`` (the first ``limit``; 0: all) of buckets in sequence order:
        each bucket's run found by bisection, not by a walk over the backlog."""
        chosen: list[Entry] = []
        buckets = 0
        for bucket in self._pending:
            if bucket:
                lo, hi = _between(bucket, after, up_to)
                if limit:
                    hi = min(hi, lo + limit)
                if hi > lo:
                    chosen.extend(islice(bucket, lo, hi))
                    buckets += 1
        if buckets > 1:
            chosen.sort(key=_by_sequence)
            if limit:
                del chosen[limit:]
        return chosen

    def remove_pending_through(self, up_to: int) -> list[Entry]:
        """``remove_pending`` of the entries with ``sequence <= up_to`` (a stream commit)."""
        removed: list[Entry] = []
        if self._in_sequence_order:
            for bucket in self._pending:
                if bucket:
                    for _ in range(bisect_right(bucket, up_to, key=_by_sequence)):
                        removed.append(bucket.popleft())
            self._pending_count -= len(removed)
            return removed
        for bucket in self._pending:
            taken = len(removed)
            kept: list[Entry] = []
            for entry in bucket:
                (removed if entry.message.sequence <= up_to else kept).append(entry)
            if len(removed) > taken:  # a bucket that loses nothing is left as it is
                bucket.clear()
                bucket.extend(kept)
        self._pending_count -= len(removed)
        return removed

    def remove_pending(self, predicate: Callable[[Entry], bool] | None = None) -> list[Entry]:
        """Take out pending entries for which ``predicate(entry)`` holds (all when None)."""
        removed: list[Entry] = []
        for bucket in self._pending:
            keep: deque[Entry] = deque()
            for entry in bucket:
                if predicate is None or predicate(entry):
                    removed.append(entry)
                else:
                    keep.append(entry)
            bucket.clear()
            bucket.extend(keep)
        self._pending_count -= len(removed)
        return removed

    # -- consumers -------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self._mixed_priorities = len({c.info.priority for c in self.consumers}) > 1

    def remove_consumer(self, consumer: Consumer) -> list[Entry]:
        """Detach a consumer; its unacknowledged messages come back for redelivery."""
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self._mixed_priorities = len({c.info.priority for c in self.consumers}) > 1
        for group, owner in list(self._groups.items()):
            if owner == consumer.info.consumer_id:
                del self._groups[group]
        return consumer.take_back()

    # -- dispatch --------------------------------------------------------------------------

    def dispatch(self, now_ms: int) -> Dispatched:
        """Hand pending messages to consumers with room."""
        result = Dispatched()
        if not self._pending_count or not self.consumers:
            return result
        candidates = self._candidates()
        if not candidates:
            return result
        # (Per message below: the common case, consumers without selectors or noLocal and
        # messages without groups, skips the choice.)
        takes_all = all(c.takes_all for c in candidates)
        # Round robin outlives the pass: the consumer list itself turns, as ActiveMQ's does,
        # or a producer sending one message at a time (a pass each) would feed the first
        # consumer only. An exclusive consumer takes everything: nothing to turn.
        rotating = len(self.consumers) > 1 and not candidates[0].info.exclusive
        for priority in _PRIORITIES:
            bucket = self._pending[priority]
            if not bucket:
                continue
            skipped: list[Entry] = []
            while bucket:
                entry = bucket.popleft()
                message = entry.message
                expiration = message.expiration  # (Message.is_expired, inline)
                if expiration > 0 and now_ms >= expiration:
                    self._pending_count -= 1
                    result.expired.append(entry)
                    continue
                if takes_all and message.group_id is None:
                    consumer: Consumer | None = candidates[0]
                else:
                    consumer = self._choose(entry, candidates)
                if consumer is None:
                    skipped.append(entry)
                    if len(skipped) >= PAGE_SIZE:
                        break
                    continue
                self._pending_count -= 1
                self.stats.dispatched += 1
                if consumer.deliver(entry):
                    result.settled.append(entry)
                if rotating:
                    self._to_back(consumer)
                if consumer.room <= 0:
                    candidates.remove(consumer)
                    if not candidates:
                        break
                elif len(candidates) > 1:
                    # Round robin: the consumer that just got a message goes to the back,
                    # behind the others of its priority (higher consumer priority first).
                    candidates.remove(consumer)
                    candidates.append(consumer)
                    if self._mixed_priorities:
                        candidates.sort(key=_by_consumer_priority)
            if skipped:
                bucket.extendleft(reversed(skipped))
            # (Most messages have the default priority: the buckets below it are empty.)
            if not candidates or not self._pending_count:
                break
        return result

    def _to_back(self, consumer: Consumer) -> None:
        """Move a consumer that was just given a message behind the others of its priority
        (higher consumer priority first)."""
        consumers = self.consumers
        if consumers[-1] is consumer:
            return
        consumers.remove(consumer)
        consumers.append(consumer)
        if self._mixed_priorities:
            consumers.sort(key=_by_consumer_priority)

    def _candidates(self) -> list[Consumer]:
        exclusive = [c for c in self.consumers if c.info.exclusive]
        # The first exclusive consumer gets everything while it is there; the others wait.
        pool = exclusive[:1] if exclusive else self.consumers
        candidates = [c for c in pool if c.room > 0]
        if self._mixed_priorities:
            candidates.sort(key=_by_consumer_priority)
        return candidates

    def _choose(self, entry: Entry, candidates: list[Consumer]) -> Consumer | None:
        message = entry.message
        group = message.group_id
        if group is not None:
            owner = self._groups.get(group)
            if owner is not None:
                for consumer in candidates:
                    if consumer.info.consumer_id == owner:
                        if message.group_seq == -1:
                            del self._groups[group]
                        return consumer if consumer.matches(message) else None
                if any(c.info.consumer_id == owner for c in self.consumers):
                    return None  # its owner is busy: the group waits for it
        for consumer in candidates:
            if consumer.matches(message):
                if group is not None and message.group_seq != -1:
                    self._groups[group] = consumer.info.consumer_id
                return consumer
        return None


def _by_seq(entry: Entry) -> int:
    return entry.seq


def _by_sequence(entry: Entry) -> int:
    return entry.message.sequence


def _between(bucket: deque[Entry], after: int, up_to: int) -> tuple[int, int]:
    """Where the entries with ``after < sequence <= up_to`` are in a bucket in order."""
    lo = bisect_right(bucket, after, key=_by_sequence)
    return lo, bisect_right(bucket, up_to, lo, key=_by_sequence)


def _by_consumer_priority(consumer: Consumer) -> int:
    return -consumer.info.priority


def _clamp(priority: int) -> int:
    return 0 if priority < 0 else 9 if priority > 9 else priority
