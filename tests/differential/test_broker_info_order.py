"""What an OpenWire broker says before and after the client's WireFormatInfo, side by side
on bare OpenWire: its own WireFormatInfo at once, its BrokerInfo only once the client's
WireFormatInfo has come (ActiveMQ holds every command until the wire format is agreed; a
client that waited for the BrokerInfo before sending its own would wait for ever there)."""

from __future__ import annotations

import socket
import time

from differ import Target
from dovecote.protocol.openwire import FrameReader, Marshaller
from dovecote.protocol.openwire import schema as t
from rawopenwire import client_wfi, read_structures

NAMES = {t.WIRE_FORMAT_INFO: "WireFormatInfo", t.BROKER_INFO: "BrokerInfo"}


def said_before_and_after_our_wire_format(target: Target) -> tuple[list[str], list[str]]:
    with socket.create_connection(("127.0.0.1", target.openwire_port), timeout=10) as sock:
        reader = FrameReader()
        # Nothing more is coming before our WireFormatInfo: a short quiet window shows it.
        before = read_structures(sock, reader, time.monotonic() + 0.5)
        sock.sendall(Marshaller().frame(client_wfi()))
        after: list[int] = []
        deadline = time.monotonic() + 10
        while t.BROKER_INFO not in after and time.monotonic() < deadline:
            after += [s.type for s in read_structures(sock, reader, time.monotonic() + 0.1)]
    return (
        [NAMES.get(s.type, str(s.type)) for s in before],
        [NAMES.get(kind, str(kind)) for kind in after if kind != t.KEEP_ALIVE_INFO],
    )


def test_the_broker_info_waits_for_the_clients_wire_format(differ) -> None:  # type: ignore[no-untyped-def]
    differ(said_before_and_after_our_wire_format, (["WireFormatInfo"], ["BrokerInfo"]))
