"""What the admin API reads from a request, checked: a wrong value is a 400 naming the field
(``priority: 'high' is not a whole number from 0 to 9``), never a Python message."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dovecote.core.destinations import Destination, queue, topic

DESTINATION_TYPES = {"queue": queue, "topic": topic}
MAX_DELAY_MS = 10 * 365 * 24 * 3600 * 1000


class BadInput(ValueError):
    """A field with a wrong value; the admin API answers 400 with ``field: why``."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field


@dataclass(frozen=True, slots=True)
class SendOptions:
    """A message's headers and properties as the send form or the query string give them."""

    persistent: bool = True
    priority: int = 4
    delay_ms: int = 0
    time_to_live_ms: int = 0
    correlation_id: str | None = None
    type: str | None = None
    reply_to: Destination | None = None
    properties: Mapping[str, str | int | float | bool] | None = None


def whole_number(field: str, text: str | None, default: int, low: int, high: int) -> int:
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadInput(field, f"{text[:50]!r} is not a whole number from {low} to {high}") from None
    if not low <= value <= high:
        raise BadInput(field, f"{value} is not a whole number from {low} to {high}")
    return value


def flag(field: str, text: str | None, default: bool) -> bool:
    if text is None or text == "":
        return default
    lowered = text.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise BadInput(field, f"{text[:50]!r} is not true or false")


def destination(field: str, type_text: object, name: object) -> Destination:
    """A queue or topic named in a request body."""
    if type_text not in DESTINATION_TYPES:
        raise BadInput(f"{field}_type", f"{str(type_text)[:50]!r} is not queue or topic")
    if not isinstance(name, str) or not name.strip():
        raise BadInput(field, "a destination name is needed")
    return DESTINATION_TYPES[str(type_text)](name.strip())


def properties(field: str, text: str | None) -> dict[str, str | int | float | bool] | None:
    """A JSON object of message properties: strings, numbers and booleans."""
    if text is None or text.strip() == "":
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        raise BadInput(field, 'not a JSON object (like {"region": "eu", "attempt": 2})') from None
    if not isinstance(parsed, dict):
        raise BadInput(field, "not a JSON object")
    for key, value in parsed.items():
        if not key or not isinstance(value, str | int | float | bool):
            raise BadInput(field, f"{key!r} must be a string, number or boolean")
        if isinstance(value, float) and not math.isfinite(value):
            raise BadInput(field, f"{key!r} is not a finite number")
    return parsed


def send_options(params: Mapping[str, str]) -> SendOptions:
    reply_to = params.get("replyTo") or None
    return SendOptions(
        persistent=flag("persistent", params.get("persistent"), True),
        priority=whole_number("priority", params.get("priority"), 4, 0, 9),
        delay_ms=whole_number("delay", params.get("delay"), 0, 0, MAX_DELAY_MS),
        time_to_live_ms=whole_number("timeToLive", params.get("timeToLive"), 0, 0, MAX_DELAY_MS),
        correlation_id=params.get("correlationId") or None,
        type=params.get("type") or None,
        reply_to=None if reply_to is None else queue(reply_to),
        properties=properties("properties", params.get("properties")),
    )


def json_object(raw: bytes) -> dict[str, Any]:
    """A request body that must be a JSON object (an empty body is an empty object)."""
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise BadInput("body", "not JSON") from None
    if not isinstance(parsed, dict):
        raise BadInput("body", "not a JSON object")
    return parsed


def message_ids(body: Mapping[str, Any], required: bool) -> list[str] | None:
    """The ``messages`` field: a list of message ids (absent: all, where that is allowed)."""
    chosen = body.get("messages")
    if chosen is None:
        if required:
            raise BadInput("messages", "a list of message ids is needed")
        return None
    if not isinstance(chosen, list) or not all(isinstance(m, str) for m in chosen):
        raise BadInput("messages", "not a list of message ids")
    return chosen
