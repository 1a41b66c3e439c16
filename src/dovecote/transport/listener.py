"""What every listener shares: bind, accept, keep track of the connection tasks, refuse
beyond ``max_connections``, and stop them all on shutdown. A protocol listener implements
``serve`` for one accepted connection and ``refuse`` for one over the limit.

A TLS listener accepts the sockets itself and hands each to the loop's TLS
(``connect_accepted_socket``) in a task of its own, so that a connection in its handshake
is one of the listener's connections from the start: counted, closed at shutdown, the
first to go when the limit is reached, dropped after the handshake timeout. (Starting TLS
on a connection the loop accepted would race with its first read: uvloop reads as soon as
the protocol is connected, and the ClientHello would reach the protocol, not the TLS.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from dovecote.core.commands import SendMessage
from dovecote.transport.peerlog import PEER_LOG
from dovecote.transport.stream import Stream
from dovecote.transport.tls import handshake_failure, handshake_failure_level

if TYPE_CHECKING:
    from dovecote.broker.broker import Broker

log = logging.getLogger("dovecote.transport")

READ_CHUNK = 64 * 1024
WRITTEN_MARK = 64 * 1024
"""Bytes a connection may still hold unsent and be called written (asyncio's high-water mark)."""
BACKLOG = 5000
"""Connections the kernel completes before they are accepted (TcpTransportServer's backlog;
Linux caps it at net.core.somaxconn). At asyncio's 100, a burst of connects overflowed it
and each connect beyond waited out a SYN retransmit (1 s and more)."""
ACCEPT_RETRY_S = 1.0
"""A TLS listener that cannot accept (out of file descriptors) tries again after this long,
as asyncio's own servers do."""


class Listener:
    name = "listener"

    def __init__(
        self, host: str, port: int, max_connections: int,
        tls: ssl.SSLContext | None = None, handshake_timeout_ms: int = 0,
    ) -> None:  # fmt: skip
        self.host = host
        self.requested_port = port
        self.max_connections = max_connections
        self.tls = tls
        if tls is not None:
            self.name = f"{self.name} over TLS"
        self.handshake_timeout_ms = handshake_timeout_ms
        """A TLS handshake not over in this long is abandoned (0: asyncio's 60 s)."""
        self._server: asyncio.Server | None = None
        self._socket: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connections: dict[asyncio.Task[None], Stream] = {}
        """Each connection's task and stream, oldest first."""
        self._handshaking: dict[asyncio.Task[None], TlsHandshake] = {}
        """The tasks of the connections still in their TLS handshake."""

    def _new_stream(self) -> Stream:
        # Reading pauses beyond two chunks unread (asyncio's streams: twice their limit).
        return Stream(self._accept, 2 * READ_CHUNK)

    @property
    def port(self) -> int:
        if self._socket is not None:
            return int(self._socket.getsockname()[1])
        assert self._server is not None
        # Any: uvloop's server gives a list where typeshed says tuple (and compiled, this
        # module checks the hint).
        sockets = cast(Any, self._server).sockets
        return int(sockets[0].getsockname()[1])

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.tls is not None:
            family = address_family(self.host) or socket.AF_INET  # a name: its IPv4 address
            sock = bound_socket(family, self.host, self.requested_port)
            self._socket = sock
            self._accepting = loop.create_task(self._accept_tls(sock))
        else:
            # Any: a Stream is a protocol by its methods, not by inheriting asyncio's
            # Protocol (a compiled class cannot).
            factory = cast(Any, self._new_stream)
            address = address_family(self.host)
            if address is None:  # a name: the loop binds every address it resolves to
                self._server = await loop.create_server(
                    factory, self.host, self.requested_port, backlog=BACKLOG
                )
            else:
                # An address (the usual case) is bound here: the loop would encode it with
                # the idna codec and resolve it in its thread pool, both kept for good.
                sock = bound_socket(address, self.host, self.requested_port)
                self._server = await loop.create_server(factory, sock=sock, backlog=BACKLOG)
        log.info("%s listening on %s:%d", self.name, self.host, self.port)

    async def stop(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        if self._socket is not None:
            self._socket.close()
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, stream: Stream) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._connections) >= self.max_connections and not self._evict_silent():
            PEER_LOG.peer(
                log, None, "%s: %d connections, the maximum; refusing one from %s",
                self.name, self.max_connections, stream.get_extra_info("peername"),
            )  # fmt: skip
            self.refuse(stream)
            stream.close()
            return
        self._connections[task] = stream
        try:
            await self.serve(stream)
        finally:
            self._connections.pop(task, None)

    async def _accept_tls(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, address = await loop.sock_accept(sock)
            except OSError as exc:  # out of file descriptors, most likely
                PEER_LOG.peer(log, None, "%s: cannot accept a connection: %s", self.name, exc)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            peer = _address_text(address)
            if len(self._connections) >= self.max_connections and not self._evict_silent():
                PEER_LOG.peer(
                    log, None, "%s: %d connections, the maximum; refusing one from %s",
                    self.name, self.max_connections, peer,
                )  # fmt: skip
                conn.close()  # before the handshake: nothing can be said to it
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stream = Stream(None, 2 * READ_CHUNK, tls=True)
            handshake = TlsHandshake(conn, peer)
            task = loop.create_task(self._serve_tls(stream, handshake))
            task.add_done_callback(self._forget)
            self._connections[task] = stream
            self._handshaking[task] = handshake

    async def _serve_tls(self, stream: Stream, handshake: TlsHandshake) -> None:
        """Handshake on an accepted socket, then serve it."""
        handshake.started = True
        task = asyncio.current_task()
        assert task is not None and self.tls is not None
        timeout_ms = self.handshake_timeout_ms
        try:
            # From here the loop closes the socket when the handshake fails or is cancelled.
            await asyncio.get_running_loop().connect_accepted_socket(
                cast(Any, lambda: stream), handshake.conn, ssl=self.tls,
                ssl_handshake_timeout=timeout_ms / 1000 if timeout_ms > 0 else None,
            )  # fmt: skip
        except OSError as exc:  # ssl.SSLError, a timeout, a reset: the client's doing
            PEER_LOG.peer(
                log, None, "%s: TLS handshake with %s failed: %s; closing it",
                self.name, handshake.peer, handshake_failure(exc), exc=exc,
                level=handshake_failure_level(exc),
            )  # fmt: skip
            return
        except Exception as exc:  # the loop's TLS should raise nothing else
            PEER_LOG.bug(log, None, f"in a TLS handshake with {handshake.peer}", exc)
            return
        finally:
            self._handshaking.pop(task, None)
        await self.serve(stream)

    def _forget(self, task: asyncio.Task[None]) -> None:
        """A TLS connection's task is over: cancelled before it began, its socket is still
        the listener's to close."""
        self._connections.pop(task, None)
        handshake = self._handshaking.pop(task, None)
        if handshake is not None and not handshake.started:
            handshake.conn.close()

    def _evict_silent(self) -> bool:
        """At the limit, close the oldest connection that has not introduced itself, so that
        sockets held open without a word cannot lock clients out until their handshake
        times out (beyond ActiveMQ, which refuses the newcomer). One still in its TLS
        handshake has not either."""
        for task, stream in self._connections.items():
            if stream.handshaken:
                continue
            handshake = self._handshaking.get(task)
            if handshake is not None:
                if task.cancelling():
                    continue
                address: Any = handshake.peer
            elif stream.is_closing():
                continue
            else:
                address = stream.get_extra_info("peername")
            PEER_LOG.peer(
                log, None, "%s: %d connections, the maximum; closing one from %s that "
                "has not finished its handshake", self.name, self.max_connections,
                address, level=logging.INFO,
            )  # fmt: skip
            if handshake is not None:
                task.cancel()  # the socket is closed by the loop, or by _forget
            else:
                stream.close()  # its task ends as its read sees the close
            return True
        return False

    async def serve(self, stream: Stream) -> None:
        raise NotImplementedError

    def refuse(self, stream: Stream) -> None:
        """Say why before closing, where the protocol can."""


class TlsHandshake:
    """An accepted TLS connection until its handshake is over."""

    __slots__ = ("conn", "peer", "started")

    def __init__(self, conn: socket.socket, peer: str) -> None:
        self.conn = conn
        self.peer = peer
        self.started = False
        """Whether its task has begun (and handed the socket to the loop)."""


def address_family(host: str) -> int | None:
    """AF_INET or AF_INET6 for an IP address, None for a host name (or "": every one)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return int(family)
    return None


def bound_socket(family: int, host: str, port: int) -> socket.socket:
    """A listening, non-blocking socket on ``host``:``port``, bound as the loop's
    ``create_server`` binds one (SO_REUSEADDR; an IPv6 one for IPv6 only), failing with the
    loop's words ("error while attempting to bind on address ...")."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        address: tuple[str, int] | tuple[str, int, int, int] = (host, port)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            address = (host, port, 0, 0)  # as the loop's resolver gives it (and says it)
        try:
            sock.bind(address)
        except OSError as exc:
            reason = (exc.strerror or str(exc)).lower()
            raise OSError(
                exc.errno, f"error while attempting to bind on address {address!r}: {reason}"
            ) from None
        sock.listen(BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _address_text(address: Any) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


class BatchedWriter:
    """Frames written in one turn of the event loop leave in one socket write: a dispatch of
    many messages costs one syscall, not one per message. ``drain`` (and ``close``) send
    what is queued first, so nothing is reordered or lost."""

    __slots__ = ("_draining", "_loop", "_out", "_scheduled", "last_write", "on_written", "stream")

    def __init__(self, stream: Stream, on_written: Callable[[], None] | None = None) -> None:
        self.stream = stream
        # Kept: asyncio.get_running_loop() is a getpid() system call each time.
        self._loop = asyncio.get_running_loop()
        self._out: list[bytes] = []
        self._scheduled = False
        self.last_write = time.monotonic()
        self.on_written = on_written
        """Called once what was written has been handed to the socket, or nearly all of it
        (the transport's buffer below WRITTEN_MARK): for flow control toward slow readers."""
        self._draining: asyncio.Task[None] | None = None

    def is_closing(self) -> bool:
        return self.stream.is_closing()

    def write(self, data: bytes) -> None:
        # (A closing writer is found at the flush, which drops what was queued: checking on
        # every write cost two calls per message delivered.)
        self._out.append(data)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def write_parts(self, parts: Iterable[bytes]) -> None:
        """``write`` each, in order (written with the rest at the flush)."""
        self._out.extend(parts)
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if self._out:
            if not self.stream.is_closing():
                self.stream.writelines(self._out)
                self.last_write = time.monotonic()
                if self.on_written is not None:
                    self._notify_written()
            self._out.clear()

    def _notify_written(self) -> None:
        assert self.on_written is not None
        if self.stream.transport.get_write_buffer_size() <= WRITTEN_MARK:
            self.on_written()
        elif self._draining is None:
            self._draining = asyncio.ensure_future(self._drain_then_notify())

    async def _drain_then_notify(self) -> None:
        try:
            await self.stream.drain()
        except ConnectionError:
            return  # the peer is gone: nothing more will be written
        finally:
            self._draining = None
        if self.on_written is not None and not self.stream.is_closing():
            self._notify_written()

    async def drain(self) -> None:
        self.flush()
        await self.stream.drain()

    def close(self) -> None:
        self.flush()
        self.stream.close()


MAX_BATCHED_SENDS = 256
"""Sends (or acks) gathered before they are routed (or settled); they also are at the end of
each chunk read."""


class SendBatch:
    """Sends nobody waits for, gathered while the frames of one read are handled and then
    routed together (one dispatch per destination; one store write for persistent ones).
    Each is admitted on its own first (flow control); none is charged to a usage until the
    batch is routed, so ``fits`` tells when the batch must go before the next one."""

    __slots__ = ("persistent", "sends", "size")

    def __init__(self) -> None:
        self.sends: list[SendMessage] = []
        self.size = 0
        self.persistent = False

    def fits(self, broker: Broker, send: SendMessage, under_way: int = 0) -> bool:
        """True when ``send`` can be admitted with this batch (and ``under_way`` bytes of
        earlier ones) not yet charged."""
        return broker.has_headroom(send.message, under_way + self.size + send.message.size)

    def add(self, send: SendMessage) -> bool:
        """Add an admitted send; True when the batch is full."""
        self.sends.append(send)
        self.size += send.message.size
        self.persistent = self.persistent or send.message.persistent
        return len(self.sends) >= MAX_BATCHED_SENDS

    def take(self) -> tuple[list[SendMessage], int, bool]:
        """The sends, their bytes and whether any is persistent; the batch starts again."""
        taken = self.sends, self.size, self.persistent
        self.sends, self.size, self.persistent = [], 0, False
        return taken
