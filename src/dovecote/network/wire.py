"""A bridge's OpenWire connection to a remote broker, on asyncio (the broker's loop), over
the sans-I/O codec: the WireFormatInfo exchange, then commands one way and commands that
wait for their Response, keep-alives as the InactivityMonitor expects, and the remote's
dispatches handed to a callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable
from typing import Final

from dovecote.core.errors import BrokerError
from dovecote.protocol.openwire import (
    NEED_DATA,
    FrameReader,
    Marshaller,
    Structure,
    broker_wire_format,
    negotiate,
)
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.codec import DEFAULT_MAX_FRAME_SIZE

log = logging.getLogger("dovecote.network")

MAX_INACTIVITY_MS: Final = 30_000
INITIAL_DELAY_MS: Final = 10_000
READ_CHUNK: Final = 256 * 1024


class RemoteError(BrokerError):
    """The remote broker refused a command, or the connection to it failed."""


class RemoteConnection:
    """One OpenWire connection to a broker. ``on_command`` gets what the remote sends that
    is not an answer (dispatches, its BrokerInfo, ...); ``closed`` is set when it ends."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        on_command: Callable[[Structure], None],
    ) -> None:  # fmt: skip
        self.reader = reader
        self.writer = writer
        self.on_command = on_command
        self.marshaller = Marshaller()
        self.frames = FrameReader(DEFAULT_MAX_FRAME_SIZE)
        self.our_format = broker_wire_format(MAX_INACTIVITY_MS, INITIAL_DELAY_MS,
                                             DEFAULT_MAX_FRAME_SIZE)  # fmt: skip
        self.remote_info: Structure | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Structure]] = {}
        self._negotiated = asyncio.get_running_loop().create_future()
        self._brokered = asyncio.get_running_loop().create_future()
        self._tasks: list[asyncio.Task[None]] = []
        self._last_write = self._last_read = time.monotonic()
        self.closed = asyncio.Event()
        self.error: str | None = None

    @classmethod
    async def open(
        cls, host: str, port: int, on_command: Callable[[Structure], None], timeout: float = 10.0
    ) -> RemoteConnection:
        """Connect and exchange WireFormatInfo and BrokerInfo (the remote's is in
        ``remote_info``); raises OSError or RemoteError."""
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        connection = cls(reader, writer, on_command)
        connection._write(connection.our_format)
        connection._tasks.append(asyncio.create_task(connection._read_loop()))
        try:
            await asyncio.wait_for(asyncio.shield(connection._brokered), timeout)
        except BaseException:
            await connection.close()
            raise
        return connection

    @property
    def remote_broker_id(self) -> str:
        info = self.remote_info
        broker_id = info["brokerId"] if info is not None else None
        return str(broker_id["value"]) if broker_id is not None else ""

    @property
    def remote_broker_name(self) -> str:
        info = self.remote_info
        return str(info["brokerName"] or "") if info is not None else ""

    def send(self, structure: Structure) -> None:
        """One way: nothing answers it (a failure comes back as a ConnectionError)."""
        structure.fields["commandId"] = next(self._ids)
        structure.fields["responseRequired"] = False
        self._write(structure)

    def request(self, structure: Structure) -> asyncio.Future[Structure]:
        """Send, asking for a Response; the future fails with RemoteError on an
        ExceptionResponse or when the connection ends first."""
        command_id = next(self._ids)
        structure.fields["commandId"] = command_id
        structure.fields["responseRequired"] = True
        future: asyncio.Future[Structure] = asyncio.get_running_loop().create_future()
        if self.closed.is_set():
            future.set_exception(RemoteError(self.error or "connection closed"))
            return future
        self._waiting[command_id] = future
        self._write(structure)
        return future

    async def drain(self) -> None:
        await self.writer.drain()

    async def close(self, error: str | None = None) -> None:
        if not self.closed.is_set():
            with contextlib.suppress(ConnectionError, RuntimeError):
                if error is None and self._negotiated.done():
                    self._write(Structure(t.SHUTDOWN_INFO, {"commandId": next(self._ids)}))
        self._fail(error or "connection closed")
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
            await self.writer.wait_closed()

    def _fail(self, error: str) -> None:
        if self.closed.is_set():
            return
        self.error = error
        self.closed.set()
        for future in (self._negotiated, self._brokered):
            if not future.done():
                future.set_exception(RemoteError(error))
                future.exception()  # retrieved: nobody may wait for it
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(RemoteError(error))

    def _write(self, structure: Structure) -> None:
        self.writer.write(self.marshaller.frame(structure))
        self._last_write = time.monotonic()

    async def _read_loop(self) -> None:
        try:
            while True:
                chunk = await self.reader.read(READ_CHUNK)
                if not chunk:
                    self._fail("the remote broker closed the connection")
                    return
                self._last_read = time.monotonic()
                self.frames.receive_data(chunk)
                while (frame := self.frames.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, bytes)
                    self._receive(self.marshaller.parse_body(frame))
        except asyncio.CancelledError:
            raise
        except (ConnectionError, OSError) as exc:
            self._fail(f"connection lost: {exc}")
        except Exception as exc:  # a frame we cannot read: the stream cannot be trusted
            log.debug("bridge connection failed", exc_info=True)
            self._fail(f"{type(exc).__name__}: {exc}")
        finally:
            self.writer.close()

    def _receive(self, s: Structure) -> None:
        kind = s.type
        if kind == t.WIRE_FORMAT_INFO:
            negotiated = negotiate(self.our_format, s)
            self.marshaller.version = negotiated.version
            self.marshaller.stack_traces = negotiated.stack_traces
            if not self._negotiated.done():
                self._negotiated.set_result(s)
                if negotiated.max_inactivity_ms > 0:
                    self._tasks.append(asyncio.create_task(
                        self._keep_alive(negotiated.max_inactivity_ms / 1000)))  # fmt: skip
        elif kind == t.BROKER_INFO:
            self.remote_info = s
            if not self._brokered.done():
                self._brokered.set_result(s)
        elif kind in (t.RESPONSE, t.EXCEPTION_RESPONSE):
            future = self._waiting.pop(s["correlationId"], None)
            if future is None or future.done():
                return
            if kind == t.EXCEPTION_RESPONSE:
                exception = s["exception"]
                text = exception.message if exception is not None else "refused"
                future.set_exception(RemoteError(text or "refused"))
            else:
                future.set_result(s)
        elif kind == t.KEEP_ALIVE_INFO:
            if s["responseRequired"]:
                self._write(Structure(t.KEEP_ALIVE_INFO, {"commandId": s["commandId"]}))
        elif kind == t.CONNECTION_ERROR:
            exception = s["exception"]
            text = exception.message if exception is not None else "connection error"
            log.debug("remote broker reports: %s", text)
            self.on_command(s)
        elif kind == t.SHUTDOWN_INFO:
            self._fail("the remote broker is shutting down")
        else:
            self.on_command(s)

    async def _keep_alive(self, interval: float) -> None:
        """Write a KeepAliveInfo after a third of the interval of silence; give up on a
        remote silent for the whole interval (the InactivityMonitor's rules)."""
        every = interval / 3
        while not self.closed.is_set():
            await asyncio.sleep(every)
            now = time.monotonic()
            if now - self._last_read > interval + INITIAL_DELAY_MS / 1000:
                self._fail(f"the remote broker was silent for {now - self._last_read:.0f} s")
                self.writer.close()
                return
            if now - self._last_write >= every * 0.9:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    self._write(Structure(t.KEEP_ALIVE_INFO, {"commandId": 0}))
