"""Request/reply across a network (as ActiveMQ's bridgeTempDestinations, on by default):
a requester on B asks through a queue whose service is on A and names its temporary queue
on B as reply-to; A's bridge makes that temporary destination on A when B's advisory tells
of it, so the service's reply, sent on A, goes back to the requester on B."""

from __future__ import annotations

import uuid
from pathlib import Path

from brokers import running_broker
from networks import ask_across, connector_toml, wait_for
from ports import free_port


def test_a_reply_to_a_temporary_queue_crosses_back_over_the_bridge(tmp_path: Path) -> None:
    name = f"net.svc.{uuid.uuid4().hex[:8]}"
    a_port, b_port = free_port(), free_port()
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    with running_broker(connector_toml("A", [b_port], name="a-b"), tmp_path / "a",
                        openwire_port=a_port) as a, \
            running_broker(connector_toml("B", [a_port], name="b-a"), tmp_path / "b",
                           openwire_port=b_port) as b:  # fmt: skip
        wait_for(lambda: "bridge to broker B" in a.log_text(), "A->B")
        wait_for(lambda: "bridge to broker A" in b.log_text(), "B->A")
        ask_across(a_port, b_port, name)
        assert "forwarding temp-queue://" in a.log_text()  # the reply queue's demand
