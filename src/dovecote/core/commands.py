"""The broker's command vocabulary, modelled on OpenWire's commands.

Every protocol adapter turns its frames into these and the broker answers in these; the
broker never sees STOMP or OpenWire. Commands are frozen and slotted; the broker dispatches
on their type with ``match``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from dovecote.core.destinations import Destination
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId, SessionId, TransactionId
from dovecote.core.message import Message
from dovecote.core.records import pickle_by_fields

# Default prefetch sizes, ActiveMQ's ActiveMQPrefetchPolicy (compatibility C2).
QUEUE_PREFETCH = 1000
DURABLE_TOPIC_PREFETCH = 100
TOPIC_PREFETCH = 32766
QUEUE_BROWSER_PREFETCH = 500


class AckType(IntEnum):
    """MessageAck types with their OpenWire codes (compatibility C5)."""

    DELIVERED = 0
    """Delivered to the application, not consumed: frees prefetch room only."""
    POISON = 1
    """The client gave up on it: the broker moves it to the dead-letter queue."""
    STANDARD = 2
    """Consumed: every message dispatched to the consumer up to last_message_id."""
    REDELIVERED = 3
    """The client redelivered it locally: the broker updates the counter only."""
    INDIVIDUAL = 4
    """Consumed: exactly the messages named, nothing before them."""
    UNMATCHED = 5
    """A durable subscriber's selector did not match it: drop it for that subscription."""
    EXPIRED = 6
    """The client found it expired: remove it (to the DLQ when persistent)."""


