"""STOMP frames to core commands and back: one converter per connection, no I/O.

This plays the part of ActiveMQ's ProtocolConverter: ``on_frame`` turns a client frame into a
``StompRequest`` (core commands for the broker, then a frame to send back once they
succeeded); ``on_dispatch`` turns a broker dispatch into a MESSAGE frame; ``error_frame``
renders a failure. What STOMP leaves to the server follows ActiveMQ 5.17 (compatibility P1):

- SEND without ``content-length`` is a text message, with it a bytes message.
- ``persistent`` defaults to false; ``expires`` is an absolute time in ms; unknown headers
  become string properties.
- ``ack:auto`` settles each message as it is dispatched; ``client`` acks are cumulative per
  subscription; ``client-individual`` acks one message; NACK is a poison ack, so the message
  goes to the dead-letter queue.
- Default prefetch: 1000 on queues, 100 for durable and 32766 for other topic subscriptions
  unless ``activemq.prefetchSize`` says otherwise.
- ``/temp-queue/x`` names a temporary queue private to the connection; other connections
  see it (in ``reply-to``) as ``/remote-temp-queue/<name>``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from dovecote.core.commands import (
    DURABLE_TOPIC_PREFETCH,
    QUEUE_BROWSER_PREFETCH,
    QUEUE_PREFETCH,
    TOPIC_PREFETCH,
    AckType,
    Command,
    ConnectionInfo,
    ConsumerInfo,
    MessageAck,
    MessageDispatch,
    ProducerInfo,
    RemoveInfo,
    RemoveSubscriptionInfo,
    SendMessage,
    SessionInfo,
    TransactionInfo,
    TransactionType,
)
from dovecote.core.destinations import Destination
from dovecote.core.errors import (
    DovecoteError,
    RemoteProtocolError,
    UnknownCommandError,
    UnknownSubscriptionError,
)
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId, SessionId, TransactionId
from dovecote.core.message import BodyType, Message, PropertyValue
from dovecote.protocol.stomp.frames import Frame, encode_frame, escape_header
from dovecote.protocol.stomp.headers import (
    bool_header,
    int_header,
    parse_heartbeat,
    required,
    stomp_selector,
)
from dovecote.protocol.stomp.message_frames import (
    has_temporary,
    message_headers,
    message_tail,
    stomp_body,
    tail_cache,
)
from dovecote.protocol.stomp.names import StompNames

SUPPORTED_VERSIONS: Final = ("1.0", "1.1", "1.2")
SERVER_NAME: Final = "dovecote/0.1.0"
BROWSE_DONE_ID: Final = "BrowseDone"

# SEND headers that are STOMP or JMS headers, never message properties.
_RESERVED: Final = frozenset(
    {
        "destination", "content-length", "content-type", "receipt", "transaction",
        "persistent", "priority", "expires", "correlation-id", "type", "reply-to",
        "JMSXGroupID", "JMSXGroupSeq", "message-id", "timestamp", "redelivered",
        "subscription", "ack", "transformation",
    }
)  # fmt: skip
_ACK_MODES: Final = ("auto", "client", "client-individual")


@dataclass(slots=True, unsafe_hash=True, init=False)
class StompRequest:
    """What one client frame asks for: commands to run in order, then a frame to answer
    with (a RECEIPT or CONNECTED), and whether to close afterwards. One per frame: built
    as core/records.py says, and as immutable."""

    commands: tuple[Command, ...] = ()
    reply: Frame | None = None
    connect: ConnectionInfo | None = None
    close: bool = False

    def __init__(
        self,
        commands: tuple[Command, ...] = (),
        reply: Frame | None = None,
        connect: ConnectionInfo | None = None,
        close: bool = False,
    ) -> None:
        self.commands = commands
        self.reply = reply
        self.connect = connect
        self.close = close


@dataclass(slots=True)
class _Subscription:
    id: str
    consumer_id: ConsumerId
    destination: Destination
    ack_mode: str
    # Message ids dispatched and not yet acked, in dispatch order.
    unacked: dict[str, None] = field(default_factory=dict)
    head: bytes = b""
    """A MESSAGE frame's first line and subscription header, as this connection writes it."""


