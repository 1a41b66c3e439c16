"""A bridge's store and forward across a kill -9 (compatibility N1): persistent queue
messages moving from dovecote to a real ActiveMQ 5.17 while either side is killed and
restarted arrive all, none twice (the forwarding broker acks its copy only once the
receiving broker answered; the receiver drops what it already has)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from activemq import running_activemq
from brokers import running_broker
from dovecote.core.destinations import queue
from networks import Collector, connector_toml, quiet_for, send, wait_for
from ports import free_port

COUNT = 3000 if os.environ.get("DOVECOTE_LONG") else 600
PAIR_COUNT = 20_000 if os.environ.get("DOVECOTE_LONG") else 5000
"""Between two dovecotes a backlog of 600 can all be forwarded (14k msg/s compiled) between
two polls of the collector: a kill must fall in the middle of the stream."""


def test_kill_9_of_the_forwarding_dovecote_loses_and_repeats_nothing(tmp_path: Path) -> None:
    name = f"net.crash.{uuid.uuid4().hex[:8]}"
    bodies = [f"m{i}" for i in range(COUNT)]
    port = free_port()
    with running_activemq() as amq:
        config = connector_toml("A", [amq.openwire_port], name="to-amq")
        collector = Collector(amq.openwire_port, queue(name))
        with running_broker(config, tmp_path, openwire_port=port) as a:
            send(port, queue(name), bodies)
            wait_for(lambda: "bridge to broker" in a.log_text(), "the bridge")
            collector.start()
            wait_for(lambda: len(collector.bodies) >= COUNT // 4, "forwarding under way")
            a.process.kill()  # mid-stream: some sent and answered, some not yet acked here
            a.process.wait()
        moved = len(collector.bodies)
        assert moved < COUNT, "all had gone before the kill: nothing was tested"
        with running_broker(config, tmp_path, openwire_port=port):
            wait_for(lambda: len(collector.bodies) >= COUNT, "the rest after the restart")
            collector.done.set()
            collector.join(10)
    assert sorted(collector.bodies) == sorted(bodies), "lost or duplicated"
    assert collector.bodies == bodies  # and in order


def test_kill_9_of_the_receiving_activemq_loses_and_repeats_nothing(tmp_path: Path) -> None:
    name = f"net.crash.{uuid.uuid4().hex[:8]}"
    bodies = [f"m{i}" for i in range(COUNT)]
    amq_port = free_port()
    base = tmp_path / "amq"
    base.mkdir()
    with running_activemq(base, amq_port) as amq:
        config = connector_toml("A", [amq_port], name="to-amq", initial_reconnect_delay_ms=200)
        (tmp_path / "a").mkdir()
        with running_broker(config, tmp_path / "a") as a:
            send(a.openwire_port, queue(name), bodies)
            wait_for(lambda: "bridge to broker" in a.log_text(), "the bridge")
            collector = Collector(amq_port, queue(name))
            collector.start()
            wait_for(lambda: len(collector.bodies) >= COUNT // 4, "forwarding under way")
            amq.process.kill()  # mid-stream: sends stored there and not yet answered
            amq.process.wait()
            assert len(collector.bodies) < COUNT, "all had gone before the kill"
            with running_activemq(base, amq_port):
                wait_for(lambda: len(set(collector.bodies)) >= COUNT, "the rest", timeout=60)
                collector.done.set()
                collector.join(10)
    assert sorted(set(collector.bodies)) == sorted(bodies), "lost"
    assert len(collector.bodies) == COUNT, "delivered twice (not as a redelivery)"


@pytest.mark.parametrize("killed", ["forwarding", "receiving"])
def test_kill_9_of_either_dovecote_of_a_bridge_loses_and_repeats_nothing(
    tmp_path: Path, killed: str
) -> None:
    """dovecote A bridged to dovecote B: the receiving dovecote drops what a bridge sends
    again after a crash (its audit of A's sends, read back from its queue after its own
    restart)."""
    name = f"net.crash.{uuid.uuid4().hex[:8]}"
    bodies = [f"m{i}" for i in range(PAIR_COUNT)]
    a_port, b_port = free_port(), free_port()
    a_config = connector_toml("A", [b_port], name="a-to-b", initial_reconnect_delay_ms=200)
    b_config = '[broker]\nname = "B"\n'
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    collector = Collector(b_port, queue(name))
    with running_broker(b_config, b_dir, openwire_port=b_port) as b, \
            running_broker(a_config, a_dir, openwire_port=a_port) as a:  # fmt: skip
        send(a_port, queue(name), bodies)
        wait_for(lambda: "bridge to broker B" in a.log_text(), "the bridge")
        collector.start()
        wait_for(lambda: len(collector.bodies) >= PAIR_COUNT // 10, "forwarding under way")
        victim = a if killed == "forwarding" else b
        victim.process.kill()
        victim.process.wait()
    assert len(collector.bodies) < PAIR_COUNT, "all had gone before the kill"
    with running_broker(b_config, b_dir, openwire_port=b_port), \
            running_broker(a_config, a_dir, openwire_port=a_port):  # fmt: skip
        wait_for(lambda: len(set(collector.bodies)) >= PAIR_COUNT, "the rest", timeout=60)
        assert quiet_for(collector)
        collector.done.set()
        collector.join(10)
    assert sorted(set(collector.bodies)) == sorted(bodies), "lost"
    assert len(collector.bodies) == PAIR_COUNT, "delivered twice (not as a redelivery)"
