"""The memory store (compatibility M1): the store contract over dicts, nothing on disk.

With ``persistent = false`` the broker runs on this one; it is also the reference the
contract suite holds every other adapter to. State lives as long as the process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence

from dovecote.core.destinations import Destination, destination_matches
from dovecote.core.message import Message
from dovecote.store.api import (
    AckSubscription,
    AddMessage,
    AddSubscription,
    DurableSubscription,
    RecoveredState,
    RecoveredSubscription,
    RemoveDestination,
    RemoveMessage,
    RemoveSubscription,
    StoreOp,
    UpdateRedelivery,
)
from dovecote.store.groupcommit import written

_SubKey = tuple[Destination, str, str]


class MemoryPersistenceAdapter:
    def __init__(self) -> None:
        # Dicts keep insertion order, which is send order.
        self._messages: dict[Destination, dict[str, Message]] = {}
        # Topic messages live while some durable subscription still needs them.
        self._topic_messages: dict[str, Message] = {}
        self._subscriptions: dict[_SubKey, DurableSubscription] = {}
        # For each durable subscription, the ids of topic messages it has not acked yet.
        self._sub_pending: dict[_SubKey, dict[str, None]] = {}

    degraded: str | None = None
    """Memory never fails to write (store/health.py)."""

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def recover(self) -> RecoveredState:
        state = RecoveredState()
        for destination, messages in self._messages.items():
            if destination.is_queue:
                state.queues[destination] = list(messages.values())
        for key, sub in self._subscriptions.items():
            pending = [self._topic_messages[mid] for mid in self._sub_pending[key]]
            state.subscriptions.append(RecoveredSubscription(sub, pending))
        return state

    def write(
        self, batch: Sequence[StoreOp], sync: bool = True, lazy: bool = False
    ) -> Awaitable[None]:
        for op in batch:
            self._apply(op)
        return written()

    def _apply(self, op: StoreOp) -> None:
        match op:
            case AddMessage(message) if message.destination.is_queue:
                self._messages.setdefault(message.destination, {})[message.message_id] = message
            case AddMessage(message):
                wanted = False
                for key in self._subscriptions:
                    if destination_matches(key[0], message.destination):
                        self._sub_pending[key][message.message_id] = None
                        wanted = True
                if wanted:
                    self._topic_messages[message.message_id] = message
            case RemoveMessage(destination, message_id):
                self._messages.get(destination, {}).pop(message_id, None)
            case UpdateRedelivery(destination, message_id, counter):
                stored = self._messages.get(destination, {})
                if message_id in stored:
                    stored[message_id] = stored[message_id].with_redelivery(counter)
                elif message_id in self._topic_messages:
                    message = self._topic_messages[message_id]
                    self._topic_messages[message_id] = message.with_redelivery(counter)
            case AddSubscription(sub):
                key = (sub.destination, sub.client_id, sub.name)
                self._subscriptions[key] = sub
                self._sub_pending.setdefault(key, {})
            case RemoveSubscription(destination, client_id, name):
                key = (destination, client_id, name)
                self._subscriptions.pop(key, None)
                for message_id in self._sub_pending.pop(key, {}):
                    self._release_topic_message(message_id)
            case AckSubscription(destination, client_id, name, message_id):
                pending = self._sub_pending.get((destination, client_id, name))
                if pending is not None and message_id in pending:
                    del pending[message_id]
                    self._release_topic_message(message_id)
            case RemoveDestination(destination):
                self._messages.pop(destination, None)

    def _release_topic_message(self, message_id: str) -> None:
        """Drop a topic message once no durable subscription still needs it."""
        if not any(message_id in pending for pending in self._sub_pending.values()):
            self._topic_messages.pop(message_id, None)

    def checkpoint(self) -> None:
        return None

    def message_count(self, destination: Destination) -> int:
        if destination.is_topic:
            return sum(1 for m in self._topic_messages.values() if m.destination == destination)
        return len(self._messages.get(destination, {}))
