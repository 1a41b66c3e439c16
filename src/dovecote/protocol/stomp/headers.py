"""Reading a STOMP frame's headers: required ones, integers in a range, booleans, the
heart-beat pair and a SUBSCRIBE's selector, each refused with a RemoteProtocolError that
names the header."""

from __future__ import annotations

from dovecote.core.errors import RemoteProtocolError
from dovecote.core.selector import CONVERT_STRINGS_PREFIX
from dovecote.protocol.stomp.frames import Frame


def required(frame: Frame, name: str) -> str:
    value = frame.get(name)
    if value is None:
        raise RemoteProtocolError(f"{frame.command} frame needs a {name!r} header")
    return value


def int_header(headers: dict[str, str], name: str, default: int, low: int, high: int | None) -> int:
    text = headers.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise RemoteProtocolError(f"header {name!r} must be an integer, got {text!r}") from None
    if value < low or (high is not None and value > high):
        upper = f" to {high}" if high is not None else " or more"
        raise RemoteProtocolError(f"header {name!r} must be {low}{upper}, got {value}")
    return value


def stomp_selector(text: str | None) -> str | None:
    """A SUBSCRIBE's selector as ActiveMQ's STOMP passes it on: its headers are strings, so
    a string compared with a number is read as one (``n > 1`` matches ``n:5``)."""
    if text is None or not text.strip():
        return None
    return CONVERT_STRINGS_PREFIX + text


def bool_header(frame: Frame, name: str, default: bool = False) -> bool:
    text = frame.get(name)
    return default if text is None else text.lower() == "true"


def parse_heartbeat(text: str) -> tuple[int, int]:
    try:
        cx, cy = (int(part) for part in text.split(","))
    except ValueError:
        raise RemoteProtocolError(f"bad heart-beat header {text!r}") from None
    if cx < 0 or cy < 0:
        raise RemoteProtocolError(f"bad heart-beat header {text!r}")
    return cx, cy
