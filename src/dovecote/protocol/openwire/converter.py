"""OpenWire structures to core commands and back: one converter per connection, no I/O.

This is the OpenWire twin of the STOMP converter. ``on_structure`` turns a client command
into an ``OpenWireRequest`` (core commands to run, then the structure to answer with);
``on_dispatch`` turns a broker dispatch into a MessageDispatch; ``error_response`` renders a
failure as an ExceptionResponse (for a command that wanted a response) or ConnectionError.

Mapping notes (ActiveMQ 5.17 behaviour):
- Text bodies become UTF-8 text in the core (so STOMP sees text); bytes bodies stay bytes;
  map, stream and object bodies travel as their OpenWire bytes.
- A message id is its MessageId's text form ``<producer id>:<sequence>``; dispatches carry
  it back as producer id + sequence, and as textView only when those do not spell it.
- A rollback leaves acked messages in flight to the client, which redelivers them itself.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import dataclass
from typing import Any, Final, cast

from dovecote.core.commands import (
    LAST_DELIVERED_UNKNOWN,
    AckType,
    Command,
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    MessageAck,
    MessageDispatch,
    MessagePull,
    ProducerInfo,
    RemoveInfo,
    RemoveSubscriptionInfo,
    SendMessage,
    SessionInfo,
    TransactionInfo,
    TransactionType,
)
from dovecote.core.errors import (
    DovecoteError,
    InvalidClientIdError,
    InvalidDestinationError,
    InvalidSelectorError,
    RemoteProtocolError,
    ResourceLimitError,
    SecurityError,
    peer_error,
)
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId, SessionId, TransactionId
from dovecote.core.message import BROKER_PATH_PROPERTY, BodyType, Message
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.codec import Structure, Throwable
from dovecote.protocol.openwire.data_structures import data_structure
from dovecote.protocol.openwire.primitives import (
    decode_map,
    decode_text_body,
    encode_map,
    encode_text_body,
)
from dovecote.protocol.openwire.structures import (
    consumer_structure,
    destination_of,
    destination_structure,
    message_id_structure,
    message_id_text,
)

MINIMUM_MESSAGE_SIZE: Final = 1024
_ID_CACHE_SIZE: Final = 1024

BODY_TYPES: Final = {
    t.MESSAGE: BodyType.MESSAGE,
    t.BYTES_MESSAGE: BodyType.BYTES,
    t.MAP_MESSAGE: BodyType.MAP,
    t.OBJECT_MESSAGE: BodyType.OBJECT,
    t.STREAM_MESSAGE: BodyType.STREAM,
    t.TEXT_MESSAGE: BodyType.TEXT,
    t.BLOB_MESSAGE: BodyType.BYTES,
}
MESSAGE_CODES: Final = {
    BodyType.MESSAGE: t.MESSAGE,
    BodyType.BYTES: t.BYTES_MESSAGE,
    BodyType.MAP: t.MAP_MESSAGE,
    BodyType.OBJECT: t.OBJECT_MESSAGE,
    BodyType.STREAM: t.STREAM_MESSAGE,
    BodyType.TEXT: t.TEXT_MESSAGE,
}
_TX_TYPES: Final = {0: TransactionType.BEGIN, 2: TransactionType.COMMIT,
                    3: TransactionType.COMMIT, 4: TransactionType.ROLLBACK}  # fmt: skip
_EXCEPTIONS: Final[tuple[tuple[type[DovecoteError], str], ...]] = (
    (InvalidDestinationError, "javax.jms.InvalidDestinationException"),
    (InvalidSelectorError, "javax.jms.InvalidSelectorException"),
    # ActiveMQ's security brokers throw java.lang.SecurityException: the Java client makes
    # it a JMSSecurityException.
    (SecurityError, "java.lang.SecurityException"),
    (ResourceLimitError, "javax.jms.ResourceAllocationException"),
    (InvalidClientIdError, "javax.jms.InvalidClientIDException"),
)


@dataclass(slots=True, unsafe_hash=True, init=False)
class OpenWireRequest:
    """What one command asks for. One per command read: built as core/records.py says (a
    written-out ``__init__``), and as immutable."""

    commands: tuple[Command, ...] = ()
    reply: Structure | None = None
    connect: ConnectionInfo | None = None
    close: bool = False
    producer_ack: Structure | None = None
    """Sent after the commands when the producer has a window (ProducerAck)..."""
    held_for: Message | None = None
    """...once this message's destination has memory to spare: producer flow control."""

    def __init__(
        self,
        commands: tuple[Command, ...] = (),
        reply: Structure | None = None,
        connect: ConnectionInfo | None = None,
        close: bool = False,
        producer_ack: Structure | None = None,
        held_for: Message | None = None,
    ) -> None:
        self.commands = commands
        self.reply = reply
        self.connect = connect
        self.close = close
        self.producer_ack = producer_ack
        self.held_for = held_for


