"""``auto://`` (compatibility P4): one port for OpenWire and STOMP, told apart by the first byte.

An OpenWire client opens with a size-prefixed WireFormatInfo, whose first byte is the high
byte of a small int32 size: 0x00. A STOMP client opens with a command (a letter) or an EOL.
The byte read to decide is handed to the chosen protocol's connection as its first input.
With TLS (auto+ssl://) every connection is TLS: the handshake first, then the same choice.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass

from dovecote.broker.broker import Broker
from dovecote.transport.listener import Listener
from dovecote.transport.openwire import OpenWireConnection, OpenWireListenerSettings
from dovecote.transport.stomp import StompConnection, StompListenerSettings
from dovecote.transport.stream import Stream

log = logging.getLogger("dovecote.auto")


@dataclass(frozen=True, slots=True)
class AutoListenerSettings:
    host: str = "127.0.0.1"
    port: int = 61608
    max_connections: int = 1000
    protocol_detection_timeout_ms: int = 30_000
    """A client that sends nothing in this long is dropped (protocolDetectionTimeOut)."""


class AutoServer(Listener):
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
            await OpenWireConnection(self.broker, self.openwire, stream, first).run()
        else:
            await StompConnection(self.broker, self.stomp, stream, first).run()
