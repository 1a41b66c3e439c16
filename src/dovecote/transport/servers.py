"""The protocol listeners the broker starts (STOMP, OpenWire, auto), without their
protocols: each imports its connection's module (codec, converter, frame
readers and writers) at its first accepted connection, so a broker nobody has spoken a
protocol to does not carry that protocol's code (issue 33: idle memory;
tests/integration/test_idle_broker_imports.py). A connection's module is then imported
once; later connections find it in ``sys.modules``.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Protocol

from dovecote.broker.broker import Broker
from dovecote.transport.listener import Listener
from dovecote.transport.settings import (
    AutoListenerSettings,
    OpenWireListenerSettings,
    StompListenerSettings,
)
from dovecote.transport.stream import Stream


class Limits(Protocol):
    """Where a protocol's listener listens, and its limits (both protocols' settings)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def max_connections(self) -> int: ...
    @property
    def connect_attempt_timeout_ms(self) -> int: ...


class ProtocolServer(Listener):
    """A listener for one protocol, as its settings say."""

    def __init__(self, broker: Broker, limits: Limits, tls: ssl.SSLContext | None) -> None:
        super().__init__(
            limits.host, limits.port, limits.max_connections, tls,
            limits.connect_attempt_timeout_ms,
        )  # fmt: skip
        self.broker = broker


class StompServer(ProtocolServer):
    name = "STOMP"

    def __init__(
        self, broker: Broker, settings: StompListenerSettings, tls: ssl.SSLContext | None = None
    ) -> None:
        super().__init__(broker, settings, tls)
        self.settings = settings

    async def serve(self, stream: Stream) -> None:
        from dovecote.transport.stomp import StompConnection

        await StompConnection(self.broker, self.settings, stream).run()

    def refuse(self, stream: Stream) -> None:
        from dovecote.transport.stomp import refusal

        stream.write(refusal())


class OpenWireServer(ProtocolServer):
    name = "OpenWire"

    def __init__(
        self, broker: Broker, settings: OpenWireListenerSettings, tls: ssl.SSLContext | None = None
    ) -> None:
        super().__init__(broker, settings, tls)
        self.settings = settings

    async def serve(self, stream: Stream) -> None:
        from dovecote.transport.openwire import OpenWireConnection

        await OpenWireConnection(self.broker, self.settings, stream).run()


class AutoServer(Listener):
    """``auto://`` (compatibility P4): one port for OpenWire and STOMP, told apart by the
    first byte. An OpenWire client opens with a size-prefixed WireFormatInfo, whose first
    byte is the high byte of a small int32 size: 0x00. A STOMP client opens with a command
    (a letter) or an EOL. The byte read to decide is handed to the chosen protocol's
    connection as its first input. With TLS (auto+ssl://) every connection is TLS: the
    handshake first, then the same choice."""

    name = "auto (OpenWire or STOMP)"

    def __init__(
        self,
        broker: Broker,
        settings: AutoListenerSettings,
        stomp: StompListenerSettings,
        openwire: OpenWireListenerSettings,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(
            settings.host, settings.port, settings.max_connections, tls,
            settings.protocol_detection_timeout_ms,
        )  # fmt: skip
        self.settings = settings
        self.broker = broker
        self.stomp = stomp
        self.openwire = openwire

    async def serve(self, stream: Stream) -> None:
        try:
            timeout_ms = self.settings.protocol_detection_timeout_ms
            first = await asyncio.wait_for(stream.read(1), timeout_ms / 1000 or None)
        except (TimeoutError, ConnectionError):
            first = b""
        if not first:
            stream.close()
            return
        if first == b"\x00":
            from dovecote.transport.openwire import OpenWireConnection

            await OpenWireConnection(self.broker, self.openwire, stream, first).run()
        else:
            from dovecote.transport.stomp import StompConnection

            await StompConnection(self.broker, self.stomp, stream, first).run()
