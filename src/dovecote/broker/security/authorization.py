"""The authorization map (ActiveMQ's authorizationMap): which groups may read, write and
administer (create) destinations, by queue or topic pattern, plus one entry for every
temporary destination (tempDestinationAuthorizationEntry).

As in ActiveMQ, every entry whose pattern matches a destination contributes its groups (the
union), ``FOO.>`` also matches ``FOO``, a destination no entry matches is closed to all, the
group ``*`` is everyone, and without a temporary-destination entry temporary destinations
are open to every authenticated connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from dovecote.broker.connection import Principal
from dovecote.core.destinations import Destination, has_wildcard, wildcard_matches

EVERYONE = "*"


class Right(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


_VERBS = {Right.READ: "read from", Right.WRITE: "write to", Right.ADMIN: "create"}
"""How ActiveMQ's refusals name each right: "is not authorized to read from: queue://Q"."""


@dataclass(frozen=True, slots=True)
class Rights:
    """The groups holding each right."""

    read: frozenset[str] = frozenset()
    write: frozenset[str] = frozenset()
    admin: frozenset[str] = frozenset()

    def groups(self, right: Right) -> frozenset[str]:
        if right is Right.READ:
            return self.read
        if right is Right.WRITE:
            return self.write
        return self.admin


@dataclass(frozen=True, slots=True)
class AuthorizationEntry:
    """Rights on the queues (``queues`` True) or topics whose names match ``pattern``."""

    pattern: str
    queues: bool
    rights: Rights

    def covers(self, destination: Destination) -> bool:
        return destination.is_queue == self.queues and pattern_covers(
            self.pattern, destination.name
        )


@lru_cache(maxsize=16384)
def pattern_covers(pattern: str, name: str) -> bool:
    """Whether an entry's ``pattern`` applies to the destination ``name``, as ActiveMQ's
    DestinationMap finds entries: ``FOO.>`` also covers ``FOO``; a wildcard name (a
    wildcard subscription) is covered by every entry it could match below it."""
    if not has_wildcard(name):
        if wildcard_matches(pattern, name):
            return True
        return pattern.endswith(".>") and wildcard_matches(pattern[:-2], name)
    wanted, parts = pattern.split("."), name.split(".")
    for i, part in enumerate(parts):
        if i >= len(wanted):
            return False
        if wanted[i] == ">" or part == ">":
            return True
        if wanted[i] != "*" and part != "*" and wanted[i] != part:
            return False
    return len(wanted) == len(parts) or (len(wanted) == len(parts) + 1 and wanted[-1] == ">")


class AuthorizationMap:
    def __init__(
        self, entries: tuple[AuthorizationEntry, ...] = (), temporary: Rights | None = None
    ) -> None:
        self.entries = entries
        self.temporary = temporary
        """None: temporary destinations are open to every authenticated connection."""

    def groups(self, right: Right, destination: Destination) -> frozenset[str] | None:
        """The groups holding ``right`` on one destination (not a composite), or None
        when everyone does."""
        if destination.is_temporary:
            return None if self.temporary is None else self.temporary.groups(right)
        found: set[str] = set()
        for entry in self.entries:
            if entry.covers(destination):
                found |= entry.rights.groups(right)
        return frozenset(found)

    def allows(self, principal: Principal, right: Right, destination: Destination) -> bool:
        groups = self.groups(right, destination)
        return groups is None or EVERYONE in groups or not groups.isdisjoint(principal.groups)


def refusal_text(principal: Principal, right: Right, destination: Destination) -> str:
    """ActiveMQ's words for a refusal: "User alice is not authorized to write to: queue://Q"
    (a composite destination by its name alone, as ActiveMQ prints one)."""
    shown = destination.name if destination.is_composite else str(destination)
    return f"User {principal.user} is not authorized to {_VERBS[right]}: {shown}"
