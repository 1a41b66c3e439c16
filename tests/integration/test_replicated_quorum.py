"""A replicated group (issue 35) when its members or its ZooKeeper go away: a slave paused
with SIGSTOP costs nothing while a quorum remains and catches up when resumed; with two of
three brokers down the master refuses writes with a clear error, and takes them again once
one is back; ZooKeeper stopped makes the master stop serving (it cannot know it is still
master) and, restarted, the group elects a master again with every message it held."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokergroup import GroupBroker, caught_up, listening, master_of, running_group, wait_for
from dovecote.protocol.stomp import Frame
from stomplink import Link
from zookeeper import ZooKeeperServer, running_zookeeper, zookeeper_available

pytestmark = pytest.mark.skipif(not zookeeper_available(), reason="no ZooKeeper installed")
QUEUE = "/queue/replicated.quorum"


@pytest.fixture(scope="module")
def zk() -> Iterator[ZooKeeperServer]:
    with running_zookeeper() as server:
        yield server


def send(broker: GroupBroker, body: str) -> Frame:
    """A persistent SEND with a receipt: the RECEIPT, or the ERROR that answers it."""
    link = Link(broker.stomp_port)
    try:
        link.send(Frame("SEND", (("destination", QUEUE), ("persistent", "true"),
                                 ("receipt", body)), body.encode()))  # fmt: skip
        return link.read()
    finally:
        link.close()


def backlog(broker: GroupBroker, expected: int) -> list[str]:
    """What the queue holds, consumed: taken again until ``expected`` messages came (a
    subscription's first dispatch, paged in from the store, may follow its receipt under
    load, and a take then ends before it)."""
    taken: list[str] = []

    def take() -> bool:
        link = Link(broker.stomp_port)
        try:
            taken.extend(frame.body.decode() for frame in link.take_backlog(QUEUE))
        finally:
            link.close()
        return len(taken) >= expected

    wait_for(take, 10, f"{expected} messages on the queue")
    return taken


def test_a_paused_slave_costs_nothing_and_without_a_quorum_writes_stop_until_one_returns(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    with running_group(zk.address, tmp_path) as brokers:
        master = master_of(brokers)
        paused, other = [b for b in brokers if b is not master]
        paused.wait_role("slave")
        other.wait_role("slave")
        paused.signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            answers = [send(master, f"while-paused-{i}") for i in range(20)]
            took = time.monotonic() - started
            assert [a.command for a in answers] == ["RECEIPT"] * 20
            assert took < 10, f"20 sends took {took:.1f}s with one slave paused"
        finally:
            paused.signal(signal.SIGCONT)
        wait_for(lambda: caught_up(paused, master), 30, "the paused slave caught up")

        # Two of three down: the master cannot have a write held by a quorum.
        paused.kill()
        other.kill()
        started = time.monotonic()
        refused = send(master, "without-quorum")
        took = time.monotonic() - started
        print(f"\nwithout a quorum: a send refused after {took:.2f}s")
        assert took < 15, "a write without a quorum stalled"
        assert refused.command == "ERROR", refused
        assert "no quorum: 1 of 3 replicas" in refused.get("message", ""), refused
        status, health = master.api("/api/health")
        assert status == 200 and health["role"] == "master" and health["status"] == "degraded"
        assert "no quorum" in (health["store_degraded"] or "")

        # One comes back: it catches up as a slave, and writes are taken again.
        other.start()
        other.wait_role("slave")
        wait_for(lambda: send(master, "with-quorum").command == "RECEIPT", 30, "writes resume")
        expected = {f"while-paused-{i}" for i in range(20)} | {"with-quorum"}
        assert set(backlog(master, len(expected))) >= expected


def test_zookeeper_restarted_the_group_elects_a_master_again_with_every_message(
    tmp_path: Path,
) -> None:
    with running_zookeeper(tmp_path / "zk") as zk, running_group(zk.address, tmp_path) as brokers:
        master = master_of(brokers)
        for broker in brokers:
            if broker is not master:
                broker.wait_role("slave")
        bodies = [f"before-restart-{i}" for i in range(10)]
        assert [send(master, b).command for b in bodies] == ["RECEIPT"] * 10
        zk.stop()
        # Without ZooKeeper no broker can know it is master: the master stops serving.
        took = wait_for(lambda: not listening(master.stomp_port), 20, "the master stops serving")
        print(f"\nZooKeeper stopped: the master stopped serving after {took:.2f}s")
        master.wait_role("waiting", "slave", "starting")
        zk.start()
        restarted = time.monotonic()
        new_master = master_of(brokers)
        wait_for(lambda: listening(new_master.stomp_port), 20, "the new master serves")
        print(f"\nZooKeeper restarted: a master serves again after "
              f"{time.monotonic() - restarted:.2f}s")  # fmt: skip
        assert sorted(backlog(new_master, len(bodies))) == sorted(bodies)


@pytest.mark.skipif(not os.environ.get("DOVECOTE_LONG"), reason="long form: DOVECOTE_LONG=1")
def test_long_a_master_paused_past_its_session_is_replaced_and_rejoins_as_a_slave(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    with running_group(zk.address, tmp_path) as brokers:
        master = master_of(brokers)
        others = [b for b in brokers if b is not master]
        for broker in others:
            broker.wait_role("slave")
        bodies = [f"before-pause-{i}" for i in range(10)]
        assert [send(master, b).command for b in bodies] == ["RECEIPT"] * 10
        master.signal(signal.SIGSTOP)
        try:
            new_master = master_of(others)
        finally:
            master.signal(signal.SIGCONT)
        # Resumed, it finds its session expired: it stops serving and follows the new one.
        master.wait_role("slave")
        assert not listening(master.stomp_port)
        wait_for(lambda: caught_up(master, new_master), 30, "the old master caught up")
        assert send(new_master, "after").command == "RECEIPT"
        assert sorted(backlog(new_master, len(bodies) + 1)) == sorted([*bodies, "after"])
