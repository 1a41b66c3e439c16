"""A dovecote ``masterslave:`` network connector following a real ActiveMQ 5.17 shared-store
pair (compatibility N2): two ActiveMQ brokers on one KahaDB directory, the second a slave
waiting on its lock with no port open; the master is killed with SIGKILL while dovecote
forwards persistent messages to the pair, the slave takes the store, the connector bridges
to it, and every message arrives once."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from activemq import accepts, running_activemq
from brokers import running_broker
from dovecote.core.destinations import queue
from networks import Collector, connector_toml, quiet_for, send, send_in_background, wait_for
from ports import free_port

COUNT = 2000 if os.environ.get("DOVECOTE_LONG") else 400


def test_a_masterslave_connector_follows_an_activemq_pair_across_a_kill_9_of_the_master(
    tmp_path: Path,
) -> None:
    name = f"net.msamq.{uuid.uuid4().hex[:8]}"
    bodies = [f"m{i}" for i in range(COUNT)]
    master_port, slave_port = free_port(), free_port()
    a_config = connector_toml("A", [master_port, slave_port], name="a-to-amq-pair",
                              kind="masterslave", initial_reconnect_delay_ms=100,
                              max_reconnect_delay_ms=500)  # fmt: skip
    kahadb = tmp_path / "kahadb"
    a_dir = tmp_path / "a"
    a_dir.mkdir()
    collector = Collector([master_port, slave_port], queue(name))
    with running_activemq(openwire_port=master_port, kahadb=kahadb) as master, \
            running_activemq(openwire_port=slave_port, kahadb=kahadb, standby=True) as slave, \
            running_broker(a_config, a_dir) as a:  # fmt: skip
        wait_for(lambda: "bridge to broker" in a.log_text(), "the bridge to the master")
        collector.start()
        sent = send_in_background(a.openwire_port, queue(name), bodies)
        wait_for(lambda: len(collector.bodies) >= COUNT // 4, "forwarding under way")
        master.process.kill()
        master.process.wait()
        assert len(collector.bodies) < COUNT, "all had gone before the kill"
        wait_for(lambda: slave.process.poll() is None and accepts(slave_port),
                 "the slave taking over", 90)  # fmt: skip
        wait_for(lambda: a.log_text().count("bridge to broker") >= 2, "the bridge to the slave",
                 60)  # fmt: skip
        wait_for(lambda: len(set(collector.bodies)) >= COUNT, "the rest", timeout=90)
        assert sent.wait(30)
        assert f"127.0.0.1:{slave_port} started" in a.log_text()  # the slave's address
        assert quiet_for(collector, 2.0)
        collector.done.set()
        collector.join(10)
    assert sorted(set(collector.bodies)) == sorted(bodies), "lost"
    assert len(collector.bodies) == COUNT, "delivered twice (not as a redelivery)"


def test_a_duplex_masterslave_connector_brings_an_activemq_pairs_messages_across_a_kill_9(
    tmp_path: Path,
) -> None:
    """The other way: messages stored on the ActiveMQ pair reach a consumer on dovecote over
    the duplex connector's bridge back, the master killed mid-stream; the slave's redelivery
    of what was in flight is dropped by dovecote's duplicate check."""
    name = f"net.msamq.back.{uuid.uuid4().hex[:8]}"
    bodies = [f"b{i}" for i in range(COUNT)]
    master_port, slave_port = free_port(), free_port()
    a_config = connector_toml("A", [master_port, slave_port], name="a-with-amq-pair",
                              kind="masterslave", duplex=True, initial_reconnect_delay_ms=100,
                              max_reconnect_delay_ms=500)  # fmt: skip
    kahadb = tmp_path / "kahadb"
    a_dir = tmp_path / "a"
    a_dir.mkdir()
    with running_activemq(openwire_port=master_port, kahadb=kahadb) as master, \
            running_activemq(openwire_port=slave_port, kahadb=kahadb, standby=True) as slave, \
            running_broker(a_config, a_dir) as a:  # fmt: skip
        send(master_port, queue(name), bodies)
        wait_for(lambda: "bridge to broker" in a.log_text(), "the bridge to the master")
        collector = Collector(a.openwire_port, queue(name))
        collector.start()
        wait_for(lambda: len(collector.bodies) >= COUNT // 4, "forwarding under way")
        master.process.kill()
        master.process.wait()
        assert len(collector.bodies) < COUNT, "all had gone before the kill"
        wait_for(lambda: slave.process.poll() is None and accepts(slave_port),
                 "the slave taking over", 90)  # fmt: skip
        wait_for(lambda: len(set(collector.bodies)) >= COUNT, "the rest", timeout=90)
        assert quiet_for(collector, 2.0)
        collector.done.set()
        collector.join(10)
    assert sorted(set(collector.bodies)) == sorted(bodies), "lost"
    assert len(collector.bodies) == COUNT, "delivered twice (not as a redelivery)"
