"""Per-connection state the broker keeps: what the connection opened, so that closing it
(or losing it) closes everything it owned (SPEC D1 temporary destinations, R1, T1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dovecote.broker.consumer import Consumer, DispatchSink, Entry
from dovecote.broker.queue import Queue
from dovecote.broker.topic import TopicSubscription
from dovecote.core.commands import ConnectionInfo, MessageAck, SendMessage
from dovecote.core.destinations import Destination
from dovecote.core.errors import UnknownTransactionError
from dovecote.core.ids import ConsumerId, ProducerId, SessionId, TransactionId
from dovecote.core.message import Message

Origin = Queue | TopicSubscription | None
"""Where a consumer's messages come from; None for a queue browser."""


@dataclass(slots=True)
class ConsumerRecord:
    consumer: Consumer
    origin: Origin


@dataclass(slots=True)
class TransactedAck:
    record: ConsumerRecord
    entries: list[Entry]


@dataclass(slots=True)
class LocalTransaction:
    """Sends and acks held back until commit (SPEC T1)."""

    transaction_id: TransactionId
    sends: list[Message] = field(default_factory=list)
    acks: list[TransactedAck] = field(default_factory=list)


@dataclass(slots=True)
class ConnectionState:
    info: ConnectionInfo
    sink: DispatchSink
    client_id: str
    sessions: set[SessionId] = field(default_factory=set)
    consumers: set[ConsumerId] = field(default_factory=set)
    producers: dict[ProducerId, Destination | None] = field(default_factory=dict)
    """Each producer and the destination it was created for (None: anonymous)."""
    temp_destinations: set[Destination] = field(default_factory=set)
    transactions: dict[TransactionId, LocalTransaction] = field(default_factory=dict)

    def transaction_of(self, command: SendMessage | MessageAck) -> LocalTransaction:
        """The open transaction a transacted send or ack belongs to."""
        assert command.transaction_id is not None
        tx = self.transactions.get(command.transaction_id)
        if tx is None:
            raise UnknownTransactionError(f"transaction {command.transaction_id.value} is not open")
        return tx
