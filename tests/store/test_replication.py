"""The replicated LevelDB store (issue 35), three stores in one process: real LevelDB
directories, real sockets between them, and the in-process coordinator of replicakit (the
election rule of coordination.py) standing for ZooKeeper. The multi-process tests with a
real ZooKeeper are the group helper's (tests/integration)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from contract import Q, StoreContract, msg

from dovecote.core.errors import StoreFailedError
from dovecote.store.api import AddMessage, PersistenceAdapter, RemoveMessage
from dovecote.store.leveldb import LevelDBPersistenceAdapter
from dovecote.store.replicated.adapter import ReplicatedLevelDBStore
from dovecote.store.replicated.coordination import Member
from dovecote.store.replicated.history import POSITION, POSITION_KEY, read_position
from dovecote.store.replicated.stream import HEADER, Hello, Welcome, decode, encode, frame_length
from replicakit import ReplicaSet, until


@pytest.fixture
async def replica_sets(tmp_path: Path) -> AsyncIterator[Callable[..., ReplicaSet]]:
    """Makes ReplicaSets with the options given; stops them after the test."""
    made: list[ReplicaSet] = []

    def make(**options: Any) -> ReplicaSet:
        made.append(ReplicaSet(tmp_path / f"set{len(made)}", **options))
        return made[-1]

    yield make
    for group in made:
        await group.stop_all()


@pytest.fixture
def replicas(replica_sets: Callable[..., ReplicaSet]) -> ReplicaSet:
    return replica_sets()


def stored_ids(store: ReplicatedLevelDBStore) -> list[str]:
    return [m.message_id for m in store.recover().queues.get(Q, [])]


def database(store: ReplicatedLevelDBStore) -> dict[bytes, bytes]:
    """Every key of the store's LevelDB (but the disk probe's, which is each store's own)."""
    snapshot = store.local.snapshot()
    try:
        return {bytes(k): bytes(v) for k, v in snapshot.iterator() if k != b"mprobe"}
    finally:
        snapshot.close()


# -- the store contract, on a master with two slaves -------------------------------------------


@pytest.fixture
async def store(replicas: ReplicaSet) -> PersistenceAdapter:
    return await replicas.start()


@pytest.fixture
def reopen(replicas: ReplicaSet):  # type: ignore[no-untyped-def]
    async def again(adapter: PersistenceAdapter) -> PersistenceAdapter:
        # The master stops; a slave takes over with what it was sent, and the old master
        # comes back as a slave: recovery here is from a replica's copy.
        assert isinstance(adapter, ReplicatedLevelDBStore)
        name = adapter.settings.node_id
        await replicas.stop(name)
        master = await replicas.master()
        replicas.launch(name)
        await replicas.registered(name)
        await until(lambda: master.degraded is None, "the old master back as a slave")
        return master

    return again


class TestReplicatedStore(StoreContract):
    pass


# -- taking over ------------------------------------------------------------------------------


async def test_a_slave_that_takes_over_holds_the_masters_writes(replicas: ReplicaSet) -> None:
    master = await replicas.start()
    await master.write([AddMessage(msg(i)) for i in range(10)])
    await master.write([RemoveMessage(Q, msg(0).message_id)])
    await replicas.caught_up()
    old = master.settings.node_id
    await replicas.crash(old)
    successor = await replicas.master()
    assert successor.settings.node_id != old
    assert stored_ids(successor) == [msg(i).message_id for i in range(1, 10)]
    await successor.write([AddMessage(msg(10))])  # (the other slave follows it)
    assert successor.message_count(Q) == 10


@pytest.mark.parametrize("sync", ["quorum_mem", "quorum_disk"])
async def test_nothing_acknowledged_is_lost_when_the_master_dies_under_load(
    replica_sets: Callable[..., ReplicaSet], sync: str
) -> None:
    replicas = replica_sets(sync=sync)
    master = await replicas.start()
    acknowledged: list[str] = []

    async def producer(n: int) -> None:
        for i in range(10_000):
            message = msg(n * 100_000 + i)
            try:
                await master.write([AddMessage(message)])
            except StoreFailedError:
                return
            acknowledged.append(message.message_id)

    producers = [asyncio.create_task(producer(n)) for n in range(4)]
    await until(lambda: len(acknowledged) >= 300, "300 writes acknowledged")
    await replicas.crash(master.settings.node_id)
    await asyncio.gather(*producers)
    successor = await replicas.master()
    stored = set(stored_ids(successor))
    assert not [i for i in acknowledged if i not in stored]


