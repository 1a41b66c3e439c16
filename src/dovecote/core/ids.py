"""Identifiers, shaped like OpenWire's: a connection id owns session ids, which own consumer
and producer ids. Each renders as ActiveMQ renders it (``ID:host-1:2:3``) so that message ids
built from producer ids read the same on the wire (compatibility S5)."""

from __future__ import annotations

import itertools
import os
import socket
from dataclasses import dataclass, field

from dovecote.core.records import pickle_by_fields


@dataclass(frozen=True, slots=True)
class ConnectionId:
    value: str
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Looked up for every send; equal ids have equal values. Why the hash is kept:
        # core/records.py.
        object.__setattr__(self, "_hash", hash(self.value) >> 2)

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class SessionId:
    connection_id: ConnectionId
    value: int

    def __hash__(self) -> int:
        return hash((self.connection_id.value, self.value))

    def __str__(self) -> str:
        return f"{self.connection_id}:{self.value}"


def _child_hash(session: SessionId, value: int) -> int:
    """A consumer's or producer's id hash, made once: hashed for every delivery and ack,
    one tuple of plain values instead of three nested dataclass hashes (consistent with the
    generated __eq__); a quarter of it, as core/records.py says why."""
    return hash((session.connection_id.value, session.value, value)) >> 2


@dataclass(frozen=True, slots=True)
class ConsumerId:
    session_id: SessionId
    value: int
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", _child_hash(self.session_id, self.value))

    def __hash__(self) -> int:
        return self._hash

    @property
    def connection_id(self) -> ConnectionId:
        return self.session_id.connection_id

    def __str__(self) -> str:
        return f"{self.session_id}:{self.value}"


@dataclass(frozen=True, slots=True)
class ProducerId:
    session_id: SessionId
    value: int
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", _child_hash(self.session_id, self.value))

    def __hash__(self) -> int:
        return self._hash

    @property
    def connection_id(self) -> ConnectionId:
        return self.session_id.connection_id

    def __str__(self) -> str:
        return f"{self.session_id}:{self.value}"


@dataclass(slots=True, init=False)
class TransactionId:
    """A local transaction, named by its connection and a per-connection key. One is made
    for every transacted STOMP send and looked up in the connection's transactions: built
    as core/records.py says, its hash kept and its equality written out (a dataclass's
    generated ``__init__``, ``__hash__`` and ``__eq__`` run interpreted, three calls per
    send)."""

    connection_id: ConnectionId
    value: str
    _hash: int = field(init=False, repr=False, compare=False)

    def __init__(self, connection_id: ConnectionId, value: str) -> None:
        self.connection_id = connection_id
        self.value = value
        self._hash = hash((connection_id.value, value)) >> 2

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TransactionId):
            return NotImplemented
        return self.value == other.value and self.connection_id.value == other.connection_id.value

    def __str__(self) -> str:
        return f"TX:{self.connection_id}:{self.value}"


class IdGenerator:
    """Makes ``ID:<host>-<pid>-<start>-<n>`` connection ids, unique across broker restarts."""

    def __init__(self, prefix: str = "ID") -> None:
        host = socket.gethostname().replace(":", "-")
        self._base = f"{prefix}:{host}-{os.getpid()}-{int.from_bytes(os.urandom(4), 'big')}"
        self._counter = itertools.count(1)

    def next_connection_id(self) -> ConnectionId:
        return ConnectionId(f"{self._base}-{next(self._counter)}")

    def next_name(self) -> str:
        return f"{self._base}-{next(self._counter)}"


def highest_sequences(message_ids: list[str]) -> dict[str, int]:
    """Each producer's highest sequence id among ``message_ids`` (``<producer id>:<n>``), in
    the order producers first come; ids of another shape are left out, as
    ``ProducerSequences.seen`` leaves them. (Here, compiled: a commit of a Spark partition's
    100,000 sends waits for it.)"""
    highest: dict[str, int] = {}
    for message_id in message_ids:
        producer, _, text = message_id.rpartition(":")
        try:
            sequence = int(text)
        except ValueError:
            continue
        last = highest.get(producer)
        if last is None or sequence > last:
            highest[producer] = sequence
    return highest


pickle_by_fields(__name__)
