"""The LevelDB store's keys and values (FORMAT.md), and how one group of operations becomes
the changes of one WriteBatch (``GroupChanges``)."""

from __future__ import annotations

import struct
from typing import Any, Final

import msgpack

from dovecote.core.destinations import Destination, destination_matches
from dovecote.core.message import Message
from dovecote.store.api import (
    AckSubscription,
    AddSubscription,
    RemoveDestination,
    RemoveMessage,
    RemoveSubscription,
    UpdateRedelivery,
)
from dovecote.store.journal.records import JournalOp, SequencedAdd, with_counter
from dovecote.store.messagecodec import pack_message, unpack_message

LAYOUT_VERSION: Final = 1
VERSION_KEY: Final = b"mversion"
SEQ_KEY: Final = b"mseq"
U32: Final = struct.Struct(">I")
U64: Final = struct.Struct(">Q")
POSITION: Final = struct.Struct(">QQ")
"""A queue message's place: (the broker's sequence, the store's seq)."""
COUNTS: Final = struct.Struct(">QQ")
HEADER: Final = struct.Struct(">IQ")
"""Before a stored message: its current redelivery counter, its size."""

QUEUE: Final = b"q"
QUEUE_ID: Final = b"i"
COUNT: Final = b"c"
TOPIC: Final = b"t"
REFS: Final = b"r"
TOPIC_ID: Final = b"j"
SUBSCRIPTION: Final = b"s"
PENDING: Final = b"p"

SubscriptionKey = bytes
"""client id \\0 name."""


def queue_prefix(destination: Destination | str) -> bytes:
    return QUEUE + str(destination).encode() + b"\0"


def queue_key(destination: Destination | str, position: bytes) -> bytes:
    return queue_prefix(destination) + position


def subscription_key(client_id: str, name: str) -> SubscriptionKey:
    return f"{client_id}\0{name}".encode()


def stored_value(message: Message) -> bytes:
    return HEADER.pack(message.redelivery_counter, message.size) + pack_message(message)


def stored_message(value: bytes) -> Message:
    """A ``q`` or ``t`` value as the message, its current redelivery counter applied."""
    counter, _ = HEADER.unpack_from(value)
    return with_counter(unpack_message(value[HEADER.size :]), counter)


def stored_size(value: bytes) -> int:
    size: int = HEADER.unpack_from(value)[1]
    return size


def unpack(value: bytes) -> Any:
    return msgpack.unpackb(value, raw=False)


def pack(value: Any) -> bytes:
    return bytes(msgpack.packb(value, use_bin_type=True))