async def test_the_master_is_never_more_than_one_group_ahead_of_a_quorum(
    replicas: ReplicaSet,
) -> None:
    # What makes the highest position the right one to elect (PROTOCOL.md): groups nobody
    # waits for (a consumer's acks) wait for the quorum too before the next is written.
    master = await replicas.start()
    assert master.server is not None
    server = master.server
    ahead: list[int] = []

    async def watch() -> None:
        while True:
            acked = max((s.applied for s in server.sessions.values()), default=0)
            ahead.append(server.position - acked)
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    for i in range(300):
        master.write([AddMessage(msg(i))], sync=False)  # (not waited for: a group each)
        await asyncio.sleep(0)
        if i % 50 == 49:
            await master.write([RemoveMessage(Q, msg(i).message_id)])
    await master.write([AddMessage(msg(1000))])
    watcher.cancel()
    assert master.message_count(Q) == 295 and max(ahead) <= 1


async def test_a_slave_whose_master_dies_waits_for_the_next_election(
    replicas: ReplicaSet,
) -> None:
    master = await replicas.start()
    await master.write([AddMessage(msg(i)) for i in range(5)])
    await replicas.caught_up()
    await replicas.crash("n2")
    await replicas.crash(master.settings.node_id)
    # One of three left: no quorum, no election, the store waits (start has not returned).
    n1 = replicas.stores["n1"]
    await until(lambda: n1.role == "waiting", "n1 waiting")
    assert "1 of 3 replicas" in n1.reason and not replicas.starting["n1"].done()
    replicas.launch("n2")
    successor = await replicas.master()
    assert successor is n1  # the highest position (n2 came back empty)
    assert stored_ids(n1) == [msg(i).message_id for i in range(5)]
    await successor.write([AddMessage(msg(5))])
    await replicas.caught_up("n2")
    assert stored_ids(replicas.stores["n2"]) == stored_ids(n1)


async def test_the_status_says_each_role_position_and_replica(replicas: ReplicaSet) -> None:
    master = await replicas.start()
    await master.write([AddMessage(msg(i)) for i in range(3)])
    await master.write([AddMessage(msg(3))])
    await replicas.caught_up()
    status = master.replication_status()
    assert (status.role, status.node_id, status.master) == ("master", "n0", "n0")
    assert status.position == 2  # (two groups)
    assert status.address == master.replication_address and status.degraded is None
    assert [(r.node_id, r.position, r.connected, r.lag) for r in status.replicas] == [
        ("n1", 2, True, 0),
        ("n2", 2, True, 0),
    ]
    slave = replicas.stores["n1"].replication_status()
    assert (slave.role, slave.position, slave.master) == ("slave", 2, "n0")
    assert [(r.node_id, r.connected) for r in slave.replicas] == [("n0", True), ("n2", False)]
    await replicas.crash("n2")
    await until(lambda: master.server is not None and master.server.connected == 1, "n2 gone")
    status = master.replication_status()
    assert [r.node_id for r in status.replicas] == ["n1"] and status.degraded is None


# -- catching up ------------------------------------------------------------------------------


async def test_a_late_slave_and_a_restarted_one_catch_up(
    replicas: ReplicaSet, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "dovecote.store.replicated")
    master = await replicas.start(count=2)  # a quorum of 3
    await master.write([AddMessage(msg(i)) for i in range(20)])
    replicas.launch("n2")
    await until(lambda: replicas.stores["n2"].role == "slave", "n2 a slave")
    await replicas.caught_up("n2")
    assert database(replicas.stores["n2"]) == database(master)
    assert "following master n0 from position 0 (snapshot" in caplog.text
    # Restarted while writes go on: it takes the records it missed from the backlog.
    await replicas.stop("n2")
    stopped_at = master.position
    for i in range(20, 30):
        await master.write([AddMessage(msg(i))])
    caplog.clear()
    replicas.launch("n2")
    await until(lambda: replicas.stores["n2"].role == "slave", "n2 a slave again")
    await replicas.caught_up("n2")
    expected = f"from position {stopped_at} (stream; it is at {stopped_at + 10})"
    assert f"following master n0 {expected}" in caplog.text
    assert database(replicas.stores["n2"]) == database(master)


