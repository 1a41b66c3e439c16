"""A raw OpenWire client for tests that say exactly which commands go on the wire: our own
marshaller on a blocking socket, no client library between the test and the broker (the
STOMP counterpart is rawstomp.py)."""

from __future__ import annotations

import contextlib
import socket
import time

from dovecote.protocol.openwire import FrameReader, Marshaller, Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.codec import MAGIC
from dovecote.protocol.openwire.primitives import JavaInt, encode_map

MARSHALLER = Marshaller()


def client_wfi(inactivity_ms: int = 0, initial_delay_ms: int = 0, tight: bool = False) -> Structure:
    """A client's WireFormatInfo (loose, no cache, unless ``tight``)."""
    options: dict[str, object] = {
        "TightEncodingEnabled": tight, "CacheEnabled": tight, "SizePrefixDisabled": False,
        "StackTraceEnabled": tight, "MaxInactivityDuration": inactivity_ms,
        "MaxInactivityDurationInitalDelay": initial_delay_ms,
        "CacheSize": JavaInt(1024 if tight else 0),
    }  # fmt: skip
    return Structure(t.WIRE_FORMAT_INFO, {"magic": MAGIC, "version": 12,
                                          "marshalledProperties": encode_map(options)})  # fmt: skip


def ids(conn: str) -> dict[str, Structure]:
    """The ids of one connection's first session, consumer and producer."""
    return {
        "connection": Structure(t.CONNECTION_ID, {"value": conn}),
        "session": Structure(t.SESSION_ID, {"connectionId": conn, "value": 1}),
        "consumer": Structure(t.CONSUMER_ID, {"connectionId": conn, "sessionId": 1, "value": 1}),
        "producer": Structure(t.PRODUCER_ID, {"connectionId": conn, "sessionId": 1, "value": 1}),
    }


def queue(name: str) -> Structure:
    return Structure(t.QUEUE, {"physicalName": name})


def message(my: dict[str, Structure], destination: Structure, seq: int, command_id: int,
            response: bool = True, persistent: bool = False) -> Structure:  # fmt: skip
    """A BytesMessage "m<seq>" from the connection's first producer."""
    message_id = Structure(t.MESSAGE_ID, {"producerId": my["producer"], "producerSequenceId": seq})
    return Structure(t.BYTES_MESSAGE, {
        "commandId": command_id, "responseRequired": response, "producerId": my["producer"],
        "destination": destination, "messageId": message_id, "persistent": persistent,
        "priority": 4, "content": f"m{seq}".encode(),
    })  # fmt: skip


def bad_ack(my: dict[str, Structure], command_id: int) -> Structure:
    """The frame found to break the broker: a MessageAck with ackType -80."""
    message_id = Structure(t.MESSAGE_ID, {"producerId": my["producer"], "producerSequenceId": 1})
    return Structure(t.MESSAGE_ACK, {
        "commandId": command_id, "responseRequired": True, "destination": queue("hostile"),
        "consumerId": my["consumer"], "ackType": -80, "lastMessageId": message_id,
        "messageCount": 1,
    })  # fmt: skip


def read_structures(sock: socket.socket, reader: FrameReader, until: float) -> list[Structure]:
    """Everything the broker sends until the monotonic time ``until`` or its close."""
    got: list[Structure] = []
    sock.settimeout(0.05)
    while time.monotonic() < until:
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        if not data:
            break
        reader.receive_data(data)
        while isinstance(frame := reader.next_frame(), bytes):
            got.append(MARSHALLER.parse_body(frame))
    return got


class Peer:
    """One OpenWire connection on a blocking socket: write structures, read them back."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = FrameReader()
        self.pending: list[Structure] = []

    def send(self, *structures: Structure) -> None:
        self.sock.sendall(b"".join(MARSHALLER.frame(s) for s in structures))

    def next(self, timeout: float = 10.0) -> Structure:
        """The next structure the broker sends (KeepAliveInfo skipped); EOFError when the
        broker closed the connection."""
        deadline = time.monotonic() + timeout
        while not self.pending:
            frame = self.reader.next_frame()
            if isinstance(frame, bytes):
                s = MARSHALLER.parse_body(frame)
                if s.type != t.KEEP_ALIVE_INFO:
                    self.pending.append(s)
                continue
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("the broker closed the connection")
            self.reader.receive_data(data)
        return self.pending.pop(0)

    def until(self, type_code: int, timeout: float = 10.0) -> Structure:
        deadline = time.monotonic() + timeout
        while True:
            s = self.next(max(0.01, deadline - time.monotonic()))
            if s.type == type_code:
                return s

    def connect(
        self,
        conn: str,
        user: str | None = None,
        password: str | None = None,
        client_id: str | None = None,
    ) -> tuple[dict[str, Structure], Structure]:
        """WireFormatInfo, then a ConnectionInfo (with credentials and a client id, if
        given): the ids and the broker's answer to the ConnectionInfo (a Response or an
        ExceptionResponse). The BrokerInfo comes only after our WireFormatInfo (as on
        ActiveMQ), and is read past."""
        assert self.next().type == t.WIRE_FORMAT_INFO
        my = ids(conn)
        fields: dict[str, object] = {
            "commandId": 1, "responseRequired": True, "connectionId": my["connection"],
        }  # fmt: skip
        if client_id is not None:
            fields["clientId"] = client_id
        if user is not None:
            fields["userName"] = user
        if password is not None:
            fields["password"] = password
        self.send(client_wfi(), Structure(t.CONNECTION_INFO, fields))
        # (ActiveMQ sends its BrokerInfo from another thread: before or after the answer.)
        answer = self.next()
        while answer.type not in (t.RESPONSE, t.EXCEPTION_RESPONSE):
            answer = self.next()
        return my, answer

    def handshake(
        self, conn: str, client_id: str | None = None, producer: bool = False
    ) -> dict[str, Structure]:
        """WireFormatInfo, then ConnectionInfo and SessionInfo (and, with ``producer``, the
        session's ProducerInfo, which ActiveMQ wants before a send), each answered. ActiveMQ
        wants a ``client_id`` too."""
        my, answer = self.connect(conn, client_id=client_id)
        assert answer.type == t.RESPONSE
        self.send(Structure(t.SESSION_INFO, {"commandId": 2, "responseRequired": True,
                                             "sessionId": my["session"]}))  # fmt: skip
        assert self.until(t.RESPONSE).type == t.RESPONSE
        if producer:
            self.send(Structure(t.PRODUCER_INFO, {"commandId": 3, "responseRequired": True,
                                                  "producerId": my["producer"]}))  # fmt: skip
            assert self.until(t.RESPONSE).type == t.RESPONSE
        return my

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
