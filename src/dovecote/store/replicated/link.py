"""One replication connection over asyncio streams: frames in and out, heartbeats while
idle, and a peer silent for the timeout taken as gone (PROTOCOL.md)."""

from __future__ import annotations

import asyncio
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


async def cancel(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` and wait until it has ended, whatever it raised; a cancellation of
    the caller itself still comes through (awaiting the task under a suppress of
    CancelledError would swallow it)."""
    if task is None:
        return
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # (retrieved: it ended on its own while being cancelled)


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
                # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation
                # that comes as the read completes, and the task then runs on.
                async with asyncio.timeout(self.timeout_s):
                    header = await self.reader.readexactly(HEADER.size)
                length, kind = frame_length(header)
                async with asyncio.timeout(self.timeout_s):
                    body = await self.reader.readexactly(length)
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

    def abort(self) -> None:
        """Drop the connection now, what is still buffered with it: a close would wait for
        a peer that no longer reads (a stopped or wedged one) to take it."""
        self.writer.transport.abort()

    async def close(self) -> None:
        await cancel(self._beats)
        self.abort()


__all__ = ["Link", "PeerGone", "ProtocolError"]
