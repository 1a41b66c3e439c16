"""The operations a store applies (see api.py), and the durable subscription they name.

Kept apart from the contract's Protocols so that mypyc compiles them (build_native.py): an add
and a remove are made for every persistent message, and a runtime-checkable Protocol cannot
be compiled. api.py gives them under its own name as well.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dovecote.core.appended_blocks import AppendedBlock
from dovecote.core.destinations import Destination
from dovecote.core.message import Message
from dovecote.core.records import pickle_by_fields


@dataclass(frozen=True, slots=True)
class DurableSubscription:
    """A durable topic subscription: who it is and what it selects."""

    client_id: str
    name: str
    destination: Destination
    selector: str | None = None
    no_local: bool = False


@dataclass(slots=True, unsafe_hash=True, init=False)
class AddMessage:
    """A message stored. This and RemoveMessage come once per message: built as
    core/records.py says, and as immutable."""

    message: Message
    block: AppendedBlock | None = field(default=None, compare=False)
    """On the first of the adds of an Append block's messages, when they follow it here in
    the block's order, as the broker enqueued them: a store may keep the block as it came
    (store/journal/FORMAT.md) instead of each message."""

    def __init__(self, message: Message, block: AppendedBlock | None = None) -> None:
        self.message = message
        self.block = block


@dataclass(slots=True, unsafe_hash=True, init=False)
class RemoveMessage:
    """A queue message consumed (or moved away): it is gone from the destination."""

    destination: Destination
    message_id: str

    def __init__(self, destination: Destination, message_id: str) -> None:
        self.destination = destination
        self.message_id = message_id


@dataclass(frozen=True, slots=True)
class UpdateRedelivery:
    """A message came back for redelivery: its counter survives a restart."""

    destination: Destination
    message_id: str
    redelivery_counter: int


@dataclass(frozen=True, slots=True)
class AddSubscription:
    subscription: DurableSubscription


@dataclass(frozen=True, slots=True)
class RemoveSubscription:
    destination: Destination
    client_id: str
    name: str


@dataclass(frozen=True, slots=True)
class AckSubscription:
    """A durable subscriber consumed (or skipped) a topic message."""

    destination: Destination
    client_id: str
    name: str
    message_id: str


@dataclass(frozen=True, slots=True)
class RemoveDestination:
    destination: Destination


StoreOp = (
    AddMessage
    | RemoveMessage
    | UpdateRedelivery
    | AddSubscription
    | RemoveSubscription
    | AckSubscription
    | RemoveDestination
)


pickle_by_fields(__name__)
