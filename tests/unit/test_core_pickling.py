"""The frozen records of the command vocabulary pickle and copy to equal objects and stay
frozen, interpreted or compiled (build_native.py compiles core/: a compiled frozen dataclass
unpickles only through ``records.pickle_by_fields``)."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pickle

import pytest

from dovecote.core.commands import (
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    MessagePull,
    ProducerInfo,
    RemoveInfo,
    RemoveSubscriptionInfo,
    SessionInfo,
    TransactionInfo,
    TransactionType,
)
from dovecote.core.destinations import Destination, DestinationType, queue, topic
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId, SessionId, TransactionId

CONNECTION = ConnectionId("ID:host-1-2")
SESSION = SessionId(CONNECTION, 3)
CONSUMER = ConsumerId(SESSION, 4)
PRODUCER = ProducerId(SESSION, 5)
TRANSACTION = TransactionId(CONNECTION, "tx-1")

SAMPLES: list[object] = [
    CONNECTION,
    SESSION,
    CONSUMER,
    PRODUCER,
    queue("orders"),
    Destination(DestinationType.TEMP_TOPIC, "ID:t-1"),
    ConnectionInfo(CONNECTION, "client", "user", None),
    SessionInfo(SESSION),
    ConsumerInfo(CONSUMER, topic("a.>"), 10, "x > 1", True, subscription_name="durable"),
    ProducerInfo(PRODUCER, None, 1024),
    MessagePull(CONSUMER, 500),
    TransactionInfo(CONNECTION, TRANSACTION, TransactionType.COMMIT),
    RemoveInfo(CONSUMER, 17),
    RemoveSubscriptionInfo("client", "durable"),
    DestinationInfo(CONNECTION, queue("q"), add=False),
]

NOT_FROZEN: list[object] = [TRANSACTION]
"""Built once per message, so made as core/records.py says: not frozen at run time."""

CORE_MODULES = ["dovecote.core.ids", "dovecote.core.destinations", "dovecote.core.commands"]


@pytest.mark.parametrize("record", SAMPLES + NOT_FROZEN, ids=lambda r: type(r).__name__)
def test_pickles_and_copies_to_an_equal_record(record: object) -> None:
    for again in (
        pickle.loads(pickle.dumps(record)),
        copy.copy(record),
        copy.deepcopy(record),
    ):
        assert type(again) is type(record)
        assert again == record
        assert hash(again) == hash(record)
        assert dataclasses.astuple(again) == dataclasses.astuple(record)  # type: ignore[call-overload]


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: type(r).__name__)
def test_stays_frozen(record: object) -> None:
    name = dataclasses.fields(record)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, name, None)


def test_every_frozen_record_of_core_has_a_sample() -> None:
    frozen = {
        value
        for module in CORE_MODULES
        for value in vars(importlib.import_module(module)).values()
        if isinstance(value, type)
        and value.__module__ == module
        and dataclasses.is_dataclass(value)
        and value.__dataclass_params__.frozen  # type: ignore[attr-defined]
    }
    assert frozen == {type(sample) for sample in SAMPLES}
