"""OpenWire v12, loose encoding: primitives, field tables, the frame codec, negotiation."""

from dovecote.protocol.openwire.codec import (
    NEED_DATA,
    FrameReader,
    Marshaller,
    Structure,
    Throwable,
)
from dovecote.protocol.openwire.wireformat import Negotiated, broker_wire_format, negotiate

__all__ = [
    "NEED_DATA",
    "FrameReader",
    "Marshaller",
    "Negotiated",
    "Structure",
    "Throwable",
    "broker_wire_format",
    "negotiate",
]
