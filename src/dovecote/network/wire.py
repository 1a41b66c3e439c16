"""A bridge's OpenWire side towards a remote broker, on asyncio (the broker's loop), over the
sans-I/O codec: commands one way and commands that wait for their Response, keep-alives as
the InactivityMonitor expects, and what the remote sends that is not an answer handed to a
callback.

``Channel`` is that conversation over any transport; ``RemoteConnection`` is a channel on a
socket of its own (a connector's bridge: it connects, exchanges WireFormatInfo and waits
for the remote's BrokerInfo); a duplex bridge's channel is a connection the remote opened
to our listener (transport/openwire.py hands it the remote's answers).
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
ANSWERS: Final = frozenset((t.RESPONSE, t.EXCEPTION_RESPONSE, t.MESSAGE_DISPATCH))
"""What a remote broker sends a duplex bridge on a connection it opened to us: the answers
to the bridge's requests and the dispatches to its advisory consumer..."""
BRIDGED_ADVISORIES: Final = ("ActiveMQ.Advisory.Consumer.", "ActiveMQ.Advisory.TempQueue",
                             "ActiveMQ.Advisory.TempTopic")  # fmt: skip
"""...and, from ActiveMQ, the advisories it forwards to the bridge as messages (its duplex
bridge takes the bridge's advisory consumer for demand on its advisory topics)."""


def is_bridged_advisory(s: Structure) -> bool:
    """A message on a duplex connection that is meant for the bridge, not the broker."""
    destination = s["destination"]
    if s.type not in t.MESSAGE_TYPES or destination is None or destination.type != t.TOPIC:
        return False
    return str(destination["physicalName"] or "").startswith(BRIDGED_ADVISORIES)


class RemoteError(BrokerError):
    """The remote broker refused a command, or the connection to it failed."""


