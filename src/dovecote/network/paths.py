"""Where a message has been: the ids of the brokers that forwarded it (OpenWire's
Message.brokerPath). dovecote keeps the path in a property the OpenWire converter fills
from the wire and empties onto it again (clients never see it), so that it is stored and
recovered with the message like any property.
"""

from __future__ import annotations

from dovecote.core.message import BROKER_PATH_PROPERTY, Message

__all__ = ["BROKER_PATH_PROPERTY", "broker_path", "without_path"]


def broker_path(message: Message) -> tuple[str, ...]:
    value = message.properties.get(BROKER_PATH_PROPERTY) if message.properties else None
    if not isinstance(value, str) or not value:
        return ()
    return tuple(value.split(","))


def without_path(message: Message) -> dict[str, object]:
    """The message's properties without its path."""
    return {k: v for k, v in message.properties.items() if k != BROKER_PATH_PROPERTY}