@dataclass(frozen=True, slots=True)
class HeartBeat:
    """Negotiated intervals in ms (0 = none): we send every ``send_ms``; the client must
    send something every ``receive_ms``."""

    send_ms: int = 0
    receive_ms: int = 0


class StompConverter:
    def __init__(
        self,
        connection_id: ConnectionId,
        server_heartbeat: tuple[int, int] = (10_000, 10_000),
    ) -> None:
        self.connection_id = connection_id
        self.session_id = SessionId(connection_id, 1)
        self.producer_id = ProducerId(self.session_id, 1)
        # Every SEND names them: their texts once, not per message.
        self._producer_text = str(self.producer_id)
        self._connection_text = str(connection_id)
        self.version = "1.0"
        self.connected = False
        self.heartbeat = HeartBeat()
        self._server_heartbeat = server_heartbeat
        self._message_seq = itertools.count(1)
        self._consumer_seq = itertools.count(1)
        self._subs: dict[str, _Subscription] = {}
        self._subs_by_consumer: dict[ConsumerId, _Subscription] = {}
        self.names = StompNames(connection_id)
        self._last_destination: Destination | None = None
        """The destination of the last message dispatched, and its header value as written
        (named and escaped); forgotten when the names change (a new temporary one)."""
        self._last_destination_text = ""
        self._transactions: set[str] = set()
        self._client_id = ""

    # -- client frames ---------------------------------------------------------------------

    def on_frame(self, frame: Frame) -> StompRequest:
        command = frame.command
        if not self.connected:
            if command in ("CONNECT", "STOMP"):
                return self._connect(frame)
            raise RemoteProtocolError(f"expected CONNECT or STOMP first, got {command}")
        handler = _HANDLERS.get(command)
        if handler is None:
            raise RemoteProtocolError(f"{command} is not a frame a client may send")
        request = handler(self, frame)
        receipt = frame.get("receipt")
        if receipt is not None and request.reply is None:
            reply = Frame("RECEIPT", (("receipt-id", receipt),))
            return StompRequest(request.commands, reply, request.connect, request.close)
        return request

    def _connect(self, frame: Frame) -> StompRequest:
        accepted = (frame.get("accept-version") or "1.0").split(",")
        common = [v for v in SUPPORTED_VERSIONS if v in (a.strip() for a in accepted)]
        if not common:
            raise RemoteProtocolError(
                f"no common STOMP version: client accepts {','.join(accepted)}, "
                f"server supports {','.join(SUPPORTED_VERSIONS)}"
            )
        self.version = common[-1]
        headers = [("version", self.version), ("session", str(self.connection_id))]
        headers.append(("server", SERVER_NAME))
        if self.version != "1.0":
            cx, cy = parse_heartbeat(frame.get("heart-beat") or "0,0")
            sx, sy = self._server_heartbeat
            self.heartbeat = HeartBeat(
                send_ms=max(sx, cy) if sx and cy else 0,
                receive_ms=max(cx, sy) if cx and sy else 0,
            )
            headers.append(("heart-beat", f"{self.heartbeat.send_ms},{self.heartbeat.receive_ms}"))
        self.connected = True
        # Without a client-id header the connection's own id is its client id, as on
        # ActiveMQ: a durable subscription can be made (and named again) on it.
        self._client_id = frame.get("client-id") or self.connection_id.value
        info = ConnectionInfo(
            self.connection_id,
            client_id=self._client_id,
            user_name=frame.get("login"),
            password=frame.get("passcode"),
        )
        return StompRequest(
            commands=(SessionInfo(self.session_id), ProducerInfo(self.producer_id)),
            reply=Frame("CONNECTED", tuple(headers)),
            connect=info,
        )

    def _send(self, frame: Frame) -> StompRequest:
        headers = frame.header_dict()
        if "destination" not in headers:
            raise RemoteProtocolError("SEND frame needs a 'destination' header")
        destination, commands = self._destination(headers["destination"])
        properties: dict[str, PropertyValue] = {
            k: v for k, v in headers.items() if k not in _RESERVED
        }
        reply_to = None
        if "reply-to" in headers:
            reply_to, more = self._destination(headers["reply-to"])
            commands.extend(more)
        transaction = None
        if "transaction" in headers:
            transaction = self._transaction_id(headers["transaction"])
        message = Message(
            message_id=f"{self._producer_text}:{next(self._message_seq)}",
            destination=destination,
            body=frame.body,
            body_type=BodyType.BYTES if "content-length" in headers else BodyType.TEXT,
            persistent=headers.get("persistent", "").lower() == "true",
            priority=int_header(headers, "priority", 4, 0, 9),
            timestamp=int(time.time() * 1000),
            expiration=int_header(headers, "expires", 0, 0, None),
            correlation_id=headers.get("correlation-id"),
            reply_to=reply_to,
            type=headers.get("type"),
            group_id=headers.get("JMSXGroupID"),
            group_seq=int_header(headers, "JMSXGroupSeq", 0, -1, None),
            producer_id=self._producer_text,
            connection_id=self._connection_text,
            properties=properties,
        )
        commands.append(SendMessage(message, transaction, sync="receipt" in headers))
        return StompRequest(tuple(commands))

    def _subscribe(self, frame: Frame) -> StompRequest:
        destination, commands = self._destination(required(frame, "destination"))
        sub_id = frame.get("id")
        if sub_id is None:
            if self.version != "1.0":
                raise RemoteProtocolError("SUBSCRIBE needs an id header")
            sub_id = frame.get("destination") or ""
        if sub_id in self._subs:
            raise RemoteProtocolError(f"subscription id {sub_id!r} is already in use")
        ack_mode = frame.get("ack") or "auto"
        if ack_mode not in _ACK_MODES:
            raise RemoteProtocolError(f"unknown ack mode {ack_mode!r}")
        durable_name = frame.get("activemq.subscriptionName") or frame.get(
            "durable-subscription-name"
        )
        if durable_name is not None and not destination.is_topic:
            durable_name = None  # ActiveMQ ignores it on queues
        browser = (frame.get("browser") or "").lower() == "true"
        if browser:
            default_prefetch = QUEUE_BROWSER_PREFETCH
        elif destination.is_queue:
            default_prefetch = QUEUE_PREFETCH
        else:
            default_prefetch = DURABLE_TOPIC_PREFETCH if durable_name else TOPIC_PREFETCH
        consumer_id = ConsumerId(self.session_id, next(self._consumer_seq))
        info = ConsumerInfo(
            consumer_id=consumer_id,
            destination=destination,
            prefetch_size=int_header(
                frame.header_dict(), "activemq.prefetchSize", default_prefetch, 0, None
            ),
            selector=stomp_selector(frame.get("selector")),
            no_local=bool_header(frame, "activemq.noLocal"),
            exclusive=bool_header(frame, "activemq.exclusive"),
            subscription_name=durable_name,
            browser=browser,
            priority=int_header(frame.header_dict(), "activemq.priority", 0, 0, 127),
            dispatch_async=bool_header(frame, "activemq.dispatchAsync", True),
            maximum_pending_message_limit=int_header(
                frame.header_dict(), "activemq.maximumPendingMessageLimit", 0, -1, None
            ),
            auto_ack=ack_mode == "auto",
        )
        sub = _Subscription(sub_id, consumer_id, destination, ack_mode)
        self._subs[sub_id] = sub
        self._subs_by_consumer[consumer_id] = sub
        commands.append(info)
        return StompRequest(tuple(commands))

    def _unsubscribe(self, frame: Frame) -> StompRequest:
        sub_id = frame.get("id")
        if sub_id is None and self.version == "1.0":
            sub_id = frame.get("destination")
        if sub_id is None:
            raise RemoteProtocolError("UNSUBSCRIBE needs an id header")
        durable_name = frame.get("activemq.subscriptionName") or frame.get(
            "durable-subscription-name"
        )
        if durable_name is not None:
            # As ActiveMQ: naming a durable subscription removes it, and only it (refused
            # while a consumer is on it); the subscription id need not be open here.
            return StompRequest((RemoveSubscriptionInfo(self._client_id, durable_name),))
        sub = self._subs.pop(sub_id, None)
        if sub is None:
            raise UnknownSubscriptionError(f"no subscription with id {sub_id!r}")
        del self._subs_by_consumer[sub.consumer_id]
        return StompRequest((RemoveInfo(sub.consumer_id),))

    def _ack(self, frame: Frame) -> StompRequest:
        return self._settle(frame, nack=False)

    def _nack(self, frame: Frame) -> StompRequest:
        if self.version == "1.0":
            raise RemoteProtocolError("NACK is not part of STOMP 1.0")
        return self._settle(frame, nack=True)

    def _settle(self, frame: Frame, nack: bool) -> StompRequest:
        name = "id" if self.version == "1.2" else "message-id"
        message_id = required(frame, name)
        sub = self._owner_of(message_id, frame.get("subscription"))
        verb = "NACK" if nack else "ACK"
        if sub is None or sub.ack_mode == "auto":
            raise UnknownSubscriptionError(
                f"unexpected {verb} for message {message_id!r}: no subscription awaits it"
            )
        if nack:
            ack_type = AckType.POISON
            del sub.unacked[message_id]
        elif sub.ack_mode == "client":
            ack_type = AckType.STANDARD
            for acked in list(_through(sub.unacked, message_id)):
                del sub.unacked[acked]
        else:
            ack_type = AckType.INDIVIDUAL
            del sub.unacked[message_id]
        ack = MessageAck(
            consumer_id=sub.consumer_id,
            ack_type=ack_type,
            last_message_id=message_id,
            transaction_id=self._transaction(frame),
            sync=frame.get("receipt") is not None,
        )
        return StompRequest((ack,))

    def _owner_of(self, message_id: str, sub_id: str | None) -> _Subscription | None:
        if sub_id is not None:
            sub = self._subs.get(sub_id)
            return sub if sub is not None and message_id in sub.unacked else None
        for sub in self._subs.values():
            if message_id in sub.unacked:
                return sub
        return None

    def _begin(self, frame: Frame) -> StompRequest:
        name = required(frame, "transaction")
        if name in self._transactions:
            raise RemoteProtocolError(f"transaction {name!r} is already open")
        self._transactions.add(name)
        return StompRequest((self._tx_info(name, TransactionType.BEGIN),))

    def _commit(self, frame: Frame) -> StompRequest:
        return self._end(frame, TransactionType.COMMIT)

    def _abort(self, frame: Frame) -> StompRequest:
        return self._end(frame, TransactionType.ROLLBACK)

    def _end(self, frame: Frame, kind: TransactionType) -> StompRequest:
        name = required(frame, "transaction")
        if name not in self._transactions:
            raise RemoteProtocolError(f"transaction {name!r} was not begun")
        self._transactions.discard(name)
        return StompRequest((self._tx_info(name, kind),))

    def _tx_info(self, name: str, kind: TransactionType) -> TransactionInfo:
        return TransactionInfo(self.connection_id, TransactionId(self.connection_id, name), kind)

    def _transaction(self, frame: Frame) -> TransactionId | None:
        name = frame.get("transaction")
        return None if name is None else self._transaction_id(name)

    def _transaction_id(self, name: str) -> TransactionId:
        if name not in self._transactions:
            raise RemoteProtocolError(f"transaction {name!r} was not begun")
        return TransactionId(self.connection_id, name)

    def _disconnect(self, frame: Frame) -> StompRequest:
        return StompRequest((RemoveInfo(self.connection_id),), close=True)

    # -- destinations ----------------------------------------------------------------------

    def _destination(self, text: str) -> tuple[Destination, list[Command]]:
        destination, commands = self.names.destination(text)
        if commands:
            # A temporary destination named for the first time: the cached name of the
            # last dispatch's destination may now read differently.
            self._last_destination = None
        return destination, commands

    def stomp_destination(self, destination: Destination) -> str:
        return self.names.stomp_name(destination)

    # -- broker to client ------------------------------------------------------------------

    def on_dispatch(self, dispatch: MessageDispatch) -> Frame | None:
        """The MESSAGE frame for a dispatch; its first header is the subscription id."""
        sub = self._subs_by_consumer.get(dispatch.consumer_id)
        if sub is None:
            return None  # the client unsubscribed while this was on its way
        message = dispatch.message
        if message is None:
            headers = (
                ("subscription", sub.id),
                ("message-id", BROWSE_DONE_ID),
                ("destination", self.stomp_destination(sub.destination)),
                ("browser", "end"),
            )
            return Frame("MESSAGE", headers)
        if sub.ack_mode != "auto":
            sub.unacked[message.message_id] = None
        acked = sub.ack_mode != "auto"
        lines = message_headers(sub.id, message, self.version, self.stomp_destination, acked)
        return Frame("MESSAGE", tuple(lines), stomp_body(message))

    def encode_dispatch(self, dispatch: MessageDispatch) -> bytes | None:
        """``on_dispatch`` as bytes (``dispatch_parts`` joined)."""
        parts = self.dispatch_parts(dispatch)
        return None if parts is None else b"".join(parts)

    def dispatch_parts(self, dispatch: MessageDispatch) -> tuple[bytes, ...] | None:
        """``on_dispatch`` as bytes to write one after another, written straight from the
        message for STOMP 1.1 and 1.2 (no Frame, no header tuples, the body not copied:
        this runs once per message delivered). A topic message goes to many subscribers,
        whose MESSAGE frames differ only in the first header (the subscription id): the
        rest is encoded once and kept for the next subscriber of the same message (shared
        by the connections; the event loop is single-threaded)."""
        message = dispatch.message
        if message is None or self.version == "1.0":
            # Browse ends, and STOMP 1.0's unescaped headers: the general path.
            frame = self.on_dispatch(dispatch)
            return None if frame is None else (encode_frame(frame, self.version),)
        sub = self._subs_by_consumer.get(dispatch.consumer_id)
        if sub is None:
            return None  # the client unsubscribed while this was on its way
        head = sub.head
        if not head:
            head = sub.head = self._head(sub.id)
        if sub.ack_mode != "auto":
            sub.unacked[message.message_id] = None
            if self.version == "1.2":  # what to ack, on the subscriptions that must
                head += b"ack:" + self._escaped(message.message_id) + b"\n"
        destination = message.destination
        if destination is not self._last_destination:
            # Most messages go where the one before went (the same producer's destination,
            # the same object): its header value is named and escaped once for them.
            name = self.stomp_destination(destination)
            self._last_destination_text = escape_header(name, self.version)
            self._last_destination = destination
        text = self._last_destination_text
        if not destination.is_topic:
            return (head, *message_tail(message, self.version, self.stomp_destination, text))
        tail = tail_cache.get(message, self.version)
        if tail is None:
            tail = message_tail(message, self.version, self.stomp_destination, text)
            if not has_temporary(message):
                # (Temporary destinations are named per connection: nothing to share.)
                tail_cache.put(message, self.version, tail)
        return (head, *tail)

    def _head(self, sub_id: str) -> bytes:
        return b"MESSAGE\nsubscription:" + self._escaped(sub_id) + b"\n"

    def _escaped(self, value: str) -> bytes:
        return (value if self.version == "1.0" else escape_header(value, self.version)).encode()

    def refused(self, command: Command) -> None:
        """The broker refused a command this converter made: forget what it recorded for
        it (a subscription the broker never made), so the connection can go on."""
        if isinstance(command, ConsumerInfo):
            sub = self._subs_by_consumer.pop(command.consumer_id, None)
            if sub is not None:
                self._subs.pop(sub.id, None)

    def error_frame(self, error: DovecoteError, frame: Frame | None) -> Frame:
        text = str(error) or type(error).__name__
        headers: list[tuple[str, str]] = [("message", text.splitlines()[0][:256])]
        receipt = frame.get("receipt") if frame is not None else None
        if receipt is None and isinstance(error, UnknownCommandError):
            receipt = error.receipt
        if receipt is not None:
            headers.append(("receipt-id", receipt))
        if isinstance(error, RemoteProtocolError) and "no common STOMP version" in text:
            headers.append(("version", ",".join(SUPPORTED_VERSIONS)))
        headers.append(("content-type", "text/plain"))
        return Frame("ERROR", tuple(headers), text.encode())


_HANDLERS: Final = {
    "SEND": StompConverter._send,
    "SUBSCRIBE": StompConverter._subscribe,
    "UNSUBSCRIBE": StompConverter._unsubscribe,
    "ACK": StompConverter._ack,
    "NACK": StompConverter._nack,
    "BEGIN": StompConverter._begin,
    "COMMIT": StompConverter._commit,
    "ABORT": StompConverter._abort,
    "DISCONNECT": StompConverter._disconnect,
}


def _through(ordered: dict[str, None], last: str) -> Iterator[str]:
    for key in ordered:
        yield key
        if key == last:
            return
