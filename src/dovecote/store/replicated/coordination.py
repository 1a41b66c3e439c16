"""The seam between the replicated store and whatever elects its master (issue 35).

The store (adapter.py) asks a Coordinator which role it has; the ZooKeeper coordinator
(zookeeper.py) and the in-process one the store tests use (tests/replicakit.py) both apply
the election rule below. /work/helpers/35-interface.md and docs/replication.md say more.

Election rule: while no master is registered and at least a quorum (replicas // 2 + 1) of
members are registered, the member with the highest position becomes master (ties: the
earliest registration). A master stays master until its registration goes. A member that
loses its coordination session gets Role("waiting") at once; a master must then refuse
writes, since it cannot know it is still master.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol

RoleKind = Literal["master", "slave", "waiting"]


@dataclass(frozen=True)
class Member:
    """One broker of the group as the coordinator registers it."""

    node_id: str
    replication_address: str  # "host:port" of its replication server
    position: int
    master: bool = False


@dataclass(frozen=True)
class Role:
    """What this member is to do now."""

    kind: RoleKind
    master: Member | None = None  # for "slave": whom to follow
    reason: str = ""  # for "waiting": why


class Coordinator(Protocol):
    """Registers this member, elects a master, and tells the member its role."""

    async def start(self, me: Member) -> None:
        """Connect and register ``me``."""
        ...

    def roles(self) -> AsyncIterator[Role]:
        """Each role change; the first as soon as it is known."""
        ...

    def publish_position(self, position: int) -> None:
        """Advertise this member's position (implementations may throttle)."""
        ...

    def members(self) -> list[Member]:
        """The members the coordinator sees now."""
        ...

    async def stop(self) -> None:
        """Deregister and disconnect."""
        ...


def quorum_of(replicas: int) -> int:
    """How many members (the master included) make a quorum of a group of ``replicas``."""
    return replicas // 2 + 1
