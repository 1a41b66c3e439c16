"""Destinations: queues, topics, their temporary forms, composites and topic wildcards.

Names follow ActiveMQ: the canonical string is ``queue://NAME`` / ``topic://NAME`` /
``temp-queue://NAME`` / ``temp-topic://NAME``. A composite destination is a comma-separated
list whose elements may carry their own ``queue://`` or ``topic://`` prefix (compatibility D2).
Topic names are dot-separated paths in which ``*`` matches one element and ``>`` the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

from dovecote.core.errors import InvalidDestinationError
from dovecote.core.records import pickle_by_fields


class DestinationType(StrEnum):
    QUEUE = "queue"
    TOPIC = "topic"
    TEMP_QUEUE = "temp-queue"
    TEMP_TOPIC = "temp-topic"


_QUEUE_TYPES = (DestinationType.QUEUE, DestinationType.TEMP_QUEUE)
_TEMP_TYPES = (DestinationType.TEMP_QUEUE, DestinationType.TEMP_TOPIC)


@dataclass(frozen=True, slots=True)
class Destination:
    type: DestinationType
    name: str
    _hash: int = field(init=False, repr=False, compare=False)
    _composite: bool = field(init=False, repr=False, compare=False)
    _text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if "?" in self.name:
            # Options after a "?" (``orders?consumer.prefetchSize=0``) are the client's to
            # apply: like ActiveMQ, the destination is the name before them.
            object.__setattr__(self, "name", self.name[: self.name.index("?")].strip())
        if not self.name:
            raise InvalidDestinationError(f"empty {self.type} name")
        # A key of several lookups per message. The generated hash is interpreted Python
        # and hashes the type through Enum.__hash__ (interpreted too); the name alone is
        # enough (equal destinations have equal names; queue://A and topic://A share a
        # hash and equality tells them apart). Made once: core/records.py says why.
        object.__setattr__(self, "_hash", hash(self.name) >> 2)
        # Asked several times per message (components): a search of the name each time.
        object.__setattr__(self, "_composite", "," in self.name)
        # Written per message into the journal (adds and removals): formatting the type
        # goes through Enum.__format__, interpreted.
        object.__setattr__(self, "_text", f"{self.type}://{self.name}")

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        # Compiled, unlike the generated one (which compares two tuples, in Python).
        if not isinstance(other, Destination):
            return NotImplemented
        return self.name == other.name and self.type == other.type

    @property
    def is_queue(self) -> bool:
        return self.type in _QUEUE_TYPES

    @property
    def is_topic(self) -> bool:
        return not self.is_queue

    @property
    def is_temporary(self) -> bool:
        return self.type in _TEMP_TYPES

    @property
    def is_composite(self) -> bool:
        return self._composite

    @property
    def is_wildcard(self) -> bool:
        return self.is_topic and has_wildcard(self.name)

    def components(self) -> tuple[Destination, ...]:
        """The destinations a composite names (itself when it is not one)."""
        if not self._composite:
            return (self,)
        return _components(self)

    def __str__(self) -> str:
        return self._text


@lru_cache(maxsize=4096)
def _components(composite: Destination) -> tuple[Destination, ...]:
    parts: list[Destination] = []
    for raw in composite.name.split(","):
        raw = raw.strip()
        if not raw:
            raise InvalidDestinationError(f"empty element in composite {composite}")
        if "://" in raw:
            parts.append(parse_destination(raw))
        else:
            parts.append(Destination(composite.type, raw))
    return tuple(parts)


def queue(name: str) -> Destination:
    return Destination(DestinationType.QUEUE, name)


def topic(name: str) -> Destination:
    return Destination(DestinationType.TOPIC, name)


@lru_cache(maxsize=4096)
def parse_destination(text: str) -> Destination:
    """Parse ``queue://A``, ``topic://A``, ``temp-queue://A``, ``temp-topic://A``."""
    scheme, sep, name = text.partition("://")
    if not sep:
        raise InvalidDestinationError(f"destination {text!r} has no queue:// or topic:// prefix")
    try:
        kind = DestinationType(scheme.lower())
    except ValueError:
        raise InvalidDestinationError(f"unknown destination type {scheme!r} in {text!r}") from None
    return Destination(kind, name)


def has_wildcard(name: str) -> bool:
    return any(part in ("*", ">") for part in name.split("."))


@lru_cache(maxsize=16384)
def wildcard_matches(pattern: str, name: str) -> bool:
    """True when the topic name matches the wildcard pattern (``*`` one element, ``>`` rest)."""
    pat = pattern.split(".")
    parts = name.split(".")
    for i, element in enumerate(pat):
        if element == ">":
            return len(parts) > i
        if i >= len(parts):
            return False
        if element != "*" and element != parts[i]:
            return False
    return len(parts) == len(pat)


def destination_matches(subscribed: Destination, actual: Destination) -> bool:
    """Whether a subscription on ``subscribed`` receives messages sent to ``actual``."""
    if subscribed.is_composite:
        return any(destination_matches(part, actual) for part in subscribed.components())
    if subscribed.is_queue != actual.is_queue:
        return False
    if subscribed == actual:
        return True
    return subscribed.type == actual.type and wildcard_matches(subscribed.name, actual.name)


pickle_by_fields(__name__)
