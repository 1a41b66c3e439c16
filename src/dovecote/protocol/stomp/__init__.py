"""STOMP: the sans-I/O frame codec and the frame<->command converter."""

from dovecote.protocol.stomp.frames import HEARTBEAT, NEED_DATA, Frame, FrameParser, encode_frame

__all__ = ["HEARTBEAT", "NEED_DATA", "Frame", "FrameParser", "encode_frame"]
