"""OpenWire without a client library, side by side: what each broker answers to commands a
client sends by hand."""

from __future__ import annotations

import socket
import time

import pytest

from differ import Target
from dovecote.protocol.openwire import FrameReader, Marshaller, Structure
from dovecote.protocol.openwire import schema as t
from rawopenwire import MARSHALLER, client_wfi, read_structures


def handshake(target: Target, inactivity_ms: int) -> tuple[socket.socket, FrameReader]:
    sock = socket.create_connection(("127.0.0.1", target.openwire_port), timeout=10)
    sock.sendall(MARSHALLER.frame(client_wfi(inactivity_ms, initial_delay_ms=10000)))
    return sock, FrameReader()


def replies(sock: socket.socket, reader: FrameReader, seconds: float) -> list[Structure]:
    return read_structures(sock, reader, time.monotonic() + seconds)


def keep_alive_answer(inactivity_ms: int) -> object:
    def scenario(target: Target) -> list[tuple[str, object, object, object]]:
        sock, reader = handshake(target, inactivity_ms)
        try:
            replies(sock, reader, 0.5)  # the broker's WireFormatInfo and BrokerInfo
            ask = Structure(t.KEEP_ALIVE_INFO, {"commandId": 7, "responseRequired": True})
            sock.sendall(Marshaller().frame(ask))
            answers = replies(sock, reader, 1.0)
        finally:
            sock.close()
        names = {t.KEEP_ALIVE_INFO: "KeepAliveInfo", t.RESPONSE: "Response"}
        return [
            (
                names.get(s.type, str(s.type)),
                s.fields.get("commandId") if s.type == t.KEEP_ALIVE_INFO else None,
                s.fields.get("correlationId"),
                s.fields.get("responseRequired"),
            )
            for s in answers
        ]

    return scenario


@pytest.mark.parametrize("inactivity_ms", [30000, 0])
def test_a_keep_alive_that_asks_for_a_response_is_answered(differ, inactivity_ms: int) -> None:
    """ActiveMQ sends the KeepAliveInfo back with its command id (7), asking nothing."""
    differ(keep_alive_answer(inactivity_ms), [("KeepAliveInfo", 7, None, False)])
