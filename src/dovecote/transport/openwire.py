"""The OpenWire listener (compatibility P2, P3): a connection stream (transport/stream.py) around
the sans-I/O codec and converter.

On accept the broker sends its WireFormatInfo and a BrokerInfo at once; the client's first
frame must be its WireFormatInfo, after which both sides speak the negotiated format (loose,
size-prefixed). Each command runs to completion in the broker before the next is read, and
one that asked for a response gets exactly one: Response, or ExceptionResponse naming the
problem. A failed command that wanted no response gets a ConnectionError. Only a broken
protocol (an unparseable frame, a bad handshake) ends the connection; other connections
never notice. Whatever a peer gets wrong is answered and logged in one line at most, within
the limits of transport/peerlog.py; a client that sends no WireFormatInfo within
``connect_attempt_timeout_ms`` is dropped (ActiveMQ's InactivityMonitor connect check).

Inactivity (the InactivityMonitor's rules): we write a KeepAliveInfo whenever we have been
silent for a third of the negotiated interval, and drop a client that sent nothing for the
whole interval, after the negotiated initial delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Final

from dovecote.broker.broker import Broker
from dovecote.broker.connection import Peer
from dovecote.core.commands import ConsumerInfo, MessageAck, MessageDispatch, SendMessage
from dovecote.core.errors import (
    BrokerError,
    DovecoteError,
    ProtocolError,
    SecurityError,
    peer_error,
)
from dovecote.core.ids import ConnectionId
from dovecote.network.connector import NetworkConnectors
from dovecote.network.wire import ANSWERS, Channel, is_bridged_advisory
from dovecote.protocol.openwire import (
    NEED_DATA,
    FrameReader,
    Marshaller,
    Structure,
    broker_wire_format,
    negotiate,
)
from dovecote.protocol.openwire.ack_frames import AckFrames
from dovecote.protocol.openwire.bigendian import i32
from dovecote.protocol.openwire.converter import OpenWireConverter, OpenWireRequest
from dovecote.protocol.openwire.dispatch_frames import LARGE_CONTENT, DispatchFrames
from dovecote.protocol.openwire.schema import (
    BROKER_INFO,
    COMMANDS,
    KEEP_ALIVE_INFO,
    MESSAGE_TYPES,
    WIRE_FORMAT_INFO,
    type_name,
)
from dovecote.protocol.openwire.send_frames import SendFrames, command_id
from dovecote.transport.listener import (
    MAX_BATCHED_SENDS,
    READ_CHUNK,
    BatchedWriter,
    SendBatch,
)
from dovecote.transport.peerlog import PEER_LOG, ConnectionBudget, peer_address
from dovecote.transport.settings import OpenWireListenerSettings
from dovecote.transport.stream import Stream

log = logging.getLogger("dovecote.openwire")
_EARLY: Final = (SendMessage, ConsumerInfo)
"""Commands answered as soon as the broker has taken them: a send once stored, before its
dispatch; a consumer once attached, before its first dispatch (as ActiveMQ answers)."""


class OpenWireConnection:
    def __init__(
        self,
        broker: Broker,
        settings: OpenWireListenerSettings,
        stream: Stream,
        initial: bytes = b"",
    ) -> None:
        self.initial = initial
        self.broker = broker
        self.settings = settings
        self.stream = stream
        self.out = BatchedWriter(stream)
        self.frames = FrameReader(settings.max_frame_size)
        self.marshaller = Marshaller()
        self.converter = OpenWireConverter(
            broker.ids.next_connection_id(), broker.settings.broker_name
        )
        self.dispatch_frames = DispatchFrames(self.converter, self.marshaller)
        self.ack_frames = AckFrames(self.converter)
        self.send_frames = SendFrames(self.converter)
        self.our_format = broker_wire_format(
            settings.max_inactivity_ms, settings.max_inactivity_initial_delay_ms,
            settings.max_frame_size,
        )  # fmt: skip
        self._negotiated = False
        self._registered: ConnectionId | None = None
        self._last_read = time.monotonic()
        self._timers: list[asyncio.Task[None]] = []
        self._batch = SendBatch()
        self._acks: list[MessageAck] = []
        self._response: Structure | None = None
        """The Response to the send being run, until the broker has stored it."""
        self.budget = ConnectionBudget()
        self._handshake_timer: asyncio.TimerHandle | None = None
        self.duplex: Channel | None = None
        """The bridge back to a remote whose duplex connector opened this connection."""
        self._bridge_frames = _BRIDGE_FRAMES

    async def run(self) -> None:
        self._write(self.our_format)
        timeout_ms = self.settings.connect_attempt_timeout_ms
        if timeout_ms > 0:
            self._handshake_timer = asyncio.get_running_loop().call_later(
                timeout_ms / 1000, self._no_handshake
            )
        # Nothing a connection raises leaves it: an exception let out of a compiled
        # coroutine was chained to every later one (each logged traceback grew).
        try:
            await self._read_loop()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:
            PEER_LOG.bug(log, self.budget, f"on OpenWire connection {self._name()}", exc)
        try:
            await self._close()
        except Exception as exc:
            PEER_LOG.bug(log, self.budget, f"closing OpenWire connection {self._name()}", exc)

    async def _close(self) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        for timer in self._timers:
            timer.cancel()
        # Sends already accepted are routed even when the client is gone.
        with contextlib.suppress(ConnectionError):
            await self._route_batch()
            await self._settle_acks()
        if self.duplex is not None:
            self.duplex.fail("the connection closed")
        if self._registered is not None:
            await self.broker.remove_connection(self._registered)
        self.out.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.stream.wait_closed()

    def _name(self) -> str:
        return f"{self.converter.connection_id} from {peer_address(self.stream)}"

    def _no_handshake(self) -> None:
        if not self._negotiated and not self.stream.is_closing():
            PEER_LOG.peer(
                log, self.budget, "OpenWire connection from %s sent no WireFormatInfo in %d ms; "
                "closing it", peer_address(self.stream), self.settings.connect_attempt_timeout_ms,
                level=logging.INFO,
            )  # fmt: skip
            self.stream.close()

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
                self.frames.receive_data(chunk)
            chunks = []
            while True:
                structure: Structure | None = None
                frame: bytes | None = None
                stage = _FRAMING
                try:
                    read = self.frames.next_frame()
                    if read is NEED_DATA:
                        break
                    assert isinstance(read, bytes)
                    frame = read
                    stage = _PARSING
                    # The common cases inline (no coroutine per frame): an ack, or a send
                    # nobody waits for with room for it. Plain ones are read straight from
                    # their bytes (ack_frames.py, send_frames.py).
                    request: OpenWireRequest | None = None
                    plain = self._plain(frame) if self._negotiated else None
                    if plain is None:
                        structure = self.marshaller.parse_body(frame)
                        if (
                            structure.type in _NOT_COMMANDS
                            or not self._negotiated
                            or structure.type in self._bridge_frames
                        ):
                            # (A duplex bridge's sends come this way too: refused, answered.)
                            stage = _RUNNING if structure.type in MESSAGE_TYPES else _HANDSHAKE
                            if not await self._handle(structure):
                                return
                            continue
                        stage = _CONVERTING
                        request = self.converter.on_structure(structure)
                        plain = _async_ack(request) or _async_send(request)
                    stage = _RUNNING
                    if isinstance(plain, MessageAck):
                        # Settled with the others read in the same chunk, and the room
                        # they make filled by one dispatch.
                        if self._batch.sends:
                            await self._route_batch()
                        self._acks.append(plain)
                        if len(self._acks) >= MAX_BATCHED_SENDS:
                            await self._settle_acks()
                        continue
                    if (
                        plain is not None
                        and _batchable(plain)
                        and not self._acks
                        and self._batch.fits(self.broker, plain)
                        and self.broker.admit_send_now(self.converter.connection_id, plain)
                    ):
                        if self._batch.add(plain):
                            await self._route_batch()
                        continue
                    if request is None:
                        assert plain is not None  # read from its bytes: not batched here
                        request = self._straight_request(plain, frame)
                    if not await self._handle_request(request):
                        return
                except Exception as exc:
                    if not await self._on_error(exc, stage, frame, structure):
                        return
            await self._route_batch()
            await self._settle_acks()
            await self.out.drain()

    async def _on_error(
        self, exc: Exception, stage: int, frame: bytes | None, structure: Structure | None
    ) -> bool:
        """Answer a command that failed; False when the connection must now close: the
        stream cannot be trusted after a frame that could not be read, nor after a bad
        handshake. A command read whole but wrong, or refused, is answered and the
        connection goes on (as ActiveMQ's does)."""
        what = type_name(frame[0]) if frame else "frame"
        if stage == _RUNNING and not isinstance(exc, DovecoteError):
            PEER_LOG.bug(log, self.budget, f"running an OpenWire {what}", exc)
            answer: DovecoteError = BrokerError(f"internal error: {type(exc).__name__}")
            self._write(self.converter.error_response(answer, structure))
            return True
        error = exc if isinstance(exc, DovecoteError) else peer_error(exc, f"OpenWire {what}")
        fatal = stage != _CONVERTING and (stage != _RUNNING or isinstance(exc, ProtocolError))
        if isinstance(exc, SecurityError) and self._registered is None:
            fatal = True  # a refused login: ActiveMQ closes the connection after answering
        if structure is None and frame is not None:
            structure = _command_head(frame)
        if fatal:
            PEER_LOG.peer(log, self.budget, "OpenWire connection %s: %s; closing it",
                          self._name(), error, exc=exc)  # fmt: skip
        elif stage == _CONVERTING:
            PEER_LOG.peer(log, self.budget, "OpenWire connection %s: %s", self._name(), error,
                          exc=exc)  # fmt: skip
        else:
            # Refused by the broker (an unknown consumer, a full store): the client is told.
            log.debug("OpenWire command failed: %s", error)
        self._write(self.converter.error_response(error, structure))
        if fatal:
            with contextlib.suppress(ConnectionError):
                await self.out.drain()
            return False
        return True

    def _plain(self, frame: bytes) -> MessageAck | SendMessage | None:
        """A frame's ack or send when it is in the common shape, read from its bytes."""
        version = self.marshaller.version
        return self.ack_frames.read(frame, version) or self.send_frames.read(frame, version)

    def _straight_request(self, plain: MessageAck | SendMessage, frame: bytes) -> OpenWireRequest:
        """A command read from its bytes as a request: a synchronous send is answered."""
        if isinstance(plain, SendMessage) and plain.sync:
            return OpenWireRequest((plain,), self.converter.response(command_id(frame)))
        return OpenWireRequest((plain,))

    async def _handle(self, structure: Structure) -> bool:
        if structure.type == WIRE_FORMAT_INFO:
            negotiated = negotiate(self.our_format, structure)
            self.marshaller.stack_traces = negotiated.stack_traces
            # An older client's version (as low as 9) takes that version's layouts.
            self.marshaller.version = negotiated.version
            log.debug(
                "OpenWire v%d negotiated: %s encoding (the client offered tight=%s)",
                negotiated.version, "tight" if negotiated.tight else "loose",
                negotiated.client.get("TightEncodingEnabled"),
            )  # fmt: skip
            if not self._negotiated:
                # As ActiveMQ: the BrokerInfo only once the client's wire format is known.
                self._write(self.converter.broker_info(f"ID:{self.broker.settings.broker_name}"))
                if negotiated.max_inactivity_ms > 0:
                    self._start_inactivity(
                        negotiated.max_inactivity_ms, negotiated.initial_delay_ms
                    )
            self._negotiated = True
            self.stream.handshaken = True
            return True
        if not self._negotiated:
            raise ProtocolError("the first OpenWire frame must be a WireFormatInfo")
        if structure.type == KEEP_ALIVE_INFO and not structure["responseRequired"]:
            return True
        if structure.type in self._bridge_frames:
            return await self._bridge_frame(structure)
        return await self._handle_request(self.converter.on_structure(structure))

    async def _bridge_frame(self, structure: Structure) -> bool:
        """A network bridge's BrokerInfo (a duplex one: we bridge back over this
        connection, network/connector.py), or the remote's answer to that bridge."""
        if self.duplex is not None and structure.type != BROKER_INFO:
            if structure.type in ANSWERS or is_bridged_advisory(structure):
                self.duplex.receive(structure)
                return True
            return await self._handle_request(self.converter.on_structure(structure))
        handled = await self._handle_request(self.converter.on_structure(structure))
        network = self.broker.plugins.find(NetworkConnectors)
        if network is not None and self.marshaller.version >= 12:
            asked = network.durable_subscriptions_asked(structure)  # syncDurableSubs
            if asked is not None:
                self._write(asked)
        if structure["duplexConnection"] and network is not None and self.duplex is None:
            self.duplex = network.accept_duplex(
                structure, self._write, self.stream.close, peer_address(self.stream)
            )
            self._bridge_frames = _BRIDGE_FRAMES | ANSWERS | MESSAGE_TYPES
        return handled

    async def _handle_request(self, request: OpenWireRequest) -> bool:
        """Run a client command's request (the read loop takes plain acks and sends
        itself); False when the connection should now close."""
        await self._settle_acks()
        send = _async_send(request)
        if send is not None and _batchable(send):
            # A send nobody waits for (non-persistent, no response asked, no producer
            # window): admitted now, routed with the others read in the same chunk, so
            # that each destination is dispatched once for all of them.
            if not self._batch.fits(self.broker, send):
                await self._route_batch()  # its sends are charged before this one is let in
            if not self.broker.admit_send_now(self.converter.connection_id, send):
                await self.broker.admit_send(self.converter.connection_id, send)
            if self._batch.add(send):
                await self._route_batch()
            return True
        await self._route_batch()  # anything else runs after the sends before it
        if request.connect is not None:
            peer = Peer(
                peer_address(self.stream), "openwire", self.stream.tls,
                self.stream.certificate_subject(),
            )  # fmt: skip
            state = await self.broker.add_connection(request.connect, self._on_dispatch, peer)
            state.closer = self.out.close
            self._registered = request.connect.connection_id
        reply, commands = request.reply, request.commands
        early = reply is not None and len(commands) == 1 and isinstance(commands[0], _EARLY)
        self._response = reply if early else None
        try:
            for command in commands:
                await self.broker.process(self.converter.connection_id, command,
                                          self._taken if early else None)  # fmt: skip
        except BaseException:
            self._response = None  # the error answers it
            raise
        if reply is not None and (not early or self._response is not None):
            self._response = None
            self._write(reply)
        if request.producer_ack is not None:
            held_for = request.held_for
            if held_for is not None and self.broker.memory_full(held_for.destination):
                # Flow control for a windowed producer: the ack waits for room, the
                # connection does not (ActiveMQ holds ProducerAcks the same way).
                self._timers.append(asyncio.create_task(self._ack_later(request)))
            else:
                self._write(request.producer_ack)
        if request.close:
            self._registered = None  # ShutdownInfo already removed it from the broker
            return False
        return True

    async def _route_batch(self) -> None:
        if not self._batch.sends:
            return
        batch, _, _ = self._batch.take()
        try:
            await self.broker.route_admitted(batch)
        except DovecoteError as exc:
            # Nobody waits on these sends: the client hears of it as a ConnectionError,
            # as ActiveMQ tells it of a failed asynchronous send.
            log.debug("OpenWire asynchronous sends failed: %s", exc)
            self._write(self.converter.error_response(exc, None))

    async def _settle_acks(self) -> None:
        if not self._acks:
            return
        acks, self._acks = self._acks, []
        for error in await self.broker.ack_together(self.converter.connection_id, acks):
            log.debug("OpenWire asynchronous ack failed: %s", error)
            self._write(self.converter.error_response(error, None))

    async def _ack_later(self, request: OpenWireRequest) -> None:
        assert request.held_for is not None and request.producer_ack is not None
        await self.broker.wait_for_room(request.held_for)
        self._write(request.producer_ack)

    def _taken(self) -> None:
        """The command waited for is taken (a send stored, a consumer attached): its Response
        now (``_handle_request``)."""
        response = self._response
        if response is not None:
            self._response = None
            self._write(response)
            self.out.flush()

    def _on_dispatch(self, dispatch: MessageDispatch) -> None:
        message = dispatch.message
        if message is not None and len(message.body) >= LARGE_CONTENT:
            self.out.write_parts(self.dispatch_frames.frame_parts(dispatch))
        else:
            self.out.write(self.dispatch_frames.frame(dispatch))

    def _write(self, structure: Structure) -> None:
        self.out.write(self.marshaller.frame(structure))

    # -- inactivity ------------------------------------------------------------------------

    def _start_inactivity(self, interval_ms: int, initial_delay_ms: int) -> None:
        interval = interval_ms / 1000
        self._timers.append(asyncio.create_task(self._keep_alive(interval / 3)))
        self._timers.append(asyncio.create_task(self._watch(interval, initial_delay_ms / 1000)))

    async def _keep_alive(self, every: float) -> None:
        while not self.stream.is_closing():
            await asyncio.sleep(every)
            if time.monotonic() - self.out.last_write >= every * 0.9:
                self._write(Structure(KEEP_ALIVE_INFO, {"commandId": 0}))

    async def _watch(self, interval: float, initial_delay: float) -> None:
        await asyncio.sleep(initial_delay)
        while not self.stream.is_closing():
            silent = time.monotonic() - self._last_read
            if silent >= interval:
                PEER_LOG.peer(
                    log, self.budget, "OpenWire connection %s silent for %.1fs; dropping it",
                    self._name(), silent, level=logging.INFO,
                )  # fmt: skip
                self.stream.close()
                return
            await asyncio.sleep(interval - silent)


_NOT_COMMANDS: Final = frozenset((WIRE_FORMAT_INFO, KEEP_ALIVE_INFO))
_BRIDGE_FRAMES: Final = frozenset((BROKER_INFO,))
"""Read by the transport itself, not the converter."""

# Where in a frame's handling an error came from: it decides the answer.
_FRAMING: Final = 0
_PARSING: Final = 1
_HANDSHAKE: Final = 2
_CONVERTING: Final = 3
_RUNNING: Final = 4


def _command_head(frame: bytes) -> Structure | None:
    """A command's id and whether it wants a response, read from its first bytes when the
    rest could not be: the ExceptionResponse then answers it."""
    if frame[0] not in COMMANDS or len(frame) < 6:
        return None
    return Structure(frame[0], {"commandId": i32(frame, 1), "responseRequired": frame[5] != 0})


def _async_send(request: OpenWireRequest) -> SendMessage | None:
    """The send a request is, when nothing answers it."""
    if (
        request.reply is not None
        or request.producer_ack is not None
        or request.connect is not None
        or len(request.commands) != 1
    ):
        return None
    command = request.commands[0]
    return command if isinstance(command, SendMessage) else None


def _batchable(send: SendMessage) -> bool:
    """Whether a send nobody waits for may wait for the others read with it: when it needs
    no store write, no transaction and no temporary destination made first."""
    message = send.message
    return (
        not send.sync
        and not message.persistent
        and send.transaction_id is None
        and message.reply_to is None
    )


def _async_ack(request: OpenWireRequest) -> MessageAck | None:
    """The ack a request is, when nothing answers it."""
    if request.reply is not None or request.connect is not None or len(request.commands) != 1:
        return None
    command = request.commands[0]
    return command if isinstance(command, MessageAck) else None