class Channel:
    """Commands to a remote broker and their answers, over a transport given as ``write``
    (one frame) and ``close_transport``. ``receive`` takes what the remote sent."""

    def __init__(
        self,
        write: Callable[[Structure], None],
        close_transport: Callable[[], None],
        on_command: Callable[[Structure], None],
        remote_info: Structure | None = None,
        peer_address: str = "",
    ) -> None:
        self._write_frame = write
        self._close_transport = close_transport
        self.on_command = on_command
        self.remote_info = remote_info
        self.peer_address = peer_address
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Structure]] = {}
        self.closed = asyncio.Event()
        self.error: str | None = None
        self._last_write = time.monotonic()
        self.reports_errors = False
        """Whether the remote's ConnectionErrors reach ``on_command`` (a connection of our
        own: each command's refusal is told in order; an accepted duplex one's go to the
        broker)."""

    @property
    def version(self) -> int:
        """The OpenWire version spoken (an accepted connection's: taken as the latest)."""
        return 12

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
        ExceptionResponse or when the channel ends first."""
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
        return None

    async def close(self, error: str | None = None) -> None:
        self.fail(error or "connection closed")
        self._close_transport()

    def fail(self, error: str) -> None:
        """The channel is over: what waits for an answer gets ``error``."""
        if self.closed.is_set():
            return
        self.error = error
        self.closed.set()
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(RemoteError(error))

    def _write(self, structure: Structure) -> None:
        self._write_frame(structure)
        self._last_write = time.monotonic()

    def receive(self, s: Structure) -> None:
        kind = s.type
        if kind in (t.RESPONSE, t.EXCEPTION_RESPONSE):
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
        elif kind == t.SHUTDOWN_INFO:
            self.fail("the remote broker is shutting down")
        elif kind in t.MESSAGE_TYPES and is_bridged_advisory(s):
            # On a duplex connection the remote's bridge forwards its advisories as messages:
            # answer, then take it as a dispatch to the advisory consumer (nothing to ack).
            if s["responseRequired"]:
                self._write(Structure(t.RESPONSE, {"commandId": 0,
                                                   "correlationId": s["commandId"]}))  # fmt: skip
            self.on_command(Structure(t.MESSAGE_DISPATCH, {
                "destination": s["destination"], "message": s, "forwarded": True}))  # fmt: skip
        else:
            if kind == t.CONNECTION_ERROR:
                exception = s["exception"]
                log.debug("remote broker reports: %s", exception.message if exception else "")
            self.on_command(s)


class RemoteConnection(Channel):
    """A channel on a connection of its own to a broker."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        on_command: Callable[[Structure], None],
    ) -> None:  # fmt: skip
        self.reader = reader
        self.writer = writer
        self.marshaller = Marshaller()
        peer = writer.get_extra_info("peername")
        super().__init__(self._frame_out, writer.close, on_command,
                         peer_address=f"{peer[0]}:{peer[1]}" if peer else "")  # fmt: skip
        self.frames = FrameReader(DEFAULT_MAX_FRAME_SIZE)
        self.our_format = broker_wire_format(MAX_INACTIVITY_MS, INITIAL_DELAY_MS,
                                             DEFAULT_MAX_FRAME_SIZE)  # fmt: skip
        loop = asyncio.get_running_loop()
        self._negotiated: asyncio.Future[Structure] = loop.create_future()
        self._brokered: asyncio.Future[Structure] = loop.create_future()
        self._tasks: list[asyncio.Task[None]] = []
        self._last_read = time.monotonic()
        self.reports_errors = True

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
    def version(self) -> int:
        return self.marshaller.version

    def _frame_out(self, structure: Structure) -> None:
        self.writer.write(self.marshaller.frame(structure))

    async def drain(self) -> None:
        await self.writer.drain()

    async def close(self, error: str | None = None) -> None:
        if not self.closed.is_set():
            with contextlib.suppress(ConnectionError, RuntimeError):
                if error is None and self._negotiated.done():
                    self._write(Structure(t.SHUTDOWN_INFO, {"commandId": next(self._ids)}))
        self.fail(error or "connection closed")
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError, asyncio.CancelledError):
            await self.writer.wait_closed()

    def fail(self, error: str) -> None:
        if self.closed.is_set():
            return
        for future in (self._negotiated, self._brokered):
            if not future.done():
                future.set_exception(RemoteError(error))
                future.exception()  # retrieved: nobody may wait for it
        super().fail(error)

    async def _read_loop(self) -> None:
        try:
            while True:
                chunk = await self.reader.read(READ_CHUNK)
                if not chunk:
                    self.fail("the remote broker closed the connection")
                    return
                self._last_read = time.monotonic()
                self.frames.receive_data(chunk)
                while (frame := self.frames.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, bytes)
                    self._receive_own(self.marshaller.parse_body(frame))
        except asyncio.CancelledError:
            raise
        except (ConnectionError, OSError) as exc:
            self.fail(f"connection lost: {exc}")
        except Exception as exc:  # a frame we cannot read: the stream cannot be trusted
            log.debug("bridge connection failed", exc_info=True)
            self.fail(f"{type(exc).__name__}: {exc}")
        finally:
            self.writer.close()

    def _receive_own(self, s: Structure) -> None:
        """What only a connection of our own gets: the handshake."""
        if s.type == t.WIRE_FORMAT_INFO:
            negotiated = negotiate(self.our_format, s)
            self.marshaller.version = negotiated.version
            self.marshaller.stack_traces = negotiated.stack_traces
            if not self._negotiated.done():
                self._negotiated.set_result(s)
                if negotiated.max_inactivity_ms > 0:
                    self._tasks.append(asyncio.create_task(
                        self._keep_alive(negotiated.max_inactivity_ms / 1000)))  # fmt: skip
        elif s.type == t.BROKER_INFO:
            self.remote_info = s
            if not self._brokered.done():
                self._brokered.set_result(s)
        else:
            self.receive(s)

    async def _keep_alive(self, interval: float) -> None:
        """Write a KeepAliveInfo after a third of the interval of silence; give up on a
        remote silent for the whole interval (the InactivityMonitor's rules)."""
        every = interval / 3
        while not self.closed.is_set():
            await asyncio.sleep(every)
            now = time.monotonic()
            if now - self._last_read > interval + INITIAL_DELAY_MS / 1000:
                self.fail(f"the remote broker was silent for {now - self._last_read:.0f} s")
                self.writer.close()
                return
            if now - self._last_write >= every * 0.9:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    self._write(Structure(t.KEEP_ALIVE_INFO, {"commandId": 0}))
