"""One replication connection over asyncio streams: frames in and out, heartbeats while
idle, and a peer silent for the timeout taken as gone (PROTOCOL.md)."""

from __future__ import annotations

import asyncio
import contextlib
import time

from dovecote.store.replicated.stream import (
    HEADER,
    Heartbeat,
    Message,
    ProtocolError,
    decode,
    encode,
    frame_length,
)


class PeerGone(Exception):
    """The peer closed the connection or was silent past the timeout."""


class Link:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout_s: float
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.timeout_s = timeout_s
        self._last_sent = time.monotonic()
        self._beats: asyncio.Task[None] | None = None

    @property
    def peer(self) -> str:
        address = self.writer.get_extra_info("peername")
        return f"{address[0]}:{address[1]}" if address else "?"

    def start_heartbeats(self) -> None:
        self._beats = asyncio.create_task(self._heartbeats())

    async def _heartbeats(self) -> None:
        interval = self.timeout_s / 3
        while True:
            idle = time.monotonic() - self._last_sent
            if idle >= interval:
                await self.send(Heartbeat())
                idle = 0.0
            await asyncio.sleep(interval - idle)

    async def read(self) -> Message:
        """The next message other than a heartbeat."""
        while True:
            try:
                header = await asyncio.wait_for(
                    self.reader.readexactly(HEADER.size), self.timeout_s
                )
                length, kind = frame_length(header)
                body = await asyncio.wait_for(self.reader.readexactly(length), self.timeout_s)
            except TimeoutError:
                raise PeerGone(f"nothing heard for {self.timeout_s:g}s") from None
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                raise PeerGone(f"connection closed ({type(exc).__name__})") from None
            message = decode(kind, body)
            if not isinstance(message, Heartbeat):
                return message

    async def send(self, message: Message) -> None:
        await self.send_frame(encode(message))

    async def send_frame(self, frame: bytes) -> None:
        self._last_sent = time.monotonic()
        try:
            self.writer.write(frame)
            await self.writer.drain()
        except ConnectionError as exc:
            raise PeerGone(f"connection closed ({type(exc).__name__})") from None

    async def close(self) -> None:
        if self._beats is not None:
            self._beats.cancel()
            with contextlib.suppress(asyncio.CancelledError, PeerGone):
                await self._beats
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


__all__ = ["Link", "PeerGone", "ProtocolError"]
