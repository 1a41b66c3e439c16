"""The client's transport chain (compatibility P3) over a blocking socket: wire-format negotiation,
one writer at a time, request/response correlation by command id, keep-alives and the
inactivity check. A reader thread hands every other command to the connection.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from dovecote.client.options import TransportOptions, WireFormatOptions
from dovecote.client.threads import start_daemon

if TYPE_CHECKING:
    from dovecote.client.tls import TlsChannel
from dovecote.core.errors import RemoteProtocolError
from dovecote.protocol.openwire import (
    NEED_DATA,
    FrameReader,
    Marshaller,
    Structure,
    Throwable,
    negotiate,
)
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.primitives import JavaInt, decode_map, encode_map

log = logging.getLogger("dovecote.client")
trace = logging.getLogger("dovecote.client.trace")
"""Every command sent and received, at DEBUG, on a connection with the trace option."""


HOLD_BYTES = 256 * 1024
"""Frames held back for one write (``oneway(..., flush=False)``) are written once this many
bytes wait, or with the next frame that is not held."""
MAX_READ = 4 << 20
"""The most one read asks the socket for (what a large frame still lacks, up to this)."""


class JMSError(Exception):
    """An error the broker reported, with the Java exception class it named."""

    def __init__(self, class_name: str, message: str | None) -> None:
        super().__init__(f"{class_name}: {message}")
        self.class_name = class_name
        self.message = message or ""


class TransactionRolledBackException(JMSError):
    """javax.jms.TransactionRolledBackException: a commit rolled back instead (a failover
    interrupted the transaction)."""

    def __init__(self, message: str) -> None:
        super().__init__("javax.jms.TransactionRolledBackException", message)


class TransportClosedError(ConnectionError):
    pass


def configure_socket(sock: socket.socket, options: TransportOptions) -> None:
    """TcpTransport.initialiseSocket's settings: socket.* first, then its own properties."""
    names = {"keepAlive": socket.SO_KEEPALIVE, "reuseAddress": socket.SO_REUSEADDR,
             "receiveBufferSize": socket.SO_RCVBUF, "sendBufferSize": socket.SO_SNDBUF,
             "oOBInline": socket.SO_OOBINLINE}  # fmt: skip
    for name, value in options.socket.items():
        if name in names:
            sock.setsockopt(socket.SOL_SOCKET, names[name], int(value))
        elif name == "tcpNoDelay":
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(value))
        elif name == "trafficClass":
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, int(value))
    if options.socketBufferSize > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, options.socketBufferSize)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, options.socketBufferSize)
    so_timeout = options.socket.get("soTimeout", options.soTimeout)
    if so_timeout > 0:
        # SO_RCVTIMEO, not settimeout(): Java's soTimeout bounds reads only, never a send.
        seconds, ms = divmod(so_timeout, 1000)
        sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", seconds, ms * 1000)
        )
    if options.keepAlive is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, int(options.keepAlive))
    if options.soLinger > -1:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, options.soLinger))
    elif options.soLinger == -1:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 0, 0))
    if options.tcpNoDelay is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(options.tcpNoDelay))


def client_wire_format(options: WireFormatOptions) -> Structure:
    properties: dict[str, object] = {
        # Tight encoding and the marshalling cache are not implemented here: offered off,
        # which negotiation (both sides must want one) always allows.
        "TightEncodingEnabled": False, "CacheEnabled": False, "SizePrefixDisabled": False,
        "StackTraceEnabled": options.stackTraceEnabled,
        "TcpNoDelayEnabled": options.tcpNoDelayEnabled,
        "MaxInactivityDuration": options.maxInactivityDuration,
        "MaxInactivityDurationInitalDelay": options.maxInactivityDurationInitalDelay,
        "CacheSize": JavaInt(0), "MaxFrameSize": options.maxFrameSize,
        "ProviderName": options.providerName, "PlatformDetails": options.platformDetails,
    }  # fmt: skip
    fields = {"magic": b"ActiveMQ", "version": 12, "marshalledProperties": encode_map(properties)}
    return Structure(t.WIRE_FORMAT_INFO, fields)


