"""One accepted connection as the protocol connections use it: what asyncio's
StreamReader/StreamWriter pair gave them (``read``, ``write``, ``drain``, ``close``), in one
object that is the transport's protocol itself.

Why not asyncio's streams: they are interpreted Python on every read (the protocol's
``data_received``, the reader's ``feed_data`` into a bytearray, ``read`` copying out of it
and waking the reader), and this module is compiled (build_native.py). A read here hands
over the bytes the socket gave, uncopied when one chunk is waiting (joined once when more
are), and ``read_chunks`` hands them over as they came, never copied. Flow control is the
same: reading pauses while more than ``limit`` bytes wait unread, and ``drain`` waits while
the transport's write buffer is over its high-water mark.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, cast

from dovecote.transport.tls import certificate_subject


class Stream:
    """The protocol of one connection (asyncio calls the ``connection_made`` ...
    ``resume_writing`` methods) and the stream its handler reads and writes."""

    def __init__(
        self,
        on_connected: Callable[[Stream], Coroutine[Any, Any, None]] | None,
        limit: int,
        tls: bool = False,
    ) -> None:
        self._on_connected = on_connected
        self.tls = tls
        """Made by a TLS listener: the transport is the TLS session's, connected once the
        handshake is over (without ``on_connected``: the listener's task is waiting)."""
        self._limit = limit
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._eof = False
        self._error: BaseException | None = None
        self._lost = False
        self._reading_paused = False
        self._writing_paused = False
        self._read_waiter: asyncio.Future[None] | None = None
        self._drain_waiters: deque[asyncio.Future[None]] = deque()
        self._closed: asyncio.Future[None] = self._loop.create_future()
        self.handshaken = False
        """Set by the protocol once the peer has introduced itself (a WireFormatInfo, a
        CONNECT): a listener at its limit may drop a connection that has not."""

    @property
    def transport(self) -> asyncio.Transport:
        assert self._transport is not None
        return self._transport

    # -- the protocol: called by the transport -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)
        if self._on_connected is not None:
            # The listener keeps track of the task (it adds it to its connections).
            self._loop.create_task(self._on_connected(self))

    def data_received(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered > self._limit and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake_reader()
        # Keep the transport open for writing: the handler closes it. (TLS has no half
        # close: its transport closes itself, and warns when asked not to.)
        return not self.tls

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._eof = True
        self._error = exc
        self._wake_reader()
        while self._drain_waiters:
            waiter = self._drain_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        if not self._closed.done():
            self._closed.set_result(None)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        while self._drain_waiters:
            waiter = self._drain_waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    def _wake_reader(self) -> None:
        waiter = self._read_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- reading ---------------------------------------------------------------------------

    async def read(self, n: int) -> bytes:
        """Up to ``n`` bytes of what has arrived, waiting for some; b"" at the end of the
        stream; the connection's error if it broke with nothing left to read."""
        if not await self._wait_for_data():
            return b""
        chunks = self._chunks
        data = chunks.popleft()
        if len(data) > n:
            chunks.appendleft(data[n:])
            data = data[:n]
        elif chunks and len(data) + len(chunks[0]) <= n:
            parts = [data]
            size = len(data)
            while chunks and size + len(chunks[0]) <= n:
                size += len(chunks[0])
                parts.append(chunks.popleft())
            data = b"".join(parts)
        self._taken(len(data))
        return data

    async def read_chunks(self, n: int) -> list[bytes]:
        """What has arrived, as the socket gave it: the first chunk whole, and those behind
        it while they come to at most ``n`` bytes together; [] at the end of the stream; the
        connection's error if it broke with nothing left to read. For a parser that appends
        what it is given to its own buffer: ``read`` would copy once more to split or join
        chunks (uvloop hands over up to 256 KiB at a time)."""
        if not await self._wait_for_data():
            return []
        chunks = self._chunks
        first = chunks.popleft()
        taken = [first]
        size = len(first)
        while chunks and size + len(chunks[0]) <= n:
            size += len(chunks[0])
            taken.append(chunks.popleft())
        self._taken(size)
        return taken

    async def _wait_for_data(self) -> bool:
        """Wait until something is there to read: False at the end of the stream."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self._eof:
                return False
            waiter = self._read_waiter = self._loop.create_future()
            try:
                await waiter
            finally:
                self._read_waiter = None
        return True

    def _taken(self, size: int) -> None:
        self._buffered -= size
        if self._reading_paused and self._buffered <= self._limit:
            self._reading_paused = False
            self.transport.resume_reading()

    # -- writing ---------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        self.transport.write(data)

    def writelines(self, parts: list[bytes]) -> None:
        """Write the parts in order, as one write would: uvloop hands them to the socket
        as they are (one writev), without first joining them into a copy."""
        self.transport.writelines(parts)

    async def drain(self) -> None:
        """Wait while the transport holds more than its high-water mark unsent; raises
        ConnectionResetError once the connection is lost."""
        if self.transport.is_closing():
            # Let the transport call connection_lost first (as asyncio's streams do).
            await asyncio.sleep(0)
        if self._lost:
            raise ConnectionResetError("Connection lost")
        if not self._writing_paused:
            return
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter
        if self._lost:
            raise ConnectionResetError("Connection lost")

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def close(self) -> None:
        self.transport.close()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    def get_extra_info(self, name: str) -> Any:
        return self.transport.get_extra_info(name)

    def certificate_subject(self) -> str | None:
        """The subject of the client certificate the TLS handshake verified, as RFC 4514
        text ("CN=alice,O=dovecote"); None without TLS or without a client certificate."""
        if not self.tls:
            return None
        return certificate_subject(self.transport.get_extra_info("peercert"))
