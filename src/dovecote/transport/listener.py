"""What every listener shares: bind, accept, keep track of the connection tasks, refuse
beyond ``max_connections``, and stop them all on shutdown. A protocol listener implements
``serve`` for one accepted connection and ``refuse`` for one over the limit."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from dovecote.core.commands import SendMessage
from dovecote.transport.peerlog import PEER_LOG
from dovecote.transport.stream import Stream

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


class Listener:
    name = "listener"

    def __init__(self, host: str, port: int, max_connections: int) -> None:
        self.host = host
        self.requested_port = port
        self.max_connections = max_connections
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], Stream] = {}
        """Each connection's task and stream, oldest first."""

    def _new_stream(self) -> Stream:
        # Reading pauses beyond two chunks unread (asyncio's streams: twice their limit).
        return Stream(self._accept, 2 * READ_CHUNK)

    @property
    def port(self) -> int:
        assert self._server is not None
        # Any: uvloop's server gives a list where typeshed says tuple (and compiled, this
        # module checks the hint).
        sockets = cast(Any, self._server).sockets
        return int(sockets[0].getsockname()[1])

    async def start(self) -> None:
        # Any: a Stream is a protocol by its methods, not by inheriting asyncio's Protocol
        # (a compiled class cannot).
        factory = cast(Any, self._new_stream)
        self._server = await asyncio.get_running_loop().create_server(
            factory, self.host, self.requested_port, backlog=BACKLOG
        )
        log.info("%s listening on %s:%d", self.name, self.host, self.port)

    async def stop(self) -> None:
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

    def _evict_silent(self) -> bool:
        """At the limit, close the oldest connection that has not introduced itself, so that
        sockets held open without a word cannot lock clients out until their handshake
        times out (beyond ActiveMQ, which refuses the newcomer)."""
        for stream in self._connections.values():
            if not stream.handshaken and not stream.is_closing():
                PEER_LOG.peer(
                    log, None, "%s: %d connections, the maximum; closing one from %s that "
                    "has not finished its handshake", self.name, self.max_connections,
                    stream.get_extra_info("peername"), level=logging.INFO,
                )  # fmt: skip
                stream.close()  # its task ends as its read sees the close
                return True
        return False

    async def serve(self, stream: Stream) -> None:
        raise NotImplementedError

    def refuse(self, stream: Stream) -> None:
        """Say why before closing, where the protocol can."""


class BatchedWriter:
    """Frames written in one turn of the event loop leave in one socket write: a dispatch of
    many messages costs one syscall, not one per message. ``drain`` (and ``close``) send
    what is queued first, so nothing is reordered or lost."""

    __slots__ = ("_draining", "_out", "_scheduled", "last_write", "on_written", "stream")

    def __init__(self, stream: Stream, on_written: Callable[[], None] | None = None) -> None:
        self.stream = stream
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
            asyncio.get_running_loop().call_soon(self.flush)

    def write_parts(self, parts: Iterable[bytes]) -> None:
        """``write`` each, in order (written with the rest at the flush)."""
        self._out.extend(parts)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

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
