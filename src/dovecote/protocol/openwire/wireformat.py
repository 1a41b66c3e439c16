"""WireFormatInfo: what dovecote offers and what a connection ends up using.

Each side sends a WireFormatInfo first; every boolean option is the AND of both sides and
the version the smaller of both (see openwire.md 1.3). dovecote offers version 12, loose
encoding, no cache, a size prefix and no stack traces, so those are what every connection
uses. Numeric values carry Java types: the client casts ``MaxInactivityDuration`` and
``MaxFrameSize`` to Long and ``CacheSize`` to Integer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from dovecote.core.errors import RemoteProtocolError
from dovecote.protocol.openwire.codec import MAGIC, Structure
from dovecote.protocol.openwire.primitives import JavaInt, decode_map, encode_map
from dovecote.protocol.openwire.schema import WIRE_FORMAT_INFO

PROTOCOL_VERSION: Final = 12
MIN_VERSION: Final = 9
"""Layouts from v9 (ActiveMQ 5.9 clients) to v12 (5.13 and later, 5.17 included)."""
WFI_MAP_LIMIT: Final = 4096


@dataclass(frozen=True, slots=True)
class Negotiated:
    version: int
    tight: bool
    cache: bool
    stack_traces: bool
    size_prefix_disabled: bool
    max_inactivity_ms: int
    initial_delay_ms: int
    client: dict[str, object]


def broker_wire_format(
    max_inactivity_ms: int, initial_delay_ms: int, max_frame_size: int
) -> Structure:
    options: dict[str, object] = {
        "TightEncodingEnabled": False,
        "CacheEnabled": False,
        "SizePrefixDisabled": False,
        "StackTraceEnabled": False,
        "TcpNoDelayEnabled": True,
        "MaxInactivityDuration": max_inactivity_ms,
        "MaxInactivityDurationInitalDelay": initial_delay_ms,  # sic: ActiveMQ's spelling
        "CacheSize": JavaInt(0),
        "MaxFrameSize": max_frame_size,
        "ProviderName": "ActiveMQ",
        "ProviderVersion": "5.17.2",
        "PlatformDetails": "dovecote (Python)",
    }
    return Structure(
        WIRE_FORMAT_INFO,
        {"magic": MAGIC, "version": PROTOCOL_VERSION, "marshalledProperties": encode_map(options)},
    )


def negotiate(ours: Structure, peer: Structure) -> Negotiated:
    """Combine our WireFormatInfo with the peer's, as both sides do."""
    if peer.type != WIRE_FORMAT_INFO:
        raise RemoteProtocolError("the first OpenWire frame must be a WireFormatInfo")
    version = peer.get("version", 0)
    if version < MIN_VERSION:
        raise RemoteProtocolError(
            f"OpenWire version {version} is not supported (dovecote speaks {PROTOCOL_VERSION})"
        )
    mine = decode_map(ours["marshalledProperties"] or b"")
    theirs = decode_map(peer["marshalledProperties"] or b"\xff\xff\xff\xff", WFI_MAP_LIMIT)

    def both(name: str) -> bool:
        return mine.get(name) is True and theirs.get(name) is True

    def smaller(name: str) -> int:
        # The InactivityMonitor takes a plain minimum: a side that sends 0 turns it off.
        values = [v if isinstance(v, int) else 0 for v in (mine.get(name), theirs.get(name))]
        return min(values)

    return Negotiated(
        version=min(version, PROTOCOL_VERSION),
        tight=both("TightEncodingEnabled"),
        cache=both("CacheEnabled"),
        stack_traces=both("StackTraceEnabled"),
        size_prefix_disabled=both("SizePrefixDisabled"),
        max_inactivity_ms=smaller("MaxInactivityDuration"),
        initial_delay_ms=smaller("MaxInactivityDurationInitalDelay"),
        client=theirs,
    )
