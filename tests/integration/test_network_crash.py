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
from brokers import BrokerProcess, running_broker
from dovecote.core.destinations import queue
from networks import Collector, admin_get, connector_toml, quiet_for, send, wait_for
from ports import free_port
from tcpproxy import AnswerHolder

COUNT = 3000 if os.environ.get("DOVECOTE_LONG") else 600
PAIR_COUNT = 20_000 if os.environ.get("DOVECOTE_LONG") else 5000
"""Between two dovecotes a backlog of 600 can all be forwarded (14k msg/s compiled) between
two polls of the collector: a kill must fall in the middle of the stream."""


def test_kill_9_of_the_forwarding_dovecote_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """A is killed with messages ActiveMQ stored whose answers it never got (a proxy drops
    ActiveMQ's answers once forwarding is under way): A sends them again after its restart
    and ActiveMQ drops them."""
    name = f"net.crash.{uuid.uuid4().hex[:8]}"
    bodies = [f"m{i}" for i in range(COUNT)]
    port = free_port()
    with running_activemq() as amq:
        proxy = AnswerHolder(amq.openwire_port)
        config = connector_toml("A", [proxy.port], name="to-amq")
        collector = Collector(amq.openwire_port, queue(name))
        try:
            with running_broker(config, tmp_path, openwire_port=port) as a:
                forward_until_unanswered(a, proxy, collector, name, bodies)
                a.process.kill()
                a.process.wait()
            proxy.hold.clear()
            with running_broker(config, tmp_path, openwire_port=port) as a:
                collect_the_rest(a, collector, name)
        finally:
            proxy.close()
    assert sorted(collector.bodies) == sorted(bodies), "lost or duplicated"
    assert collector.bodies == bodies  # and in order


def test_kill_9_of_the_receiving_activemq_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """ActiveMQ is killed with sends of the bridge stored there and never answered: the
    bridge reaches it through a proxy that, once forwarding is under way, drops ActiveMQ's
    answers, so the kill comes while ActiveMQ holds messages that A still holds too (A acks
    its copy only on the answer). A sends them again after the restart and ActiveMQ drops
    what it already has."""
    name = f"net.crash.{uuid.uuid4().hex[:8]}"
    bodies = [f"m{i}" for i in range(COUNT)]
    amq_port = free_port()
    base = tmp_path / "amq"
    base.mkdir()
    with running_activemq(base, amq_port) as amq:
        proxy = AnswerHolder(amq_port)
        config = connector_toml("A", [proxy.port], name="to-amq", initial_reconnect_delay_ms=200)
        collector = Collector(amq_port, queue(name))
        (tmp_path / "a").mkdir()
        try:
            with running_broker(config, tmp_path / "a") as a:
                forward_until_unanswered(a, proxy, collector, name, bodies)
                amq.process.kill()
                amq.process.wait()
                proxy.hold.clear()
                with running_activemq(base, amq_port):
                    collect_the_rest(a, collector, name)
        finally:
            proxy.close()
    assert sorted(set(collector.bodies)) == sorted(bodies), "lost"
    assert len(collector.bodies) == COUNT, "delivered twice (not as a redelivery)"


def forward_until_unanswered(
    a: BrokerProcess, proxy: AnswerHolder, collector: Collector, name: str, bodies: list[str]
) -> None:
    """Send ``bodies`` to A and let its bridge forward a quarter of them; then hold
    ActiveMQ's answers until ActiveMQ has a message A still holds (stored, not answered)."""
    send(a.openwire_port, queue(name), bodies)
    wait_for(lambda: "bridge to broker" in a.log_text(), "the bridge")
    collector.start()
    wait_for(lambda: len(collector.bodies) >= len(bodies) // 4, "forwarding under way")
    proxy.hold.set()
    wait_for(
        lambda: len(collector.bodies) + held_on(a, name) > len(bodies),
        "ActiveMQ to hold a send A still holds (stored there, not answered)",
    )


def collect_the_rest(a: BrokerProcess, collector: Collector, name: str) -> None:
    """After a restart: A's sends answered again, then all of them received and nothing more
    coming (a duplicate would come after the last one)."""
    wait_for(lambda: held_on(a, name) == 0, "A's sends again answered", timeout=60)
    wait_for(lambda: len(set(collector.bodies)) >= COUNT, "the rest")
    assert quiet_for(collector), "delivered twice"
    collector.done.set()
    collector.join(10)


def held_on(broker: BrokerProcess, name: str) -> int:
    """Messages broker A still holds on queue ``name`` (its bridge's unanswered ones too)."""
    return int(admin_get(broker.console_port, f"/api/queues/{name}")["size"])


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