def message_content(m: Message) -> bytes | None:
    """A message's body as OpenWire's content field carries it (None: no content)."""
    if m.body_type is BodyType.TEXT:
        return encode_text_body(m.body.decode("utf-8", "replace"))
    if m.body_type is BodyType.MESSAGE:
        return None
    return m.body or None


class OpenWireConverter:
    def __init__(self, connection_id: ConnectionId, broker_name: str) -> None:
        self.connection_id = connection_id
        self.connection_text = str(connection_id)
        self.broker_name = broker_name
        self.consumer_structures: dict[ConsumerId, Structure] = {}
        self._producer_windows: dict[str, int] = {}
        self._command_ids = itertools.count(1)
        self._client_ids: dict[tuple[Any, ...], tuple[ConsumerId | ProducerId, str]] = {}
        self.closed = False
        self.network_peer: str | None = None
        """The broker id of a network bridge at the other end (its BrokerInfo), if one."""

    # -- ids -------------------------------------------------------------------------------

    def _connection(self, s: Structure | None) -> ConnectionId:
        return self.connection_id if s is None else ConnectionId(s["value"])

    def _session(self, s: Structure) -> SessionId:
        return SessionId(ConnectionId(s["connectionId"]), s["value"])

    def consumer_id_of(self, s: Structure | None) -> ConsumerId:
        if s is None:
            raise RemoteProtocolError("a consumer id is missing")
        return cast(ConsumerId, self._client_id(s, ConsumerId)[0])

    def _producer(self, s: Structure) -> ProducerId:
        return cast(ProducerId, self._client_id(s, ProducerId)[0])

    def producer_text(self, s: Structure) -> str:
        return self._client_id(s, ProducerId)[1]

    def windowed(self, producer_text: str) -> bool:
        """Whether the producer has a window (its sends are answered with ProducerAcks)."""
        return bool(self._producer_windows.get(producer_text))

    def _client_id(
        self, s: Structure, kind: type[ConsumerId] | type[ProducerId]
    ) -> tuple[ConsumerId | ProducerId, str]:
        """A consumer or producer id and its text. Every message names its producer and
        every ack its consumer: each id is built once and then looked up."""
        f = s.fields
        key: tuple[Any, ...] = (kind, f.get("connectionId"), f.get("sessionId"), f.get("value"))
        found = self._client_ids.get(key)
        if found is None:
            if len(self._client_ids) >= _ID_CACHE_SIZE:
                self._client_ids.clear()
            made = kind(SessionId(ConnectionId(key[1]), key[2]), key[3])
            found = self._client_ids[key] = (made, str(made))
        return found

    def _transaction(self, s: Structure | None) -> TransactionId | None:
        if s is None:
            return None
        if s.type != t.LOCAL_TRANSACTION_ID:
            raise RemoteProtocolError("XA transactions are not supported")
        return TransactionId(self._connection(s["connectionId"]), str(s["value"]))

    # -- client commands -------------------------------------------------------------------

    def on_structure(self, s: Structure) -> OpenWireRequest:
        """The request a client's command makes. Whatever its fields hold, what it raises is
        a DovecoteError: anything else (a ValueError of an unknown ack type, a TypeError of a
        missing id) is the peer's MalformedCommandError, naming the command."""
        try:
            return self._on_structure(s)
        except DovecoteError:
            raise
        except Exception as exc:
            raise peer_error(exc, f"OpenWire {t.type_name(s.type)}", fatal=False) from None

    def _on_structure(self, s: Structure) -> OpenWireRequest:
        handler = _HANDLERS.get(s.type)
        if handler is None:
            if s.type in t.MESSAGE_TYPES:
                request = self._send(s)
            else:
                raise RemoteProtocolError(f"unexpected OpenWire command type {s.type}")
        else:
            request = handler(self, s)
        if s["responseRequired"] and request.reply is None:
            return OpenWireRequest(request.commands, self.response(s["commandId"]),
                                   request.connect, request.close,
                                   request.producer_ack)  # fmt: skip
        return request

    def response(self, correlation_id: int) -> Structure:
        """The plain Response to the command ``correlation_id`` names."""
        return Structure(t.RESPONSE, {"commandId": next(self._command_ids),
                                      "correlationId": correlation_id})  # fmt: skip

    def _connection_info(self, s: Structure) -> OpenWireRequest:
        if s["connectionId"] is not None:
            # The client names its connection; its consumer and producer ids carry that name.
            self.connection_id = ConnectionId(s["connectionId"]["value"])
            self.connection_text = str(self.connection_id)
        info = ConnectionInfo(
            self.connection_id,
            client_id=s["clientId"],
            user_name=s["userName"],
            password=s["password"],
            network_broker_id=self.network_peer,
        )
        return OpenWireRequest(connect=info)

    def _session_info(self, s: Structure) -> OpenWireRequest:
        return OpenWireRequest((SessionInfo(self._session(s["sessionId"])),))

    def _consumer_info(self, s: Structure) -> OpenWireRequest:
        consumer_id = self.consumer_id_of(s["consumerId"])
        destination = destination_of(s["destination"])
        if destination is None:
            raise InvalidDestinationError("a consumer needs a destination")
        self.consumer_structures[consumer_id] = s["consumerId"]
        info = ConsumerInfo(
            consumer_id=consumer_id,
            destination=destination,
            prefetch_size=s.get("prefetchSize", 0),
            selector=s["selector"],
            no_local=bool(s["noLocal"]),
            exclusive=bool(s["exclusive"]),
            subscription_name=s["subscriptionName"],
            browser=bool(s["browser"]),
            priority=s.get("priority", 0),
            dispatch_async=bool(s["dispatchAsync"]),
            maximum_pending_message_limit=s.get("maximumPendingMessageLimit", 0),
            broker_path=tuple(str(b["value"]) for b in s["brokerPath"] or () if b is not None),
        )
        return OpenWireRequest((info,))

    def _producer_info(self, s: Structure) -> OpenWireRequest:
        producer_id = self._producer(s["producerId"])
        window = s.get("windowSize", 0)
        if window > 0:
            self._producer_windows[str(producer_id)] = window
        info = ProducerInfo(producer_id, destination_of(s["destination"]), window)
        return OpenWireRequest((info,))

    def _transaction_info(self, s: Structure) -> OpenWireRequest:
        kind = _TX_TYPES.get(s["type"])
        if kind is None:
            raise RemoteProtocolError(f"transaction operation {s['type']} (XA) is not supported")
        tid = self._transaction(s["transactionId"])
        assert tid is not None
        return OpenWireRequest((TransactionInfo(self.connection_id, tid, kind, False),))

    def _destination_info(self, s: Structure) -> OpenWireRequest:
        destination = destination_of(s["destination"])
        assert destination is not None
        add = s["operationType"] == 0
        return OpenWireRequest((DestinationInfo(self.connection_id, destination, add),))

    def _remove_subscription(self, s: Structure) -> OpenWireRequest:
        return OpenWireRequest((RemoveSubscriptionInfo(s["clientId"], s["subcriptionName"]),))

    def _keep_alive(self, s: Structure) -> OpenWireRequest:
        if s["responseRequired"]:
            # ActiveMQ's inactivity monitor sends the same KeepAliveInfo back, its command id
            # kept and no response asked: the echo is the answer a client waits for.
            reply = Structure(t.KEEP_ALIVE_INFO, {"commandId": s["commandId"]})
            return OpenWireRequest(reply=reply)
        return OpenWireRequest()

    def _shutdown(self, s: Structure) -> OpenWireRequest:
        self.closed = True
        return OpenWireRequest((RemoveInfo(self.connection_id),), close=True)

    def _remove(self, s: Structure) -> OpenWireRequest:
        obj = s["objectId"]
        if obj is None:
            raise RemoteProtocolError("RemoveInfo names nothing")
        last = s.get("lastDeliveredSequenceId", LAST_DELIVERED_UNKNOWN)
        match obj.type:
            case t.CONNECTION_ID:
                return OpenWireRequest((RemoveInfo(self.connection_id, last),))
            case t.SESSION_ID:
                return OpenWireRequest((RemoveInfo(self._session(obj), last),))
            case t.CONSUMER_ID:
                consumer_id = self.consumer_id_of(obj)
                self.consumer_structures.pop(consumer_id, None)
                return OpenWireRequest((RemoveInfo(consumer_id, last),))
            case t.PRODUCER_ID:
                producer_id = self._producer(obj)
                self._producer_windows.pop(str(producer_id), None)
                return OpenWireRequest((RemoveInfo(producer_id),))
        raise RemoteProtocolError(f"RemoveInfo of an OpenWire type {obj.type}")

    def _pull(self, s: Structure) -> OpenWireRequest:
        return OpenWireRequest(
            (MessagePull(self.consumer_id_of(s["consumerId"]), s.get("timeout", 0)),)
        )

    def _ack(self, s: Structure) -> OpenWireRequest:
        first = s["firstMessageId"]
        cause = s["poisonCause"]
        ack = MessageAck(
            consumer_id=self.consumer_id_of(s["consumerId"]),
            ack_type=AckType(s["ackType"]),
            last_message_id=message_id_text(s["lastMessageId"]),
            first_message_id=message_id_text(first) if first is not None else None,
            message_count=s.get("messageCount", 1),
            transaction_id=self._transaction(s["transactionId"]),
            poison_cause=f"{cause.class_name}: {cause.message}" if cause is not None else None,
            sync=bool(s["responseRequired"]),
        )
        return OpenWireRequest((ack,))

    def _ignore(self, s: Structure) -> OpenWireRequest:
        return OpenWireRequest()

    def _broker_info(self, s: Structure) -> OpenWireRequest:
        """A network bridge says which broker it is (ActiveMQ's networkConnector, or
        dovecote's): its consumers carry their brokerPath, its sends are forwarded ones."""
        broker_id = s["brokerId"]
        if s["networkConnection"] and broker_id is not None:
            self.network_peer = str(broker_id["value"])
        return OpenWireRequest()

    def _send(self, s: Structure) -> OpenWireRequest:
        message = self.to_message(s)
        transaction = self._transaction(s["transactionId"])
        producer = s["producerId"]
        answered = bool(s["responseRequired"])
        if answered or producer is None or not self.windowed(self.producer_text(producer)):
            return OpenWireRequest((SendMessage(message, transaction, sync=answered),))
        # The size the client charged to its window (ActiveMQMessage.getSize()).
        size = (MINIMUM_MESSAGE_SIZE + len(s["content"] or b"")
                + len(s["marshalledProperties"] or b""))  # fmt: skip
        ack = Structure(t.PRODUCER_ACK, {"commandId": next(self._command_ids),
                                         "producerId": producer, "size": size})  # fmt: skip
        send = SendMessage(message, transaction, flow_control=False, sync=False)
        return OpenWireRequest((send,), producer_ack=ack, held_for=message)

    # -- messages --------------------------------------------------------------------------

    def to_message(self, s: Structure) -> Message:
        f = s.fields
        destination = destination_of(f.get("destination"))
        if destination is None:
            raise InvalidDestinationError("a message needs a destination")
        body_type = BODY_TYPES[s.type]
        content: bytes = f.get("content") or b""
        if f.get("compressed") and content:
            content = _decompress(content, body_type)
        body = content
        if body_type is BodyType.TEXT:
            body = decode_text_body(content).encode("utf-8") if content else b""
        producer = f.get("producerId")
        marshalled = f.get("marshalledProperties")
        properties = decode_map(marshalled) if marshalled else {}
        path = f.get("brokerPath")
        if path:
            ids = [str(b["value"]) for b in path if b is not None and b["value"]]
            properties[BROKER_PATH_PROPERTY] = ",".join(ids)
        reply_to = f.get("replyTo")
        original = f.get("originalDestination")
        return Message(
            message_id=message_id_text(f.get("messageId")),
            destination=destination,
            body=body,
            body_type=body_type,
            persistent=bool(f.get("persistent")),
            priority=4 if (priority := f.get("priority")) is None else priority,
            timestamp=f.get("timestamp") or 0,
            expiration=f.get("expiration") or 0,
            correlation_id=f.get("correlationId"),
            reply_to=destination_of(reply_to) if reply_to is not None else None,
            type=f.get("type"),
            group_id=f.get("groupID"),
            group_seq=f.get("groupSequence") or 0,
            producer_id=self.producer_text(producer) if producer is not None else None,
            connection_id=self.connection_text,
            user_id=f.get("userID"),
            redelivery_counter=f.get("redeliveryCounter") or 0,
            original_destination=destination_of(original) if original is not None else None,
            properties=properties,  # type: ignore[arg-type]
        )

    def from_message(self, m: Message, sequence: int = 0) -> Structure:
        content = message_content(m)
        message_id = message_id_structure(m.message_id, sequence)
        properties = m.properties
        path = properties.get(BROKER_PATH_PROPERTY) if properties else None
        if path is not None:
            properties = {k: v for k, v in properties.items() if k != BROKER_PATH_PROPERTY}
        fields: dict[str, Any] = {
            "commandId": 0,
            "producerId": message_id.fields.get("producerId"),
            "destination": destination_structure(m.destination),
            "originalDestination": destination_structure(m.original_destination),
            "messageId": message_id,
            "groupID": m.group_id,
            "groupSequence": m.group_seq,
            "correlationId": m.correlation_id,
            "persistent": m.persistent,
            "expiration": m.expiration,
            "priority": m.priority,
            "replyTo": destination_structure(m.reply_to),
            "timestamp": m.timestamp,
            "type": m.type,
            "content": content,
            "marshalledProperties": encode_map(dict(properties)) if properties else None,
            "redeliveryCounter": m.redelivery_counter,
            "userID": m.user_id,
        }
        if isinstance(path, str) and path:
            fields["brokerPath"] = [
                Structure(t.BROKER_ID, {"value": broker}) for broker in path.split(",")
            ]
        if m.data_structure is not None:
            fields["dataStructure"] = data_structure(
                m.data_structure, destination_structure, self.from_message
            )
        return Structure(MESSAGE_CODES[m.body_type], fields)

    # -- broker to client ------------------------------------------------------------------

    def on_dispatch(self, dispatch: MessageDispatch) -> Structure:
        consumer = self.consumer_structures.get(dispatch.consumer_id) or consumer_structure(
            dispatch.consumer_id
        )
        message = dispatch.message
        fields: dict[str, Any] = {"commandId": 0, "consumerId": consumer}
        if message is not None:
            fields |= {
                "destination": destination_structure(message.destination),
                "message": self.from_message(message, dispatch.sequence),
                "redeliveryCounter": message.redelivery_counter,
            }
        return Structure(t.MESSAGE_DISPATCH, fields)

    def error_response(self, error: DovecoteError, request: Structure | None) -> Structure:
        class_name = "javax.jms.JMSException"
        for kind, name in _EXCEPTIONS:
            if isinstance(error, kind):
                class_name = name
        throwable = Throwable(class_name, str(error) or type(error).__name__)
        if request is not None and request["responseRequired"]:
            return Structure(t.EXCEPTION_RESPONSE, {"commandId": next(self._command_ids),
                                                    "correlationId": request["commandId"],
                                                    "exception": throwable})  # fmt: skip
        return Structure(t.CONNECTION_ERROR, {"commandId": next(self._command_ids),
                                              "exception": throwable})  # fmt: skip

    def broker_info(self, broker_id: str) -> Structure:
        return Structure(t.BROKER_INFO, {
            "commandId": next(self._command_ids),
            "brokerId": Structure(t.BROKER_ID, {"value": broker_id}),
            "brokerName": self.broker_name,
        })  # fmt: skip