class GroupChanges:
    """One group's puts and deletes over the database, to be written as one WriteBatch.
    Reads go through them first, so each operation of the group sees those before it."""

    def __init__(self, db: Any, subscriptions: dict[SubscriptionKey, Destination]) -> None:
        self.db = db
        self.changes: dict[bytes, bytes | None] = {}
        """key -> its new value, or None: deleted."""
        self.subscriptions = subscriptions
        """The durable subscriptions' destinations, copied before the group changes them
        (the adapter takes the copy once the group is written)."""
        self._subscriptions_copied = False
        self.top_seq = 0

    def get(self, key: bytes) -> bytes | None:
        if key in self.changes:
            return self.changes[key]
        value: bytes | None = self.db.get(key)
        return value

    def put(self, key: bytes, value: bytes) -> None:
        self.changes[key] = value

    def delete(self, key: bytes) -> None:
        self.changes[key] = None

    def keys(self, prefix: bytes) -> list[bytes]:
        """The keys under ``prefix``, as the group has left them so far, in order."""
        found = {
            bytes(key)
            for key in self.db.iterator(prefix=prefix, include_value=False)
            if self.changes.get(bytes(key), b"") is not None
        }
        found.update(k for k, v in self.changes.items() if v is not None and k.startswith(prefix))
        return sorted(found)

    def count(self, destination: Destination | str, messages: int, size: int) -> None:
        key = COUNT + str(destination).encode()
        raw = self.get(key)
        count, total = (0, 0) if raw is None else COUNTS.unpack(raw)
        if count + messages <= 0:
            self.delete(key)
        else:
            self.put(key, COUNTS.pack(count + messages, max(total + size, 0)))

    def _own_subscriptions(self) -> dict[SubscriptionKey, Destination]:
        if not self._subscriptions_copied:
            self.subscriptions = dict(self.subscriptions)
            self._subscriptions_copied = True
        return self.subscriptions

    # -- the operations ----------------------------------------------------------------------

    def apply(self, op: JournalOp) -> None:
        match op:
            case SequencedAdd(seq, message):
                self.top_seq = max(self.top_seq, seq)
                if message.destination.is_queue:
                    self._add_queue_message(seq, message)
                else:
                    self._add_topic_message(seq, message)
            case RemoveMessage(destination, message_id):
                id_key = QUEUE_ID + str(destination).encode() + b"\0" + message_id.encode()
                self._remove_queue_message(destination, id_key)
            case UpdateRedelivery(destination, message_id, counter):
                self._update_counter(destination, message_id, counter)
            case AddSubscription(sub):
                key = subscription_key(sub.client_id, sub.name)
                value = [str(sub.destination), sub.selector, sub.no_local]
                self.put(SUBSCRIPTION + key, pack(value))
                self._own_subscriptions()[key] = sub.destination
            case RemoveSubscription(_, client_id, name):
                key = subscription_key(client_id, name)
                if self.get(SUBSCRIPTION + key) is None:
                    return
                self.delete(SUBSCRIPTION + key)
                self._own_subscriptions().pop(key, None)
                prefix = PENDING + key + b"\0"
                for pending in self.keys(prefix):
                    self.delete(pending)
                    self._release(pending[len(prefix) :])
            case AckSubscription(_, client_id, name, message_id):
                seq_key = self.get(TOPIC_ID + message_id.encode())
                if seq_key is None:
                    return
                pending = PENDING + subscription_key(client_id, name) + b"\0" + seq_key
                if self.get(pending) is not None:
                    self.delete(pending)
                    self._release(seq_key)
            case RemoveDestination(destination):
                if not destination.is_queue:
                    return  # topic messages live while subscriptions need them
                prefix = QUEUE_ID + str(destination).encode() + b"\0"
                for id_key in self.keys(prefix):
                    self._remove_queue_message(destination, id_key)

    def _add_queue_message(self, seq: int, message: Message) -> None:
        destination = message.destination
        id_key = QUEUE_ID + str(destination).encode() + b"\0" + message.message_id.encode()
        self._remove_queue_message(destination, id_key)  # a resend replaces the one stored
        position = POSITION.pack(max(message.sequence, 0), seq)
        self.put(queue_key(destination, position), stored_value(message))
        self.put(id_key, position)
        self.count(destination, 1, message.size)

    def _remove_queue_message(self, destination: Destination, id_key: bytes) -> None:
        position = self.get(id_key)
        if position is None:
            return
        self.delete(id_key)
        key = queue_key(destination, position)
        value = self.get(key)
        if value is not None:
            self.delete(key)
            self.count(destination, -1, -stored_size(value))

    def _add_topic_message(self, seq: int, message: Message) -> None:
        destination = message.destination
        waiting = [
            key
            for key, subscribed in self.subscriptions.items()
            if destination_matches(subscribed, destination)
        ]
        if not waiting:
            return  # no durable subscription needs it
        seq_key = U64.pack(seq)
        self.put(TOPIC + seq_key, stored_value(message))
        refs = [len(waiting), message.size, str(destination), message.message_id]
        self.put(REFS + seq_key, pack(refs))
        self.put(TOPIC_ID + message.message_id.encode(), seq_key)
        for key in waiting:
            self.put(PENDING + key + b"\0" + seq_key, b"")
        self.count(destination, 1, message.size)

    def _release(self, seq_key: bytes) -> None:
        """One durable subscription less needs topic message ``seq_key``; the last one
        takes it away."""
        raw = self.get(REFS + seq_key)
        if raw is None:
            return
        refs, size, destination, message_id = unpack(raw)
        if refs > 1:
            self.put(REFS + seq_key, pack([refs - 1, size, destination, message_id]))
            return
        self.delete(REFS + seq_key)
        self.delete(TOPIC + seq_key)
        id_key = TOPIC_ID + message_id.encode()
        if self.get(id_key) == seq_key:  # (not a later message sent under the same id)
            self.delete(id_key)
        self.count(destination, -1, -size)

    def _update_counter(self, destination: Destination, message_id: str, counter: int) -> None:
        key: bytes | None = None
        position = self.get(QUEUE_ID + str(destination).encode() + b"\0" + message_id.encode())
        if position is not None:
            key = queue_key(destination, position)
        else:
            seq_key = self.get(TOPIC_ID + message_id.encode())
            key = None if seq_key is None else TOPIC + seq_key
        value = None if key is None else self.get(key)
        if key is not None and value is not None:
            self.put(key, U32.pack(counter) + value[U32.size :])
