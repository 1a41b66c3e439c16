"""Ids as dictionary keys: consumer and producer ids hash by their plain values (a hand-written
hash), which must agree with equality for copies, pickled copies and near misses."""

from __future__ import annotations

import pickle

import pytest

from dovecote.core.destinations import Destination, DestinationType
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId, SessionId


def session(connection: str = "ID:host-1", value: int = 1) -> SessionId:
    return SessionId(ConnectionId(connection), value)


@pytest.mark.parametrize("kind", [ConsumerId, ProducerId])
def test_equal_ids_find_each_other_and_near_misses_do_not(
    kind: type[ConsumerId] | type[ProducerId],
) -> None:
    key = kind(session(), 3)
    table = {key: "found"}
    assert table[kind(session(), 3)] == "found"
    assert table[pickle.loads(pickle.dumps(key))] == "found"
    for miss in (kind(session(), 4), kind(session(value=2), 3), kind(session("ID:host-2"), 3)):
        assert miss not in table
    other = ProducerId if kind is ConsumerId else ConsumerId
    assert other(session(), 3) not in table  # same numbers, another kind of id


@pytest.mark.parametrize(
    ("key", "same", "misses"),
    [
        (ConnectionId("ID:host-1"), ConnectionId("ID:host-1"), [ConnectionId("ID:host-2")]),
        (session(), session(), [session(value=2), session("ID:host-2")]),
        (
            Destination(DestinationType.QUEUE, "orders"),
            Destination(DestinationType.QUEUE, "orders"),
            [
                Destination(DestinationType.TOPIC, "orders"),  # same name, same hash
                Destination(DestinationType.TEMP_QUEUE, "orders"),
                Destination(DestinationType.QUEUE, "orders.eu"),
            ],
        ),
    ],
    ids=["connection", "session", "destination"],
)
def test_hand_hashed_records_find_their_equals_only(
    key: object, same: object, misses: list[object]
) -> None:
    table = {key: "found"}
    assert table[same] == "found"
    assert table[pickle.loads(pickle.dumps(key))] == "found"
    for miss in misses:
        assert miss not in table
        assert miss != key
    assert key != str(key)  # not equal to its text
