"""The store contract (compatibility M1-M4): what every persistence adapter provides.

The broker describes each change as a typed operation and hands a batch of them to
``PersistenceAdapter.write``; a batch is atomic and durable when the call returns, which is
how a local transaction commits (T1) and how a sync send's receipt is earned (M7). The
operations mirror KahaDB's journal records (add, remove, subscription add/remove, durable
ack, redelivery update), so a journal adapter can log them as they come and rebuild its index
by replaying them. ``recover`` gives back everything still stored, in send order.

Non-persistent messages never reach a store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from dovecote.core.destinations import Destination
from dovecote.core.message import Message
from dovecote.core.records import pickle_by_fields
from dovecote.store.ops import (
    AckSubscription,
    AddMessage,
    AddSubscription,
    DurableSubscription,
    RemoveDestination,
    RemoveMessage,
    RemoveSubscription,
    StoreOp,
    UpdateRedelivery,
)

# The operations are defined in ops.py (compiled; it says why) and given here too.
__all__ = [
    "AckSubscription",
    "AddMessage",
    "AddSubscription",
    "DurableSubscription",
    "PagedRecovery",
    "PagingStore",
    "PersistenceAdapter",
    "QueuePage",
    "QueuePosition",
    "RecoveredState",
    "RecoveredSubscription",
    "RemoveDestination",
    "RemoveMessage",
    "RemoveSubscription",
    "StoreOp",
    "StoredQueue",
    "UpdateRedelivery",
]


@dataclass(slots=True)
class RecoveredSubscription:
    subscription: DurableSubscription
    pending: list[Message] = field(default_factory=list)
    """The topic messages this subscription has not acknowledged, in send order."""


@dataclass(slots=True)
class RecoveredState:
    queues: dict[Destination, list[Message]] = field(default_factory=dict)
    """Each queue's stored messages in send order (their redelivery counters applied)."""
    subscriptions: list[RecoveredSubscription] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class StoredQueue:
    """One queue as a paging store's index describes it, without reading its messages."""

    count: int
    size: int
    """The bytes of its messages (``Message.size`` summed), for the store limit."""
    last_sequence: int
    """The highest broker sequence among them."""


QueuePosition = tuple[int, int]
"""Where reading one queue from a paging store stands: (broker sequence, the store's own
order) of the next message to read; (0, 0) is the queue's start."""


@dataclass(frozen=True, slots=True)
class QueuePage:
    messages: list[Message]
    """Whole, in send order, with their redelivery counters applied."""
    next: QueuePosition
    """Where the next page starts."""
    lost: int = 0
    """Messages of the queue met before ``next`` that could not be read back (a damaged
    record): the store has dropped them, and reports them so here and in its log."""
    lost_bytes: int = 0


@dataclass(slots=True)
class PagedRecovery:
    queues: dict[Destination, StoredQueue] = field(default_factory=dict)
    """Each queue that holds messages; the broker reads them a page at a time."""
    subscriptions: list[RecoveredSubscription] = field(default_factory=list)


@runtime_checkable
class PagingStore(Protocol):
    """A store that can start without reading every message and hand a queue's messages
    over a window at a time (ActiveMQ's store cursor over KahaDB's order index): the broker
    keeps a queue's backlog past its memory mark in the store only and reads it back in
    order as consumers make room."""

    def recover_paged(self) -> PagedRecovery: ...

    def read_queue(
        self, destination: Destination, start: QueuePosition, limit: int
    ) -> QueuePage: ...


class PersistenceAdapter(Protocol):
    """One store of messages, subscriptions and acks, owned by one broker at a time."""

    async def start(self) -> None:
        """Open the store (take its lock, replay or rebuild what is needed)."""

    async def stop(self) -> None:
        """Flush and close; the store can be started again later."""

    def recover(self) -> RecoveredState:
        """Everything stored, for the broker to load at start."""

    def write(
        self, batch: Sequence[StoreOp], sync: bool = True, lazy: bool = False
    ) -> Awaitable[None]:
        """Apply the operations atomically; durable (per the adapter's sync setting) when
        the awaitable returned is done. The batch takes its place in the store's order when
        ``write`` is called, not when awaited: a caller may start a write and not wait for
        it, and every write started after it comes after it. ``sync=False`` lets an adapter
        skip the disk sync for this batch (a later synced write, or the OS, makes it
        durable): KahaDB does so for acks nobody waits for. ``lazy=True`` says nobody
        waits for it at all: an adapter may hold it a moment to share the next write's
        group."""

    def checkpoint(self) -> None:
        """Make recovery short: settle the index and drop what is no longer needed."""

    def message_count(self, destination: Destination) -> int:
        """How many stored messages a queue holds (for topics: messages any sub still needs)."""

    @property
    def degraded(self) -> str | None:
        """Why the store is in degraded mode (a full disk, an I/O error: store/health.py),
        or None while it works. For the admin API and metrics."""


pickle_by_fields(__name__)