class ClientTransport:
    def __init__(
        self,
        host: str,
        port: int,
        wire: WireFormatOptions,
        transport: TransportOptions,
        on_command: Callable[[Structure], None],
        on_failure: Callable[[Exception], None],
    ) -> None:
        self.host, self.port = host, port
        self.host_port = f"{host}:{port}"
        self.wire = wire
        self.transport = transport
        self.on_command = on_command
        self.on_failure = on_failure
        self.marshaller = Marshaller()
        self.frames = FrameReader(wire.maxFrameSize)
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[Structure]] = {}
        self._write_lock = threading.Lock()
        self._held: list[bytes] = []
        """Frames sent with flush=False, not written yet (under the write lock)."""
        self._held_bytes = 0
        self._negotiated = threading.Event()
        self.peer_wire_format: dict[str, object] = {}
        """The broker's WireFormatInfo properties (a dovecote broker's PlatformDetails say
        so: the stream client uses its extensions only with one)."""
        self._closed = threading.Event()
        self._close_lock = threading.Lock()
        self._failing = threading.Lock()
        self.failed: Exception | None = None
        """What failed the transport, if something did."""
        self._sock: socket.socket | None = None
        self._tls: TlsChannel | None = None
        self._last_read = self._last_write = time.monotonic()
        self.round_trips = 0
        """Requests that waited for a response (tests count them)."""
        self.sent: Counter[int] = Counter()
        """Commands sent, by OpenWire type (tests count acks on the wire)."""
        self.writes = 0
        """Writes to the socket (tests count them: frames held back share one)."""

    def connect(self) -> None:
        options = self.transport
        # connectionTimeout 0: no limit, as java.net.Socket.connect(address, 0).
        timeout = options.connectionTimeout / 1000 if options.connectionTimeout > 0 else None
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        self._sock = sock
        configure_socket(sock, options)
        if options.tls:
            from dovecote.client.tls import TlsChannel  # (it imports the connection module)

            self._tls = TlsChannel(sock, options, self.host)
            try:
                self._tls.handshake()  # under the connect's timeout
            except BaseException:
                sock.close()
                raise
        sock.settimeout(None)
        self._ours = client_wire_format(self.wire)
        self._send(self._ours)
        start_daemon(self._read_forever, "dovecote-client-reader")
        negotiated = self._negotiated.wait(options.negotiateTimeout / 1000 or None)
        if self._closed.is_set():
            # Failed while negotiating (a reset: e.g. the listener of a broker being killed
            # accepted us, then died): said at once, not after negotiateTimeout.
            raise TransportClosedError(f"the connection failed while negotiating: {self.failed}")
        if not negotiated:
            self.close()
            raise TransportClosedError(
                f"wire format negotiation timed out: no WireFormatInfo from the broker within "
                f"negotiateTimeout={options.negotiateTimeout} ms"
            )

    # -- sending ---------------------------------------------------------------------------

    def _send(self, structure: Structure, flush: bool = True) -> None:
        if self._sock is None or self._closed.is_set():
            with self._failing:  # a failure under way has told the connection
                raise TransportClosedError("the connection is closed")
        self.sent[structure.type] += 1
        if self.transport.trace:
            trace.debug("SEND %s: %s", self.host_port, structure)
        data = self.marshaller.frame(structure)
        try:
            with self._write_lock:
                if self._held or not flush:
                    # Held frames go first, in the order they were sent, in one write.
                    self._held.append(data)
                    self._held_bytes += len(data)
                    if not flush and self._held_bytes < HOLD_BYTES:
                        return
                    data = self._take_held()
                self._write(data)
        except OSError as exc:
            raise self._failed_sending(exc) from exc

    def flush(self) -> None:
        """Write the frames held back, if any (a sender about to wait for the broker)."""
        try:
            with self._write_lock:
                if self._held:
                    self._write(self._take_held())
        except OSError as exc:
            raise self._failed_sending(exc) from exc

    def _take_held(self) -> bytes:
        data = b"".join(self._held)
        self._held.clear()
        self._held_bytes = 0
        return data

    def _write(self, data: bytes) -> None:
        (self._tls or self._sock).sendall(data)  # type: ignore[union-attr]
        self._last_write = time.monotonic()
        self.writes += 1

    def _failed_sending(self, exc: OSError) -> TransportClosedError:
        # The broker went away under a send (reset, broken pipe) before the reader saw it:
        # fail the transport here, so that a failover connection is reconnecting by the time
        # the caller retries, and the caller sees the same error either way (the frames held
        # back went with the connection: their transaction is in doubt).
        self._fail(exc)
        return TransportClosedError(f"the connection failed while sending: {exc}")

    def oneway(self, structure: Structure, flush: bool = True) -> None:
        """Send a command nobody waits for. ``flush=False`` may hold it back, to be written
        with the frames after it (sends inside a transaction: one write for many of them,
        instead of a system call each); any later frame sent with flush, a request above
        all, writes it first."""
        structure.fields["commandId"] = next(self._ids)
        structure.fields["responseRequired"] = False
        self._send(structure, flush)

    def request(self, structure: Structure, timeout: float | None = None) -> Structure:
        command_id = next(self._ids)
        structure.fields["commandId"] = command_id
        structure.fields["responseRequired"] = True
        future: Future[Structure] = Future()
        self._pending[command_id] = future
        self.round_trips += 1
        try:
            self._send(structure)
            response = future.result(timeout)
        finally:
            self._pending.pop(command_id, None)
        if response.type == t.EXCEPTION_RESPONSE:
            error: Throwable | None = response["exception"]
            raise JMSError(error.class_name if error else "javax.jms.JMSException",
                           error.message if error else None)  # fmt: skip
        return response

    # -- receiving -------------------------------------------------------------------------

    def _read_forever(self) -> None:
        assert self._sock is not None
        size = max(self.transport.ioBufferSize, 8192)
        try:
            while not self._closed.is_set():
                try:
                    # The rest of a large frame in one call where the socket has it (a
                    # Spark read's 4 MiB blocks came 8 KiB a call).
                    wanted = max(size, min(self.frames.wanted, MAX_READ))
                    data = self._tls.recv(wanted) if self._tls else self._sock.recv(wanted)
                except (BlockingIOError, TimeoutError):
                    continue  # soTimeout passed: as in Java, a read timeout is no error
                if data is None:
                    continue  # TLS's own records (a session ticket), no OpenWire bytes
                if not data:
                    raise TransportClosedError("the broker closed the connection")
                self._last_read = time.monotonic()
                self.frames.receive_data(data)
                while (frame := self.frames.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, bytes)
                    command = self.marshaller.parse_body(frame)
                    if self.transport.trace:
                        trace.debug("RECV %s: %s", self.host_port, command)
                    self._handle(command)
        except Exception as exc:
            # Whatever stops the reader fails the transport: a reader that died quietly
            # would leave every request waiting for the inactivity check (30 s).
            if not self._closed.is_set():
                if not isinstance(exc, OSError | RemoteProtocolError):
                    log.warning("client reader stopped by %r; failing the connection", exc)
                self._fail(exc)

    def _handle(self, s: Structure) -> None:
        match s.type:
            case t.WIRE_FORMAT_INFO:
                negotiated = negotiate(self._ours, s)
                self.peer_wire_format = negotiated.client
                self.marshaller.stack_traces = negotiated.stack_traces
                self.marshaller.version = negotiated.version
                if self._sock is not None:
                    # As WireFormatNegotiator: Nagle as both sides' TcpNoDelayEnabled say.
                    theirs = decode_map(s["marshalledProperties"] or b"\xff\xff\xff\xff")
                    both = self.wire.tcpNoDelayEnabled and theirs.get("TcpNoDelayEnabled") is True
                    self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(both))
                if negotiated.max_inactivity_ms > 0 and self.transport.useInactivityMonitor:
                    inactivity_ms = negotiated.max_inactivity_ms
                    start_daemon(self._keep_alive, "dovecote-keep-alive", inactivity_ms)
                self._negotiated.set()
            case t.RESPONSE | t.EXCEPTION_RESPONSE | t.DATA_RESPONSE | t.INTEGER_RESPONSE:
                future = self._pending.get(s["correlationId"])
                if future is not None and not future.done():
                    future.set_result(s)
            case t.KEEP_ALIVE_INFO:
                if s["responseRequired"]:
                    self.oneway(Structure(t.KEEP_ALIVE_INFO))
            case t.CONNECTION_ERROR:
                error = s["exception"]
                self.on_failure(JMSError(error.class_name if error else "ConnectionError",
                                         error.message if error else None))  # fmt: skip
            case t.BROKER_INFO:
                self.broker_info = s
            case _:
                self.on_command(s)

    def _keep_alive(self, interval_ms: int) -> None:
        interval = interval_ms / 1000
        while not self._closed.wait(interval / 3):
            if time.monotonic() - self._last_write >= interval / 3:
                try:
                    self.oneway(Structure(t.KEEP_ALIVE_INFO))
                except OSError:
                    return
            if time.monotonic() - self._last_read > interval:
                self._fail(
                    TransportClosedError("no frame from the broker within the inactivity time")
                )
                return

    def _fail(self, exc: Exception) -> None:
        # Under a lock: a thread that finds the transport failed by another returns once
        # the connection has been told (a failover connection is reconnecting by then).
        with self._failing:
            self.failed = self.failed or exc
            if not self.close():
                return  # closed already: by the user, or failed by the reader or a sender
            self.on_failure(exc)  # first, so a failover connection is reconnecting before...
        for future in list(self._pending.values()):  # ...the waiting requests retry
            if not future.done():
                future.set_exception(TransportClosedError(str(exc)))

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> bool:
        """Close the socket; True when this call closed it (False: it was closed already)."""
        with self._close_lock:
            if self._closed.is_set():
                return False
            self._closed.set()
        self._negotiated.set()  # a connect() waiting for the broker's WireFormatInfo: no more
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        return True