class TransactionType(IntEnum):
    BEGIN = 0
    COMMIT = 2
    ROLLBACK = 5


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    connection_id: ConnectionId
    client_id: str | None = None
    user_name: str | None = None
    password: str | None = None
    network_broker_id: str | None = None
    """Set when a network bridge opens the connection: the id of the broker it forwards
    for (its BrokerInfo came first, with networkConnection)."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session_id: SessionId


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    consumer_id: ConsumerId
    destination: Destination
    prefetch_size: int = QUEUE_PREFETCH
    selector: str | None = None
    no_local: bool = False
    exclusive: bool = False
    subscription_name: str | None = None
    """Set for a durable topic subscription (with the connection's client id)."""
    browser: bool = False
    priority: int = 0
    dispatch_async: bool = True
    maximum_pending_message_limit: int = 0
    auto_ack: bool = False
    """The broker settles each message as it dispatches it (STOMP ``ack:auto``, which
    ActiveMQ acks on dispatch); nothing stays in flight, and the prefetch bounds instead
    the messages the connection has not yet handed to its socket."""
    broker_path: tuple[str, ...] = ()
    """The ids of the brokers a network consumer's demand came through (OpenWire's
    ConsumerInfo.brokerPath): its advisory carries them, so that no bridge sends the demand
    back where it came from or further than the consumer TTL."""
    additional_predicate: Callable[[Message], bool] | None = None
    """A test every message must also pass, set in process only, never from the wire: a
    network bridge's consumer uses it to refuse messages that would loop or outlive their
    network TTL (ActiveMQ's ConsumerInfo.additionalPredicate, its NetworkBridgeFilter)."""


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    producer_id: ProducerId
    destination: Destination | None = None
    window_size: int = 0


@dataclass(slots=True, unsafe_hash=True, init=False)
class SendMessage:
    """A producer's send; ``transaction_id`` defers it to the commit. (This and the other
    per-message records are immutable by convention: see core/records.py.)"""

    message: Message
    transaction_id: TransactionId | None = None
    flow_control: bool = True
    """False for a producer limited by its own window (OpenWire's producerWindowSize): the
    broker accepts the message and the adapter holds the ProducerAck back instead (S3, S4)."""
    sync: bool = True
    """The client waits for this send (a STOMP receipt, an OpenWire response): the store
    write of a persistent message is synced before it hears back. Others are written but
    not synced on their own (as KahaDB does): the next synced write covers them; a crash of
    the machine before it may lose them, a crash of the broker cannot."""

    def __init__(
        self,
        message: Message,
        transaction_id: TransactionId | None = None,
        flow_control: bool = True,
        sync: bool = True,
    ) -> None:
        self.message = message
        self.transaction_id = transaction_id
        self.flow_control = flow_control
        self.sync = sync


@dataclass(slots=True, unsafe_hash=True, init=False)
class MessageAck:
    consumer_id: ConsumerId
    ack_type: AckType
    last_message_id: str
    first_message_id: str | None = None
    message_count: int = 1
    transaction_id: TransactionId | None = None
    poison_cause: str | None = None
    sync: bool = True
    """The client waits for this ack to be done (a STOMP receipt, an OpenWire response):
    its store write is synced. Others are not (as KahaDB does): a crash of the machine
    before the next sync may redeliver them; a crash of the broker cannot."""

    def __init__(
        self,
        consumer_id: ConsumerId,
        ack_type: AckType,
        last_message_id: str,
        first_message_id: str | None = None,
        message_count: int = 1,
        transaction_id: TransactionId | None = None,
        poison_cause: str | None = None,
        sync: bool = True,
    ) -> None:
        self.consumer_id = consumer_id
        self.ack_type = ack_type
        self.last_message_id = last_message_id
        self.first_message_id = first_message_id
        self.message_count = message_count
        self.transaction_id = transaction_id
        self.poison_cause = poison_cause
        self.sync = sync


@dataclass(frozen=True, slots=True)
class MessagePull:
    """Prefetch 0: ask for one message; an empty dispatch answers when ``timeout`` ms pass
    (0 waits forever, -1 returns at once)."""

    consumer_id: ConsumerId
    timeout: int = 0


@dataclass(frozen=True, slots=True)
class TransactionInfo:
    connection_id: ConnectionId
    transaction_id: TransactionId
    type: TransactionType
    redeliver_acked: bool = True
    """On rollback: True sends the messages whose acks are dropped back for redelivery (what
    STOMP clients expect); False leaves them in flight for a client that redelivers them
    itself (the JMS client)."""


LAST_DELIVERED_UNKNOWN = -2
"""RemoveInfo: nothing is known of what the application saw (a connection lost, a STOMP
unsubscribe): every message in flight comes back counted as redelivered."""
LAST_DELIVERED_UNSET = -1
"""RemoveInfo: the application saw nothing: every message in flight comes back as it was."""


@dataclass(frozen=True, slots=True)
class RemoveInfo:
    """Close a connection, session, consumer or producer."""

    object_id: ConnectionId | SessionId | ConsumerId | ProducerId
    last_delivered_sequence: int = LAST_DELIVERED_UNKNOWN
    """For what closes with consumers: the dispatch sequence of the last message the
    application was handed (the highest of its consumers' for a session or connection).
    Only what was dispatched up to it counts as redelivered; the rest was prefetched and
    never seen, and comes back unmarked (compatibility R1, as ActiveMQ's RemoveInfo)."""


@dataclass(frozen=True, slots=True)
class RemoveSubscriptionInfo:
    """Delete a durable topic subscription."""

    client_id: str
    subscription_name: str


@dataclass(frozen=True, slots=True)
class DestinationInfo:
    """Create (add=True) or delete a destination, notably a temporary one."""

    connection_id: ConnectionId
    destination: Destination
    add: bool = True


@dataclass(slots=True, unsafe_hash=True, init=False)
class MessageDispatch:
    """Broker to consumer: one message, or ``message=None`` as the empty answer to a pull
    or the end of a browse."""

    consumer_id: ConsumerId
    message: Message | None
    sequence: int = 0
    """The broker's sequence of this dispatch, echoed by RemoveInfo.last_delivered_sequence."""

    def __init__(self, consumer_id: ConsumerId, message: Message | None, sequence: int = 0) -> None:
        self.consumer_id = consumer_id
        self.message = message
        self.sequence = sequence


Command = (
    ConnectionInfo
    | SessionInfo
    | ConsumerInfo
    | ProducerInfo
    | SendMessage
    | MessageAck
    | MessagePull
    | TransactionInfo
    | RemoveInfo
    | RemoveSubscriptionInfo
    | DestinationInfo
)


pickle_by_fields(__name__)