def _decompress(content: bytes, body_type: BodyType) -> bytes:
    try:
        if body_type is BodyType.BYTES:
            return zlib.decompress(content[4:])  # an uncompressed length comes first
        return zlib.decompress(content)
    except zlib.error as exc:
        raise RemoteProtocolError(f"compressed message body is not valid zlib: {exc}") from None


_HANDLERS: Final = {
    t.CONNECTION_INFO: OpenWireConverter._connection_info,
    t.SESSION_INFO: OpenWireConverter._session_info,
    t.CONSUMER_INFO: OpenWireConverter._consumer_info,
    t.PRODUCER_INFO: OpenWireConverter._producer_info,
    t.TRANSACTION_INFO: OpenWireConverter._transaction_info,
    t.DESTINATION_INFO: OpenWireConverter._destination_info,
    t.REMOVE_SUBSCRIPTION_INFO: OpenWireConverter._remove_subscription,
    t.KEEP_ALIVE_INFO: OpenWireConverter._keep_alive,
    t.SHUTDOWN_INFO: OpenWireConverter._shutdown,
    t.REMOVE_INFO: OpenWireConverter._remove,
    t.MESSAGE_PULL: OpenWireConverter._pull,
    t.MESSAGE_ACK: OpenWireConverter._ack,
    t.CONTROL_COMMAND: OpenWireConverter._ignore,
    t.FLUSH_COMMAND: OpenWireConverter._ignore,
    t.CONSUMER_CONTROL: OpenWireConverter._ignore,
    t.CONNECTION_CONTROL: OpenWireConverter._ignore,
    t.PRODUCER_ACK: OpenWireConverter._ignore,
    t.BROKER_INFO: OpenWireConverter._broker_info,
    t.BROKER_SUBSCRIPTION_INFO: OpenWireConverter._ignore,  # (for a duplex bridge back)
}
