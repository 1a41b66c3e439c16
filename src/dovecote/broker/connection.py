"""Per-connection state the broker keeps: what the connection opened, so that closing it
(or losing it) closes everything it owned (compatibility D1 temporary destinations, R1, T1)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dovecote.broker.consumer import Consumer, DispatchSink, Entry
from dovecote.broker.queue import Queue
from dovecote.broker.topic import TopicSubscription
from dovecote.core.appended_blocks import AppendedBlock
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
    """Sends and acks held back until commit (compatibility T1)."""

    transaction_id: TransactionId
    sends: list[Message] = field(default_factory=list)
    acks: list[TransactedAck] = field(default_factory=list)
    blocks: dict[int, AppendedBlock] = field(default_factory=dict)
    """Append blocks among the sends, by the id of their first message (it keeps them)."""


@dataclass(frozen=True, slots=True)
class Peer:
    """What the transport knows of the other end of a connection, for plugins (security
    names a user by a client certificate; the console lists addresses)."""

    address: str = ""
    """host:port of the remote end ("" when there is no socket: in-process tests)."""
    protocol: str = ""
    """openwire or stomp."""
    tls: bool = False
    certificate_subject: str | None = None
    """The verified client certificate's subject (RFC 4514, CN=alice,O=example), if any."""


NO_PEER = Peer()


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a connection acts as, once authenticated: the user and the groups it is in."""

    user: str
    groups: frozenset[str] = frozenset()


@dataclass(slots=True)
class ConnectionState:
    info: ConnectionInfo
    sink: DispatchSink
    client_id: str
    peer: Peer = NO_PEER
    principal: Principal | None = None
    """Set by an authentication plugin in ``on_connect``; None without one."""
    sessions: set[SessionId] = field(default_factory=set)
    consumers: set[ConsumerId] = field(default_factory=set)
    producers: dict[ProducerId, Destination | None] = field(default_factory=dict)
    """Each producer and the destination it was created for (None: anonymous)."""
    temp_destinations: set[Destination] = field(default_factory=set)
    transactions: dict[TransactionId, LocalTransaction] = field(default_factory=dict)
    send_audit: Callable[[Message], bool] | None = None
    """For a network bridge's connection (set by the network plugin): True for a message
    already had from the broker it forwards for, which is then dropped, answered as
    stored."""
    send_stored: Callable[[Message], None] | None = None
    """Told of each send stored (and routed) from this connection, after its store write:
    the network audit remembers an id for good only then."""
    closer: Callable[[], None] | None = None
    """Closes the connection's socket (the console's close button); None: it has none."""

    def transaction_of(self, command: SendMessage | MessageAck) -> LocalTransaction:
        """The open transaction a transacted send or ack belongs to."""
        assert command.transaction_id is not None
        tx = self.transactions.get(command.transaction_id)
        if tx is None:
            raise UnknownTransactionError(f"transaction {command.transaction_id.value} is not open")
        return tx
