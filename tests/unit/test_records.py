"""The per-message records (core/records.py) are dataclasses with a written-out
``__init__``: it must take every field, in order, under its name, with its default, and the
records must compare, hash, copy, pickle and ``replace`` as dataclasses do. The ids and
destinations that keep their hash must hash as their values do, however they were made."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from dovecote.core.appended_blocks import AppendedBlock
from dovecote.core.commands import (
    AckType,
    ConnectionInfo,
    MessageAck,
    MessageDispatch,
    SendMessage,
    SessionInfo,
)
from dovecote.core.destinations import Destination, DestinationType, queue, topic
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId, SessionId, TransactionId
from dovecote.core.message import Message
from dovecote.core.stream_blocks import encode_block
from dovecote.protocol.openwire.compiled import Structure
from dovecote.protocol.openwire.converter import OpenWireRequest
from dovecote.protocol.stomp.converter import StompRequest
from dovecote.protocol.stomp.frames import Frame
from dovecote.store.api import AddMessage, RemoveMessage
from dovecote.store.journal.datafiles import Location
from dovecote.store.journal.records import SequencedAdd

CONSUMER = ConsumerId(SessionId(ConnectionId("ID:c"), 1), 2)
MESSAGE = Message("ID:m:1", queue("q"), b"body", properties={"k": "v"})
RECORDS: dict[type, dict[str, Any]] = {
    # For each record: a value for its required fields.
    Message: {"message_id": "ID:m:1", "destination": queue("q")},
    SendMessage: {"message": MESSAGE},
    MessageAck: {"consumer_id": CONSUMER, "ack_type": AckType.STANDARD, "last_message_id": "x"},
    MessageDispatch: {"consumer_id": CONSUMER, "message": MESSAGE},
    StompRequest: {},
    OpenWireRequest: {},
    Frame: {"command": "SEND"},
    Structure: {"type": 21},
    AddMessage: {"message": MESSAGE},
    RemoveMessage: {"destination": queue("q"), "message_id": "ID:m:1"},
    SequencedAdd: {"seq": 7, "message": MESSAGE},
    Location: {"file_id": 3, "offset": 200},  # (small ints: compiled, others are new objects)
}
UNHASHABLE = (Message, SendMessage, MessageDispatch, AddMessage, SequencedAdd, Structure)
"""Messages' properties and structures' fields are dicts."""


def _fields(cls: type) -> list[dataclasses.Field[Any]]:
    return list(dataclasses.fields(cls))


CANDIDATES: list[Callable[[int, object], object]] = [
    # A new value for field number i (whose default is the second argument), unlike any
    # default and any other field's; the first one the field's type takes is used.
    lambda i, _: f"value-{i}",
    lambda i, _: f"bytes-{i}".encode(),
    lambda i, _: 1_000 + i,
    lambda _, default: not default,
    lambda i, _: queue(f"q-{i}"),
    lambda i, _: Message(f"ID:m:{i}", queue("q")),
    lambda i, _: ConsumerId(CONSUMER.session_id, 1_000 + i),
    lambda i, _: TransactionId(ConnectionId("ID:c"), f"tx-{i}"),
    lambda i, _: (SessionInfo(CONSUMER.session_id),),
    lambda i, _: Frame(f"COMMAND-{i}"),
    lambda i, _: ConnectionInfo(ConnectionId(f"ID:c-{i}"), None, None, None),
    lambda i, _: Structure(1_000 + i),
    lambda i, _: {f"field-{i}": i},
    lambda i, _: AppendedBlock(encode_block([]), queue(f"q-{i}"), True, "p", "c"),
    lambda _, default: next(m for m in type(default) if m is not default),  # an enum's other
]


def _defaults(cls: type) -> list[object]:
    """A value for each field: the required ones from RECORDS, the others their defaults."""
    return [
        RECORDS[cls][f.name] if f.name in RECORDS[cls]
        else f.default_factory() if f.default_factory is not dataclasses.MISSING
        else f.default
        for f in _fields(cls)
    ]  # fmt: skip


def _distinct_values(cls: type) -> list[object]:
    """A value for each field, each one new and of the field's type. Compiled, a class
    checks the types of its arguments (a wrong one is a TypeError), so each field gets the
    first candidate it takes; interpreted, it takes the first."""
    fields = _fields(cls)
    values = _defaults(cls)
    for i, f in enumerate(fields):
        for make in CANDIDATES:
            try:
                value = make(i, values[i])
                cls(*values[:i], value, *values[i + 1 :])
            except (TypeError, StopIteration):
                continue
            values[i] = value
            break
        else:
            raise AssertionError(f"no candidate value fits {cls.__name__}.{f.name}")
    return values


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_init_takes_every_field_in_order_with_its_default(cls: type) -> None:
    fields = _fields(cls)
    required = RECORDS[cls]
    assert [f.name for f in fields if f.default is dataclasses.MISSING and
            f.default_factory is dataclasses.MISSING] == list(required)  # fmt: skip
    built = cls(**required)
    for f in fields:
        if f.name in required:
            assert getattr(built, f.name) is required[f.name]
        elif f.default_factory is not dataclasses.MISSING:
            assert getattr(built, f.name) == f.default_factory()
        else:
            assert getattr(built, f.name) == f.default, f.name
    # Every field from its own argument, by position and by name: a field set from the
    # wrong argument, or a parameter out of order, shows here. One field at a time, the
    # others left at their defaults: two fields of one type (two flags) cannot both take
    # a value unlike the other's and every default.
    values, defaults = _distinct_values(cls), _defaults(cls)
    for i, changed in enumerate(fields):
        arguments = [*defaults[:i], values[i], *defaults[i + 1 :]]
        by_position = cls(*arguments)
        by_name = cls(**{f.name: v for f, v in zip(fields, arguments, strict=True)})
        for f, value in zip(fields, arguments, strict=True):
            for built in (by_position, by_name):
                # (Equal, not the same object: compiled, an int field is stored unboxed.)
                got = getattr(built, f.name)
                assert type(got) is type(value) and got == value, (changed.name, f.name)


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_compares_hashes_copies_pickles_and_replaces_as_a_dataclass(cls: type) -> None:
    # A message's default properties, an empty read-only mapping, do not pickle: a dict does.
    extra = {"properties": {}} if cls is Message else {}
    record = cls(**RECORDS[cls], **extra)
    same = cls(**RECORDS[cls], **extra)
    assert record == same and record is not same
    if cls not in UNHASHABLE:
        assert hash(record) == hash(same)
    for again in (pickle.loads(pickle.dumps(record)), copy.copy(record), copy.deepcopy(record)):
        assert type(again) is cls and again == record
    first = _fields(cls)[0].name
    changed = dataclasses.replace(record, **{first: same_type_other(getattr(record, first))})
    assert changed != record
    assert all(getattr(changed, f.name) == getattr(record, f.name) for f in _fields(cls)[1:])


def same_type_other(value: object) -> object:
    """A value of the same type as ``value`` but unequal to it."""
    match value:
        case str():
            return value + "-other"
        case int():
            return value + 1
        case Destination():
            return queue(value.name + "-other")
        case tuple():
            return (*value, None)
        case Message():
            return dataclasses.replace(value, message_id="ID:other")
        case ConsumerId():
            return ConsumerId(value.session_id, value.value + 1)
        case _:
            raise AssertionError(f"no other value for {value!r}")


# Keys that keep their hash (core/records.py): each made twice, and a changed field.
OTHER_SESSION = SessionId(ConnectionId("ID:d"), 1)
HASH_KEPT: list[tuple[Callable[[], object], dict[str, object]]] = [
    (lambda: ConnectionId("ID:c-1"), {"value": "ID:c-2"}),
    (lambda: ConsumerId(SessionId(ConnectionId("ID:c"), 1), 2), {"value": 3}),
    (lambda: ConsumerId(SessionId(ConnectionId("ID:c"), 1), 2), {"session_id": OTHER_SESSION}),
    (lambda: ProducerId(SessionId(ConnectionId("ID:c"), 1), 2), {"value": 3}),
    (lambda: TransactionId(ConnectionId("ID:c"), "tx-1"), {"value": "tx-2"}),
    (lambda: TransactionId(ConnectionId("ID:c"), "tx-1"), {"connection_id": ConnectionId("ID:d")}),
    (lambda: queue("orders"), {"name": "payments"}),
    (lambda: topic("orders"), {"type": DestinationType.QUEUE}),
    (lambda: queue("a,b"), {"name": "a"}),
    (lambda: queue("a"), {"name": "a,topic://b"}),
]


@pytest.mark.parametrize(
    ("make", "change"), HASH_KEPT, ids=lambda v: repr(v() if callable(v) else v)[:40]
)
def test_keys_that_keep_their_hash_hash_as_their_values(
    make: Callable[[], object], change: dict[str, object]
) -> None:
    key, same = make(), make()
    assert key == same and hash(key) == hash(same)
    table = {key: "found"}
    for again in (pickle.loads(pickle.dumps(key)), copy.copy(key), copy.deepcopy(key), same):
        assert again == key and hash(again) == hash(key) and table[again] == "found"
    # A changed copy hashes as a new one made with that value would, not as the old one.
    changed = dataclasses.replace(key, **change)
    fresh = type(key)(**{**_init_values(key), **change})
    assert changed == fresh and hash(changed) == hash(fresh) and changed != key
    assert {fresh: 1}[changed] == 1
    assert "_hash" not in repr(key)
    if isinstance(key, Destination):  # (and the other value kept: composite or not)
        assert isinstance(changed, Destination) and isinstance(fresh, Destination)
        assert changed.components() == fresh.components()
        assert changed.is_composite == ("," in changed.name)
        assert str(changed) == str(fresh) == f"{changed.type.value}://{changed.name}"
        assert str(pickle.loads(pickle.dumps(key))) == str(key)


def _init_values(obj: Any) -> dict[str, object]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
