"""Topic subscriptions: each gets its own copy (an entry) of every matching message.

A non-durable subscription lives and dies with its consumer. A durable one (client id +
subscription name, compatibility D1) outlives it: while no consumer is attached its pending list
keeps filling, and a consumer that attaches later drains it. Wildcard subscriptions are ordinary
subscriptions whose destination is a pattern; the broker routes to them (D2).
"""

from __future__ import annotations

import bisect
from collections import deque

from dovecote.broker.consumer import Consumer, Dispatched, Entry
from dovecote.core.destinations import Destination
from dovecote.core.message import Message
from dovecote.core.selector import Selector, compile_selector
from dovecote.store.api import DurableSubscription


class TopicSubscription:
    __slots__ = ("consumer", "destination", "durable", "pending", "pending_limit", "selector")

    def __init__(
        self,
        destination: Destination,
        consumer: Consumer | None = None,
        durable: DurableSubscription | None = None,
        pending_limit: int = -1,
    ) -> None:
        self.destination = destination
        self.consumer = consumer
        self.durable = durable
        self.pending: deque[Entry] = deque()
        self.pending_limit = pending_limit
        text = durable.selector if durable is not None else None
        self.selector: Selector | None = compile_selector(text) if text and text.strip() else None

    @property
    def key(self) -> tuple[str, str] | None:
        return (self.durable.client_id, self.durable.name) if self.durable else None

    @property
    def waiting(self) -> bool:
        """Messages wait for the consumer."""
        return bool(self.pending)

    def matches(self, message: Message) -> bool:
        if self.consumer is not None:
            return self.consumer.matches(message)
        # An inactive durable subscription has no connection to apply noLocal against.
        return self.selector is None or self.selector.matches(message.selector_value)

    def offer(self, entry: Entry) -> Entry | None:
        """Queue an entry; returns the oldest entry dropped by the pending limit (compatibility D4).
        The limit counts what waits beyond the consumer's prefetch window, as ActiveMQ's
        does: what the window can take now is dispatched, never discarded."""
        pending = self.pending
        pending.append(entry)
        limit = self.pending_limit
        if self.durable is None and 0 <= limit < len(pending):
            consumer = self.consumer
            window = consumer.room if consumer is not None else 0
            if window <= 0:
                return pending.popleft()
            if len(pending) > limit + window:
                dropped = pending[window]
                del pending[window]
                return dropped
        return None

    def dispatch(self, now_ms: int) -> Dispatched:
        """Hand pending entries to the consumer while it has room."""
        result = Dispatched()
        consumer = self.consumer
        if consumer is None:
            return result
        pending = self.pending
        expired, settled, deliver = result.expired, result.settled, consumer.deliver
        while pending and consumer.room > 0:
            entry = pending.popleft()
            expiration = entry.message.expiration  # (Message.is_expired, inline: per delivery)
            if expiration > 0 and now_ms >= expiration:
                expired.append(entry)
            elif deliver(entry):
                settled.append(entry)
        return result

    def detach(self) -> list[Entry]:
        """The consumer leaves: its unacknowledged entries come back, in order."""
        consumer = self.consumer
        self.consumer = None
        if consumer is None:
            return []
        return consumer.take_back()

    def requeue(self, entries: list[Entry]) -> None:
        for entry in entries:
            seqs = [e.seq for e in self.pending]
            self.pending.insert(bisect.bisect_left(seqs, entry.seq), entry)

    def remove_pending(self, expired_at: int | None = None) -> list[Entry]:
        """Take out expired pending entries (all when ``expired_at`` is None)."""
        if expired_at is None:
            removed = list(self.pending)
            self.pending.clear()
            return removed
        removed = [e for e in self.pending if e.message.is_expired(expired_at)]
        if removed:
            keep = [e for e in self.pending if not e.message.is_expired(expired_at)]
            self.pending = deque(keep)
        return removed


def pending_limit(policy: int, consumer: int) -> int:
    """A non-durable subscriber's pending limit (compatibility D4), as ActiveMQ sets it: only where
    its destination's policy has one, and there the consumer's own
    (maximumPendingMessageLimit) when lower; -1 for none."""
    if policy < 0:
        return -1
    return consumer if 0 < consumer < policy else policy