async def test_a_slave_copied_while_writes_go_on_ends_with_the_masters_data(
    replicas: ReplicaSet,
) -> None:
    master = await replicas.start(count=2)
    await master.write([AddMessage(msg(i)) for i in range(500)])  # (a copy of some size)
    stop = asyncio.Event()

    async def producer(n: int) -> None:
        i = 0
        while not stop.is_set():
            await master.write([AddMessage(msg(n * 100_000 + i))])
            if i % 3 == 2:  # removals too: the copy and the stream must agree on deletes
                await master.write([RemoveMessage(Q, msg(n * 100_000 + i - 1).message_id)])
            i += 1

    producers = [asyncio.create_task(producer(n)) for n in (1, 2)]
    n2 = replicas.launch("n2")
    await until(lambda: n2.role == "slave" and n2.position > 0, "n2 copied")
    started = master.position
    await until(lambda: master.position > started + 50, "50 groups more")
    stop.set()
    await asyncio.gather(*producers)
    await replicas.caught_up("n2")
    assert database(n2) == database(master) and len(stored_ids(master)) > 500


async def test_a_slave_behind_the_backlog_gets_a_copy(
    replica_sets: Callable[..., ReplicaSet], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "dovecote.store.replicated")
    replicas = replica_sets(backlog_bytes=4096)
    master = await replicas.start()
    await master.write([AddMessage(msg(i)) for i in range(5)])
    await replicas.caught_up()
    await replicas.stop("n2")
    assert master.position == 1  # (a position is a group: here one write)
    for i in range(5, 100):
        await master.write([AddMessage(msg(i))])
    caplog.clear()
    replicas.launch("n2")
    await until(lambda: replicas.stores["n2"].role == "slave", "n2 a slave again")
    await replicas.caught_up("n2")
    assert "following master n0 from position 1 (snapshot; it is at 96)" in caplog.text
    assert database(replicas.stores["n2"]) == database(master)
    assert len(stored_ids(master)) == 100


async def test_an_old_master_with_groups_nobody_got_is_copied_over(
    replicas: ReplicaSet,
) -> None:
    master = await replicas.start()
    await master.write([AddMessage(msg(i)) for i in range(3)])
    await replicas.caught_up()
    await replicas.crash("n0")
    successor = await replicas.master()
    await successor.write([AddMessage(msg(3))])
    # What a master that died mid-group leaves: a group on its disk that no slave got,
    # at the position the next master then used for another.
    local = LevelDBPersistenceAdapter(replicas.root / "n0")
    await local.start()
    position, epoch = read_position(local.get)
    local.apply({POSITION_KEY: POSITION.pack(position + 1, epoch), b"zstray": b"x"}, sync=True)
    await local.stop()
    replicas.launch("n0")
    await until(lambda: replicas.stores["n0"].role == "slave", "n0 back as a slave")
    n0 = replicas.stores["n0"]

    # (Its position equals the successor's: "caught up" alone may come before the copy.)
    def stray_gone() -> bool:
        try:
            return n0.local.get(b"zstray") is None
        except StoreFailedError:  # closed for a moment while the copy replaces it
            return False

    await until(stray_gone, "the stray group copied over")
    await replicas.caught_up("n0")
    assert database(n0) == database(successor)
    assert stored_ids(n0) == stored_ids(successor) == [msg(i).message_id for i in range(4)]


# -- quorum, demotion -------------------------------------------------------------------------


async def test_without_a_quorum_writes_fail_and_resume_when_a_slave_returns(
    replicas: ReplicaSet,
) -> None:
    master = await replicas.start()
    await master.write([AddMessage(msg(0))])
    await replicas.crash("n1")
    await master.write([AddMessage(msg(1))])  # two of three are a quorum
    await replicas.crash("n2")
    # (A write the master ships before it sees the slave go fails too, but is on its disk.)
    await until(lambda: master.degraded is not None, "the master seeing n2 go")
    with pytest.raises(StoreFailedError, match=r"^no quorum: 1 of 3 replicas$"):
        await master.write([AddMessage(msg(2))])
    assert master.degraded == "no quorum: 1 of 3 replicas"
    assert master.recover().queues[Q] and master.role == "master"  # reads are served
    replicas.launch("n1")
    await until(lambda: master.degraded is None, "a quorum again")
    await master.write([AddMessage(msg(3))])
    await replicas.caught_up("n1")
    expected = [msg(i).message_id for i in (0, 1, 3)]
    assert stored_ids(master) == stored_ids(replicas.stores["n1"]) == expected


