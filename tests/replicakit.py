"""An in-process Coordinator for the replicated store's tests: a Group stands for ZooKeeper
(the members registered, in order, their positions, the master), and applies the election
rule of dovecote.store.replicated.coordination on every change. Tests kill a member (its
registration goes, as when its process dies) or cut its session (it is told "waiting").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dovecote.store.replicated.adapter import ReplicatedLevelDBStore
from dovecote.store.replicated.coordination import Member, Role, quorum_of
from dovecote.store.replicated.settings import ReplicationSettings


@dataclass
class _Registration:
    member: Member
    roles: asyncio.Queue[Role] = field(default_factory=asyncio.Queue)
    last: Role | None = None


class Group:
    """What ZooKeeper holds for one group of ``replicas`` brokers."""

    def __init__(self, replicas: int = 3) -> None:
        self.replicas = replicas
        self.registered: dict[str, _Registration] = {}  # in registration order
        self.master: str | None = None
        self.elections = 0

    def coordinator(self) -> InProcessCoordinator:
        return InProcessCoordinator(self)

    def register(self, member: Member) -> _Registration:
        registration = _Registration(member)
        self.registered[member.node_id] = registration
        self.elect()
        return registration

    def deregister(self, node_id: str, reason: str = "") -> None:
        registration = self.registered.pop(node_id, None)
        if registration is not None and reason:
            self._tell(registration, Role("waiting", reason=reason))
        if self.master == node_id:
            self.master = None
        self.elect()

    def publish(self, node_id: str, position: int) -> None:
        registration = self.registered.get(node_id)
        if registration is not None:
            registration.member = replace(registration.member, position=position)

    def members(self) -> list[Member]:
        return [
            replace(r.member, master=node_id == self.master)
            for node_id, r in self.registered.items()
        ]

    def elect(self) -> None:
        """The rule: with no master and a quorum registered, the highest position wins
        (ties: the earliest registered); everyone else follows it, or waits without one."""
        if self.master is None and len(self.registered) >= quorum_of(self.replicas):
            best = max(self.registered.values(), key=lambda r: r.member.position)
            self.master = best.member.node_id
            self.elections += 1
        for node_id, registration in self.registered.items():
            if self.master is None:
                have = len(self.registered)
                role = Role("waiting", reason=f"{have} of {self.replicas} replicas registered")
            elif node_id == self.master:
                role = Role("master")
            else:
                master = self.registered[self.master].member
                role = Role("slave", master=replace(master, master=True))
            self._tell(registration, role)

    def _tell(self, registration: _Registration, role: Role) -> None:
        if role != registration.last:
            registration.last = role
            registration.roles.put_nowait(role)

    # -- what the tests do ---------------------------------------------------------------

    def kill(self, node_id: str) -> None:
        """Its registration goes at once (its session ends with its process)."""
        self.deregister(node_id)

    def lose_session(self, node_id: str) -> None:
        """Its session expires: it is told "waiting", and its registration goes."""
        self.deregister(node_id, reason="the coordinator session was lost")


class InProcessCoordinator:
    def __init__(self, group: Group) -> None:
        self.group = group
        self.node_id = ""
        self._registration: _Registration | None = None

    async def start(self, me: Member) -> None:
        self.node_id = me.node_id
        self._registration = self.group.register(me)

    async def roles(self) -> AsyncIterator[Role]:
        assert self._registration is not None
        while True:
            yield await self._registration.roles.get()

    def publish_position(self, position: int) -> None:
        self.group.publish(self.node_id, position)

    def members(self) -> list[Member]:
        return self.group.members()

    async def stop(self) -> None:
        if self.node_id in self.group.registered:
            registration = self.group.registered[self.node_id]
            if registration is self._registration:
                self.group.deregister(self.node_id)


class ReplicaSet:
    """``replicas`` replicated stores in one process, in directories under ``root``, named
    n0, n1, ..., over real sockets (port 0) and one Group."""

    def __init__(self, root: Path, replicas: int = 3, **options: Any) -> None:
        self.root = root
        self.group = Group(replicas)
        self.replicas = replicas
        self.options = {"peer_timeout_s": 2.0, **options}
        self.stores: dict[str, ReplicatedLevelDBStore] = {}
        self.starting: dict[str, asyncio.Task[None]] = {}
        self.demoted: dict[str, list[str]] = {}

    def settings(self, name: str) -> ReplicationSettings:
        return ReplicationSettings(
            self.root / name,
            name,
            bind="tcp://127.0.0.1:0",
            replicas=self.replicas,
            **self.options,
        )

    def launch(self, name: str) -> ReplicatedLevelDBStore:
        """Start a store (its start() runs in a task: it returns once elected master)."""
        demoted = self.demoted.setdefault(name, [])
        store = ReplicatedLevelDBStore(
            self.settings(name), self.group.coordinator(), demoted.append
        )
        self.stores[name] = store
        self.starting[name] = asyncio.create_task(store.start(), name=f"{name}-start")
        return store

    async def start(self, count: int | None = None) -> ReplicatedLevelDBStore:
        """Launch n0.. (all by default), one after the other registered; the master."""
        for i in range(self.replicas if count is None else count):
            self.launch(f"n{i}")
            await self.registered(f"n{i}")
        return await self.master()

    async def registered(self, name: str) -> None:
        await until(lambda: name in self.group.registered, f"{name} registered")

    async def master(self, timeout: float = 10.0) -> ReplicatedLevelDBStore:
        """The store whose start() returned as master (waiting for it)."""

        def elected() -> ReplicatedLevelDBStore | None:
            for name, task in self.starting.items():
                if task.done() and task.exception() is None and self.stores[name].role == "master":
                    return self.stores[name]
            return None

        def roles() -> str:
            return ", ".join(f"{n}: {s.role} {s.reason}".strip() for n, s in self.stores.items())

        await until(lambda: elected() is not None, lambda: f"a master ({roles()})", timeout)
        found = elected()
        assert found is not None
        return found

    def slaves(self) -> list[ReplicatedLevelDBStore]:
        return [s for s in self.stores.values() if s.role == "slave"]

    async def caught_up(self, *names: str) -> None:
        """Until each named slave (every slave by default) holds the master's position."""
        master = await self.master()
        targets = [self.stores[n] for n in names] if names else self.slaves()
        await until(
            lambda: all(t.position == master.position for t in targets),
            f"slaves at the master's position {master.position}",
        )

    async def crash(self, name: str) -> None:
        """As a killed process: its registration goes, its connections drop at once (no
        last records handed over), its database closes."""
        store = self.stores.pop(name)
        task = self.starting.pop(name)
        self.group.kill(name)
        if store.server is not None:
            store.server.refuse("crashed")
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            await task
        await store.stop()

    async def stop(self, name: str) -> None:
        store = self.stores.pop(name)
        task = self.starting.pop(name)
        if not task.done():
            task.cancel()
        with contextlib.suppress(BaseException):
            await task
        await store.stop()

    async def stop_all(self) -> None:
        for name in list(self.stores):
            await self.stop(name)


async def until(
    condition: Callable[[], bool], what: str | Callable[[], str], timeout: float = 10.0
) -> None:
    """Poll ``condition`` until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(
                f"timed out waiting for {what if isinstance(what, str) else what()}"
            )
        await asyncio.sleep(0.01)
