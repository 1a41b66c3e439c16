"""The STOMP listener: a connection stream (transport/stream.py) around the sans-I/O parser
and converter.

Each connection runs one task that reads bytes, parses frames and awaits the broker for
each in turn, so a RECEIPT is written only after the broker finished the frame's commands
(a persistent send: after the store has it). The exception is a persistent SEND without a
receipt: it is admitted (flow control) in turn, but its store write and routing run in a task
while the next frames are read, so that a producer's stream of such sends shares fsyncs;
any other frame first waits for those tasks, in order. Dispatches arrive through a
synchronous sink and are written straight to the socket buffer. Heart-beats (compatibility P1): a
ticker writes an EOL when we owe one, and a watchdog drops a client that has been silent
longer than the negotiated interval times the grace factor; one that sends no CONNECT within
``connect_attempt_timeout_ms`` is dropped (ActiveMQ's connectAttemptTimeout). Any protocol or
broker error ends the connection with an ERROR frame and at most one log line (within the
limits of transport/peerlog.py); other connections never notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from typing import Final

from dovecote.broker.broker import Broker
from dovecote.broker.connection import Peer
from dovecote.core.commands import ConsumerInfo, MessageDispatch, SendMessage
from dovecote.core.errors import DovecoteError, ProtocolError, peer_error
from dovecote.protocol.stomp import HEARTBEAT, NEED_DATA, Frame, FrameParser, encode_frame
from dovecote.protocol.stomp.converter import StompConverter, StompRequest
from dovecote.transport.listener import READ_CHUNK, BatchedWriter, SendBatch
from dovecote.transport.peerlog import PEER_LOG, ConnectionBudget, peer_address
from dovecote.transport.settings import StompListenerSettings
from dovecote.transport.stream import Stream

REFUSABLE_COMMANDS = frozenset(
    {"SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK", "BEGIN", "COMMIT", "ABORT"}
)
"""Frames whose refusal (an ERROR) leaves the connection open, as in ActiveMQ."""

log = logging.getLogger("dovecote.stomp")
_EARLY: Final = (SendMessage, ConsumerInfo)
"""Commands answered as soon as the broker has taken them: a send once stored, before its
dispatch; a consumer once attached, before its first dispatch (as ActiveMQ answers)."""

MAX_PIPELINED_BATCHES = 64
"""Batches of persistent sends whose store writes may be under way at once..."""
MAX_PIPELINED_BYTES = 4 * 1024 * 1024
"""... and their bytes (ActiveMQ's journal writes up to 4 MB at a time). What is under way
while a group is synced makes the next group: large messages come one per read, so 16
batches (the earlier bound) held too few large messages and the disk's syncs came too
often (docs/performance.md)."""


def refusal() -> bytes:
    """What a STOMP client beyond the listener's limit is told before it is closed."""
    return encode_frame(Frame("ERROR", (("message", "too many connections"),)), "1.0")


class StompConnection:
    def __init__(
        self,
        broker: Broker,
        settings: StompListenerSettings,
        stream: Stream,
        initial: bytes = b"",
    ) -> None:
        self.initial = initial
        self.broker = broker
        self.settings = settings
        self.stream = stream
        self.out = BatchedWriter(stream, on_written=self._written)
        self.connection_id = broker.ids.next_connection_id()
        self.converter = StompConverter(self.connection_id, settings.heartbeat_ms)
        self.parser = FrameParser(
            max_frame_size=settings.max_frame_size,
            max_header_size=settings.max_header_size,
            max_headers=settings.max_headers,
        )
        self.peer = stream.get_extra_info("peername")
        self._registered = False
        self._last_read = time.monotonic()
        self._timers: list[asyncio.Task[None]] = []
        self._pipelined: deque[tuple[asyncio.Task[None], int]] = deque()
        self._pipelined_bytes = 0
        self._batch = SendBatch()
        self._receipt: Frame | None = None
        """The receipt of the send being run, until the broker has stored it."""
        self.budget = ConnectionBudget()
        self._connect_timer: asyncio.TimerHandle | None = None

    async def run(self) -> None:
        log.debug("STOMP connection %s from %s", self.connection_id, self.peer)
        timeout_ms = self.settings.connect_attempt_timeout_ms
        if timeout_ms > 0:
            self._connect_timer = asyncio.get_running_loop().call_later(
                timeout_ms / 1000, self._no_connect
            )
        # Nothing a connection raises leaves it: an exception let out of a compiled
        # coroutine was chained to every later one (each logged traceback grew).
        try:
            await self._read_loop()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:
            PEER_LOG.bug(log, self.budget, f"on STOMP connection {self.connection_id}", exc)
        try:
            await self._close()
        except Exception as exc:
            PEER_LOG.bug(log, self.budget, f"closing STOMP connection {self.connection_id}", exc)
        log.debug("STOMP connection %s closed", self.connection_id)

    async def _close(self) -> None:
        if self._connect_timer is not None:
            self._connect_timer.cancel()
        for timer in self._timers:
            timer.cancel()
        # Sends already accepted are stored and routed even when the client is gone.
        with contextlib.suppress(DovecoteError):
            await self._route_batch()
        with contextlib.suppress(DovecoteError):
            await self._settle_pipelined(0)
        if self._registered:
            await self.broker.remove_connection(self.connection_id)
        self.out.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.stream.wait_closed()

    async def _read_loop(self) -> None:
        # Bytes an auto-detecting listener already read come first.
        chunks = [self.initial] if self.initial else []
        self.initial = b""
        while True:
            if not chunks:
                chunks = await self.stream.read_chunks(READ_CHUNK)
            self._last_read = time.monotonic()
            if not chunks:
                return
            for chunk in chunks:
                self.parser.receive_data(chunk)
            chunks = []
            frame: Frame | None = None
            running = False
            try:
                while True:
                    running = False
                    frame = None
                    event = self.parser.next_event()
                    if event is NEED_DATA:
                        break
                    if event is HEARTBEAT:
                        continue
                    assert isinstance(event, Frame)
                    frame = event
                    try:
                        request = self.converter.on_frame(frame)
                    except DovecoteError as exc:
                        if not self._refused(exc, frame):
                            raise
                        continue
                    running = True
                    # The common case inline (no coroutine per frame): a send nobody waits
                    # for, with room for it.
                    send = self._receiptless_send(request)
                    try:
                        now = (
                            send is not None
                            and self._batch.fits(self.broker, send, self._pipelined_bytes)
                            and self.broker.admit_send_now(self.connection_id, send)
                        )
                    except DovecoteError as exc:  # refused (not authorized): the ERROR says so
                        if not self._refused(exc, frame):
                            raise
                        continue
                    if now:
                        assert send is not None
                        if self._batch.add(send):
                            await self._route_batch()
                        continue
                    if not await self._handle(request, frame):
                        return
                running = True
                await self._route_batch()
            except Exception as exc:
                await self._fail(exc, frame, running)
                return
            await self.out.drain()

    async def _handle(self, request: StompRequest, frame: Frame) -> bool:
        """Run one frame's request; False when the connection should now close."""
        send = self._receiptless_send(request)
        if send is not None:
            # A SEND nobody waits for: admitted now, and routed with the others read in the
            # same chunk: one store write (and fsync) and one dispatch per destination for
            # all of them.
            # Sends batched or under way are not charged to the usages yet: near a limit,
            # let them land first so that flow control sees the truth.
            if not self._batch.fits(self.broker, send, self._pipelined_bytes):
                await self._route_batch()
                await self._settle_pipelined(0)
            try:
                if not self.broker.admit_send_now(self.connection_id, send):
                    await self.broker.admit_send(self.connection_id, send)
            except DovecoteError as exc:
                if not self._refused(exc, frame):
                    raise
                return True
            if self._batch.add(send):
                await self._route_batch()
            return True
        await self._route_batch()
        # Anything else runs after the sends before it (a RECEIPT covers them all).
        await self._settle_pipelined(0)
        if request.connect is not None:
            peer = Peer(
                peer_address(self.stream), "stomp", self.stream.tls,
                self.stream.certificate_subject(),
            )  # fmt: skip
            state = await self.broker.add_connection(request.connect, self._on_dispatch, peer)
            state.closer = self.out.close
            self._registered = True
            self.stream.handshaken = True
            self.parser.version = self.converter.version
            self._start_heartbeats()
        reply, commands = request.reply, request.commands
        early = reply is not None and len(commands) == 1 and isinstance(commands[0], _EARLY)
        self._receipt = reply if early else None
        for command in commands:
            try:
                await self.broker.process(self.connection_id, command,
                                          self._taken if early else None)  # fmt: skip
            except BaseException as exc:
                self._receipt = None  # the ERROR answers it
                if not isinstance(exc, DovecoteError) or not self._refused(exc, frame):
                    raise
                self.converter.refused(command)
                return True
        if reply is not None and (not early or self._receipt is not None):
            self._receipt = None
            self._write(reply)
        if request.close:
            self._registered = False  # DISCONNECT already removed it from the broker
            await self.out.drain()
            return False
        return True

    @staticmethod
    def _receiptless_send(request: StompRequest) -> SendMessage | None:
        """The send a request is, when it is a plain one nobody waits for (no receipt, no
        transaction, no reply expected, no temporary destination to create first)."""
        if request.reply is not None or len(request.commands) != 1:
            return None
        command = request.commands[0]
        if (
            isinstance(command, SendMessage)
            and command.transaction_id is None
            and command.message.reply_to is None
        ):
            return command
        return None

    async def _route_batch(self) -> None:
        if not self._batch.sends:
            return
        batch, size, persistent = self._batch.take()
        if persistent:
            # Pipelined: the next frames are read while its store write is under way, and
            # the writes of several batches (and connections) share one fsync. Batches are
            # enqueued in the order of their writes, so they keep their order.
            task = asyncio.create_task(self.broker.route_admitted(batch))
            self._pipelined.append((task, size))
            self._pipelined_bytes += size
            await self._settle_pipelined(MAX_PIPELINED_BATCHES)
        else:
            # Nothing to store: routed now, after the batches still being stored.
            await self._settle_pipelined(0)
            await self.broker.route_admitted(batch)

    async def _settle_pipelined(self, keep: int) -> None:
        """Wait for pipelined sends, oldest first, until at most ``keep`` are under way
        (and at most MAX_PIPELINED_BYTES, but one always: a message larger than that is
        stored while the next is read); a failed one raises its error here (and the
        connection ends with an ERROR)."""
        pipelined = self._pipelined
        while len(pipelined) > keep or (
            len(pipelined) > 1 and self._pipelined_bytes > MAX_PIPELINED_BYTES
        ):
            task, size = pipelined.popleft()
            self._pipelined_bytes -= size
            await task

    def _refused(self, error: DovecoteError, frame: Frame) -> bool:
        """Answer a well-formed frame the broker or the converter refused with an ERROR and
        go on, as ActiveMQ's STOMP does (an unknown ack id or transaction, a bad selector or
        header value, a full store): True when it was such a refusal. A frame that cannot
        be read, one before or of the CONNECT, and an unknown command end the connection."""
        if not self._registered or frame.command not in REFUSABLE_COMMANDS:
            return False
        PEER_LOG.peer(log, self.budget, "STOMP connection %s from %s: %s refused: %s",
                      self.connection_id, self.peer, frame.command, error, exc=error,
                      level=logging.INFO)  # fmt: skip
        self._write(self.converter.error_frame(error, frame))
        return True

    async def _fail(self, exc: Exception, frame: Frame | None, running: bool) -> None:
        """End the connection with an ERROR saying why: a frame that could not be read or
        made sense of (the peer's: a line at WARNING), a refusal by the broker (INFO), or a
        bug of ours while running it (its traceback once)."""
        what = f"STOMP {frame.command} frame" if frame is not None else "STOMP frame"
        error: DovecoteError
        if isinstance(exc, DovecoteError):
            error = exc
            level = logging.WARNING if isinstance(exc, ProtocolError) else logging.INFO
            PEER_LOG.peer(log, self.budget, "STOMP connection %s from %s: %s", self.connection_id,
                          self.peer, error, exc=exc, level=level)  # fmt: skip
        elif running:
            PEER_LOG.bug(log, self.budget, f"running a {what}", exc)
            error = DovecoteError(f"internal error: {type(exc).__name__}")
        else:
            error = peer_error(exc, what)
            PEER_LOG.peer(log, self.budget, "STOMP connection %s from %s: %s", self.connection_id,
                          self.peer, error, exc=exc)  # fmt: skip
        self._write(self.converter.error_frame(error, frame))
        with contextlib.suppress(ConnectionError):
            await self.out.drain()

    def _taken(self) -> None:
        """The command waited for is taken (a send stored, a consumer attached): its receipt
        now (``_handle``)."""
        receipt = self._receipt
        if receipt is not None:
            self._receipt = None
            self._write(receipt)
            self.out.flush()

    def _written(self) -> None:
        # ack:auto subscriptions are sent more once the socket has taken what they got.
        if self._registered:
            self.broker.written(self.connection_id)

    def _on_dispatch(self, dispatch: MessageDispatch) -> None:
        parts = self.converter.dispatch_parts(dispatch)
        if parts is not None:
            self.out.write_parts(parts)

    def _write(self, frame: Frame) -> None:
        self.out.write(encode_frame(frame, self.converter.version))

    # -- heart-beats -----------------------------------------------------------------------

    def _no_connect(self) -> None:
        if not self.converter.connected and not self.stream.is_closing():
            PEER_LOG.peer(
                log, self.budget, "STOMP connection %s from %s sent no CONNECT in %d ms; "
                "dropping it", self.connection_id, self.peer,
                self.settings.connect_attempt_timeout_ms, level=logging.INFO,
            )  # fmt: skip
            self.stream.close()

    def _start_heartbeats(self) -> None:
        beat = self.converter.heartbeat
        if beat.send_ms > 0:
            self._timers.append(asyncio.create_task(self._send_heartbeats(beat.send_ms / 1000)))
        if beat.receive_ms > 0:
            limit = beat.receive_ms / 1000 * self.settings.heartbeat_grace
            self._timers.append(asyncio.create_task(self._watch_silence(limit)))

    async def _send_heartbeats(self, interval: float) -> None:
        while not self.stream.is_closing():
            await asyncio.sleep(interval)
            if time.monotonic() - self.out.last_write >= interval * 0.9:
                self.out.write(b"\n")

    async def _watch_silence(self, limit: float) -> None:
        while not self.stream.is_closing():
            silent = time.monotonic() - self._last_read
            if silent >= limit:
                PEER_LOG.peer(
                    log, self.budget, "STOMP connection %s silent for %.1fs (limit %.1fs); "
                    "dropping it", self.connection_id, silent, limit, level=logging.INFO,
                )  # fmt: skip
                self.stream.close()
                return
            await asyncio.sleep(limit - silent)
