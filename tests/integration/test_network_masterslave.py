"""A ``masterslave:`` network connector following a real shared-store master/slave pair
(compatibility N2): two dovecote brokers on one journal directory, the second waiting on
its lock; the master is killed with SIGKILL mid-stream, the slave takes the store, the
connector bridges to it, and every persistent message arrives once."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from brokers import running_broker
from dovecote.core.destinations import queue
from networks import (
    Collector,
    connector_toml,
    quiet_for,
    send_in_background,
    standby_broker,
    wait_for,
)
from ports import free_port

COUNT = 2000 if os.environ.get("DOVECOTE_LONG") else 400


def test_a_masterslave_connector_follows_the_pair_across_a_kill_9_of_the_master(
    tmp_path: Path,
) -> None:
    name = f"net.ms.{uuid.uuid4().hex[:8]}"
    bodies = [f"m{i}" for i in range(COUNT)]
    master_port, slave_port = free_port(), free_port()
    a_config = connector_toml("A", [master_port, slave_port], name="a-to-pair",
                              kind="masterslave", initial_reconnect_delay_ms=100,
                              max_reconnect_delay_ms=500)  # fmt: skip
    pair_config = '[broker]\nname = "B"\n'
    a_dir, pair_dir = tmp_path / "a", tmp_path / "pair"
    a_dir.mkdir()
    pair_dir.mkdir()
    collector = Collector([master_port, slave_port], queue(name))
    with running_broker(pair_config, pair_dir, openwire_port=master_port) as master, \
            standby_broker(pair_config, pair_dir, slave_port) as slave, \
            running_broker(a_config, a_dir) as a:  # fmt: skip
        wait_for(lambda: "bridge to broker B" in a.log_text(), "the bridge to the master")
        collector.start()
        sent = send_in_background(a.openwire_port, queue(name), bodies)
        wait_for(lambda: len(collector.bodies) >= COUNT // 4, "forwarding under way")
        master.process.kill()
        master.process.wait()
        assert len(collector.bodies) < COUNT, "all had gone before the kill"
        wait_for(lambda: "dovecote ready" in slave.log_text(), "the slave taking over", 60)
        wait_for(lambda: a.log_text().count("bridge to broker B") >= 2, "the bridge to the slave")
        wait_for(lambda: len(set(collector.bodies)) >= COUNT, "the rest", timeout=90)
        assert sent.wait(30)
        assert f"127.0.0.1:{slave_port} started" in a.log_text()  # the slave's address
        assert quiet_for(collector)
        collector.done.set()
        collector.join(10)
    assert sorted(set(collector.bodies)) == sorted(bodies), "lost"
    assert len(collector.bodies) == COUNT, "delivered twice (not as a redelivery)"
