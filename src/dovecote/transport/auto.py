"""``auto://`` (SPEC P4): one port for OpenWire and STOMP, told apart by the first byte.

An OpenWire client opens with a size-prefixed WireFormatInfo, whose first byte is the high
byte of a small int32 size: 0x00. A STOMP client opens with a command (a letter) or an EOL.
The byte read to decide is handed to the chosen protocol's connection as its first input.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from dovecote.broker.broker import Broker
from dovecote.transport.openwire import OpenWireConnection, OpenWireListenerSettings
from dovecote.transport.stomp import StompConnection, StompListenerSettings

log = logging.getLogger("dovecote.auto")
DETECT_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class AutoListenerSettings:
    host: str = "127.0.0.1"
    port: int = 61608


class AutoServer:
    def __init__(
        self,
        broker: Broker,
        settings: AutoListenerSettings,
        stomp: StompListenerSettings,
        openwire: OpenWireListenerSettings,
    ) -> None:
        self.broker = broker
        self.settings = settings
        self.stomp = stomp
        self.openwire = openwire
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self.settings.host, self.settings.port
        )
        log.info("auto (OpenWire or STOMP) listening on %s:%d", self.settings.host, self.port)

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

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            try:
                first = await asyncio.wait_for(reader.read(1), DETECT_TIMEOUT_S)
            except TimeoutError:
                first = b""
            if not first:
                writer.close()
                return
            if first == b"\x00":
                await OpenWireConnection(self.broker, self.openwire, reader, writer, first).run()
            else:
                await StompConnection(self.broker, self.stomp, reader, writer, first).run()
        finally:
            self._connections.discard(task)