async def test_a_master_that_loses_its_session_refuses_writes_and_is_demoted(
    replicas: ReplicaSet,
) -> None:
    master = await replicas.start()
    await master.write([AddMessage(msg(0))])
    replicas.group.lose_session("n0")
    await until(lambda: master.role == "demoted", "n0 demoted")
    assert replicas.demoted["n0"] == ["the coordinator session was lost"]
    with pytest.raises(StoreFailedError, match="no longer master: the coordinator session"):
        await master.write([AddMessage(msg(1))])
    assert master.degraded is not None and "no longer master" in master.degraded
    successor = await replicas.master()  # the other two elect one of them
    assert successor is not master and stored_ids(successor) == [msg(0).message_id]


async def elected_beside_a_ghost(replicas: ReplicaSet) -> ReplicatedLevelDBStore:
    """n0 elected master beside a member that registers but never attaches (its broker
    hangs before replicating): a quorum registered, no slave."""
    n0 = replicas.launch("n0")
    await replicas.registered("n0")
    replicas.group.register(Member("ghost", "127.0.0.1:9", 0))
    await until(lambda: n0.role == "master", "n0 elected")
    return n0


async def test_an_elected_master_serves_once_a_quorum_of_slaves_attached(
    replicas: ReplicaSet,
) -> None:
    n0 = await elected_beside_a_ghost(replicas)
    with pytest.raises(StoreFailedError, match="no quorum: 1 of 3 replicas"):
        await n0.write([AddMessage(msg(0))])
    assert not replicas.starting["n0"].done()  # the broker would not open its transports
    replicas.launch("n1")
    assert await replicas.master() is n0
    await n0.write([AddMessage(msg(0))])


async def test_a_write_queued_when_the_master_stops_being_master_fails(
    replicas: ReplicaSet,
) -> None:
    master = await replicas.start()
    queued = master.write([AddMessage(msg(0))])  # in the group writer's queue...
    replicas.group.lose_session("n0")
    assert master.server is not None
    master.server.refuse("no longer master: the coordinator session was lost")  # ...as at once
    with pytest.raises(StoreFailedError, match="no longer master"):
        await queued
    assert master.message_count(Q) == 0


async def test_a_master_not_yet_serving_that_loses_its_session_just_waits(
    replicas: ReplicaSet,
) -> None:
    n0 = await elected_beside_a_ghost(replicas)
    replicas.group.lose_session("n0")
    await until(lambda: n0.role == "waiting", "n0 waiting")
    assert replicas.demoted["n0"] == [] and not replicas.starting["n0"].done()
    assert n0.server is not None and not n0.server.master


# -- the wire ---------------------------------------------------------------------------------


async def test_a_peer_that_is_not_a_slave_is_closed_with_one_line(
    replicas: ReplicaSet, caplog: pytest.LogCaptureFixture
) -> None:
    master = await replicas.start()
    host, port = master.replication_address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"\x00\x00\x00\x02\x63\xc0")  # frame type 99
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the master
    writer.close()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        f"slave 127.0.0.1:{writer.get_extra_info('sockname')[1]} dropped: an unknown frame type 99"
    ]
    await master.write([AddMessage(msg(0))])


async def test_a_silent_slave_is_dropped_after_the_peer_timeout(
    replica_sets: Callable[..., ReplicaSet],
) -> None:
    replicas = replica_sets(peer_timeout_s=0.6)
    master = await replicas.start()
    host, port = master.replication_address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(encode(Hello(1, "mute", 0, 0)))
    length, kind = frame_length(await reader.readexactly(HEADER.size))
    assert isinstance(decode(kind, await reader.readexactly(length)), Welcome)
    await until(lambda: master.server is not None and master.server.connected == 3, "mute in")
    started = asyncio.get_running_loop().time()
    while await asyncio.wait_for(reader.read(65536), 5):  # never answering
        pass
    assert asyncio.get_running_loop().time() - started >= 0.5
    await until(lambda: master.server is not None and master.server.connected == 2, "gone")
    writer.close()
