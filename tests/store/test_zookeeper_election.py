"""The ZooKeeper coordinator (store/replicated/zookeeper.py) against a real ZooKeeper
(tests/zookeeper.py): the election rule of coordination.py (a quorum, the newest position,
ties to the earliest registration), a master kept while it lives, a new one when it goes,
"waiting" at once when the connection or the session is lost, and a group that goes on
after ZooKeeper itself restarts."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
from kazoo.client import KazooClient

from dovecote.store.replicated.coordination import Member, Role
from dovecote.store.replicated.zookeeper import (
    ZooKeeperCoordinator,
    ZooKeeperSettings,
)
from zookeeper import ZooKeeperServer, running_zookeeper, zookeeper_available

pytestmark = pytest.mark.skipif(not zookeeper_available(), reason="no ZooKeeper installed")

SESSION_S = 2.0


@pytest.fixture(scope="module")
def zk() -> Iterator[ZooKeeperServer]:
    with running_zookeeper() as server:
        yield server


class Node:
    """One coordinator and the roles it announced."""

    def __init__(self, zk: ZooKeeperServer, path: str, name: str, position: int) -> None:
        settings = ZooKeeperSettings(zk.address, path, SESSION_S, replicas=3)
        self.coordinator = ZooKeeperCoordinator(settings)
        self.me = Member(name, f"127.0.0.1:{7000 + position}", position)
        self.roles: list[Role] = []
        self._follower: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.coordinator.start(self.me)
        self._follower = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        async for role in self.coordinator.roles():
            self.roles.append(role)

    @property
    def role(self) -> Role:
        return self.roles[-1] if self.roles else Role("waiting", reason="none yet")

    async def stop(self) -> None:
        await self.coordinator.stop()
        if self._follower is not None:
            await asyncio.wait_for(self._follower, 5)


async def until(check: object, timeout: float = 10.0, what: str = "") -> float:
    """Poll ``check()`` until true; the seconds it took."""
    started = time.monotonic()
    while not check():  # type: ignore[operator]
        assert time.monotonic() - started < timeout, f"not within {timeout}s: {what}"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


@asynccontextmanager
async def group(
    zk: ZooKeeperServer, path: str, positions: dict[str, int]
) -> AsyncIterator[dict[str, Node]]:
    nodes = {name: Node(zk, path, name, p) for name, p in positions.items()}
    try:
        for node in nodes.values():  # one after another: registrations in this order
            await node.start()
            await until(lambda n=node: n.me.node_id in {m.node_id for m in n.coordinator.members()},
                        what="registered")  # fmt: skip
        yield nodes
    finally:
        for node in nodes.values():
            await node.stop()


def kinds(nodes: dict[str, Node]) -> dict[str, str]:
    return {name: node.role.kind for name, node in nodes.items()}


async def test_the_newest_member_is_elected_once_a_quorum_registers(
    zk: ZooKeeperServer,
) -> None:
    async with group(zk, "/elect/newest", {"a": 5, "b": 9}) as nodes:
        a, b = nodes["a"], nodes["b"]
        await until(lambda: b.role.kind == "master", what="b (position 9) elected")
        await until(lambda: a.role.kind == "slave", what="a follows")
        assert a.role.master is not None and a.role.master.node_id == "b"
        assert a.role.master.replication_address == "127.0.0.1:7009"
        # A third member, newer than the master, joins as a slave: the master stays.
        c = Node(zk, "/elect/newest", "c", 50)
        await c.start()
        try:
            await until(lambda: c.role.kind == "slave", what="c follows")
            assert kinds(nodes) == {"a": "slave", "b": "master"}
            seen = sorted((m.node_id, m.position, m.master) for m in c.coordinator.members())
            assert seen == [("a", 5, False), ("b", 9, True), ("c", 50, False)]
        finally:
            await c.stop()


async def test_alone_a_member_waits_for_a_quorum(zk: ZooKeeperServer) -> None:
    async with group(zk, "/elect/quorum", {"a": 3}) as nodes:
        a = nodes["a"]
        await until(lambda: "no quorum" in a.role.reason, what="a waits for a quorum")
        assert a.role.kind == "waiting"
        assert a.role.reason == "no quorum: 1 of 3 replicas registered, a master needs 2"
        async with group(zk, "/elect/quorum", {"b": 1}) as more:
            await until(lambda: a.role.kind == "master", what="a elected with b")
            await until(lambda: more["b"].role.kind == "slave", what="b follows a")


async def test_ties_go_to_the_earliest_registration(zk: ZooKeeperServer) -> None:
    async with group(zk, "/elect/tie", {"first": 7, "second": 7}) as nodes:
        await until(lambda: nodes["first"].role.kind == "master", what="first elected")
        await until(lambda: nodes["second"].role.kind == "slave", what="second follows")


async def test_when_the_master_goes_the_slave_with_the_newest_position_takes_over(
    zk: ZooKeeperServer,
) -> None:
    async with group(zk, "/elect/takeover", {"m": 10, "b": 1, "c": 2}) as nodes:
        m, b, c = nodes["m"], nodes["b"], nodes["c"]
        await until(lambda: kinds(nodes) == {"m": "master", "b": "slave", "c": "slave"})
        b.coordinator.publish_position(12)  # b got further than c
        c.coordinator.publish_position(11)
        await m.coordinator.stop()
        took = await until(lambda: b.role.kind == "master", what="b takes over")
        await until(lambda: c.role.kind == "slave" and c.role.master is not None
                    and c.role.master.node_id == "b", what="c follows b")  # fmt: skip
        assert took < 2.0, f"took over in {took:.2f}s"
        # Exactly one master at every moment c and b went through.
        assert all(r.kind != "master" for r in c.roles)


def expire_session(zk: ZooKeeperServer, coordinator: ZooKeeperCoordinator) -> None:
    """ZooKeeper's own way to expire a client's session: another connection with the same
    session id and password, then closed."""
    session_id, password = coordinator._client.client_id
    twin = KazooClient(hosts=zk.address, client_id=(session_id, password), timeout=SESSION_S)
    twin.start(timeout=10)
    twin.stop()
    twin.close()


async def test_a_master_whose_session_expires_waits_at_once_and_comes_back_as_a_slave(
    zk: ZooKeeperServer,
) -> None:
    async with group(zk, "/elect/expiry", {"m": 10, "s": 9}) as nodes:
        m, s = nodes["m"], nodes["s"]
        await until(lambda: kinds(nodes) == {"m": "master", "s": "slave"})
        s.coordinator.publish_position(10)  # caught up: a tie, and s registered first now
        await until(lambda: any(x.position == 10 for x in m.coordinator.members()
                                if x.node_id == "s"), what="s's position seen")  # fmt: skip
        await asyncio.to_thread(expire_session, zk, m.coordinator)
        await until(lambda: m.role.kind == "waiting", what="the old master waits")
        await until(lambda: s.role.kind == "master", what="s takes over")
        await until(lambda: m.role.kind == "slave", what="m registers again, as a slave")
        assert m.role.master is not None and m.role.master.node_id == "s"
        assert "session expired" in " ".join(r.reason for r in m.roles)


async def test_zookeeper_down_makes_every_member_wait_and_its_return_restores_the_group(
    zk: ZooKeeperServer,
) -> None:
    async with group(zk, "/elect/restart", {"m": 10, "s": 9}) as nodes:
        m, s = nodes["m"], nodes["s"]
        await until(lambda: kinds(nodes) == {"m": "master", "s": "slave"})
        assert zk.process is not None
        zk.process.send_signal(signal.SIGSTOP)  # silent: no connection reset to notice
        try:
            waited = await until(lambda: m.role.kind == "waiting", what="m waits")
            assert waited < SESSION_S, f"the master kept its role {waited:.2f}s"
            await until(lambda: s.role.kind == "waiting", what="s waits")
        finally:
            zk.process.send_signal(signal.SIGCONT)
        await until(lambda: kinds(nodes) == {"m": "master", "s": "slave"}, timeout=15,
                    what="the group back")  # fmt: skip


async def test_a_restarted_zookeeper_keeps_the_group(zk: ZooKeeperServer) -> None:
    async with group(zk, "/elect/zkrestart", {"m": 10, "s": 9}) as nodes:
        await until(lambda: kinds(nodes) == {"m": "master", "s": "slave"})
        zk.stop()
        await until(lambda: kinds(nodes) == {"m": "waiting", "s": "waiting"}, what="both wait")
        await asyncio.to_thread(zk.start)
        await until(lambda: sorted(kinds(nodes).values()) == ["master", "slave"], timeout=15,
                    what="a master and a slave again")  # fmt: skip


async def test_a_registration_whose_answer_was_lost_is_not_a_second_member(
    zk: ZooKeeperServer,
) -> None:
    """A create whose answer the connection lost may have been done: registering again
    finds this session's znode instead of making a second member (which would count
    towards a quorum)."""
    async with group(zk, "/elect/orphan", {"a": 1}) as nodes:
        coordinator = nodes["a"].coordinator
        name = coordinator._name
        coordinator._name = None  # as after a create whose answer was lost
        coordinator._poke()
        await until(lambda: coordinator._name is not None, what="registered again")
        assert coordinator._name == name
        await asyncio.sleep(0.3)
        assert [m.node_id for m in coordinator.members()] == ["a"]
