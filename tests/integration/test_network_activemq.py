"""Network connectors against a real ActiveMQ 5.17: a dovecote connector bridging to an
ActiveMQ broker forwards only where ActiveMQ has consumers (its consumer advisories), queue
messages store-and-forward, topic messages to its subscribers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activemq import ActiveMQ, running_activemq
from brokers import BrokerProcess, running_broker
from dovecote.core.destinations import queue, topic
from networks import (
    ask_across,
    browse_count,
    connector_toml,
    consumer,
    quiet,
    receive,
    send,
    wait_for,
)
from ports import free_port
from stompclient import Client


@pytest.fixture(scope="module")
def amq() -> Iterator[ActiveMQ]:
    with running_activemq() as broker:
        yield broker


@pytest.fixture(scope="module")
def bridged(amq: ActiveMQ, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """dovecote "A" with a connector to the ActiveMQ broker, once the bridge is up."""
    config = connector_toml("A", [amq.openwire_port], name="to-amq")
    with running_broker(config, tmp_path_factory.mktemp("net-a")) as a:
        wait_for(lambda: "bridge to broker" in a.log_text(), "the bridge to ActiveMQ")
        yield a


def test_queue_messages_go_only_where_activemq_has_a_consumer(
    amq: ActiveMQ, bridged: BrokerProcess
) -> None:
    name = f"net.q.{uuid.uuid4().hex[:8]}"
    marker = queue(f"{name}.marker")
    bodies = [f"m{i}" for i in range(50)]
    with consumer(amq.openwire_port, marker) as on_marker:
        wait_for(lambda: f"forwarding queue://{marker.name} to" in bridged.log_text(), "demand")
        send(bridged.openwire_port, queue(name), bodies)
        send(bridged.openwire_port, marker, ["after"])
        # The marker went over (ActiveMQ has its consumer); the 50 sent before it did not.
        assert receive(on_marker, 1) == ["after"]
    assert browse_count(bridged.openwire_port, queue(name)) == 50
    with consumer(amq.openwire_port, queue(name)) as remote:
        assert receive(remote, 50) == bodies
        assert quiet(remote)
    assert browse_count(bridged.openwire_port, queue(name)) == 0


def test_topic_messages_reach_activemq_subscribers(amq: ActiveMQ, bridged: BrokerProcess) -> None:
    name = f"net.t.{uuid.uuid4().hex[:8]}"
    with (
        consumer(amq.openwire_port, topic(name)) as first,
        consumer(amq.openwire_port, topic(name)) as second,
    ):
        wait_for(lambda: f"forwarding topic://{name} to" in bridged.log_text(), "demand")
        bodies = [f"t{i}" for i in range(20)]
        send(bridged.openwire_port, topic(name), bodies, persistent=False)
        # Conduit: one network consumer for both, each subscriber gets every message once.
        assert receive(first, 20) == bodies
        assert receive(second, 20) == bodies
        assert quiet(first) and quiet(second)
    assert bridged.log_text().count(f"forwarding topic://{name} to") == 1


def test_an_activemq_network_connector_to_dovecote_forwards_to_its_consumers(
    tmp_path: Path,
) -> None:
    """The other way: ActiveMQ's own <networkConnector> bridges to dovecote, on dovecote's
    advisories, and dovecote stores what it forwards."""
    name = f"net.in.{uuid.uuid4().hex[:8]}"
    bodies = [f"m{i}" for i in range(100)]
    port = free_port()
    connector = f'<networkConnector name="to-dovecote" uri="static:(tcp://127.0.0.1:{port})"/>'
    with running_broker('[broker]\nname = "D"\n', tmp_path, openwire_port=port) as d, \
            running_activemq(network_connectors=connector) as amq:  # fmt: skip
        wait_for(lambda: "network bridge from broker" in d.log_text(), "ActiveMQ's bridge")
        send(amq.openwire_port, queue(f"{name}.nobody"), ["stays"])
        with consumer(port, queue(name)) as on_d:
            # ActiveMQ subscribes on its side once dovecote's consumer advisory reached it;
            # what it holds then goes over.
            send(amq.openwire_port, queue(name), bodies)
            assert receive(on_d, 100) == bodies
            assert quiet(on_d)
        assert browse_count(port, queue(f"{name}.nobody")) == 0
        assert browse_count(amq.openwire_port, queue(f"{name}.nobody")) == 1


def test_an_activemq_duplex_connector_bridges_both_ways_over_one_connection(
    tmp_path: Path,
) -> None:
    """ActiveMQ's duplex="true" connector to dovecote: dovecote bridges back over the same
    connection, so messages flow to consumers on either side."""
    name = f"net.duplex.{uuid.uuid4().hex[:8]}"
    port = free_port()
    connector = (
        f'<networkConnector name="duplex-to-dovecote" duplex="true" '
        f'uri="static:(tcp://127.0.0.1:{port})"/>'
    )
    with running_broker('[broker]\nname = "D"\n', tmp_path, openwire_port=port) as d, \
            running_activemq(network_connectors=connector) as amq:  # fmt: skip
        wait_for(lambda: "duplex bridge back to broker" in d.log_text(), "the duplex bridge")
        assert "started" in d.log_text().split("duplex bridge back to broker", 1)[1]
        to_amq = [f"to-amq-{i}" for i in range(50)]
        to_d = [f"to-d-{i}" for i in range(50)]
        with (
            consumer(amq.openwire_port, queue(f"{name}.east")) as on_amq,
            consumer(port, queue(f"{name}.west")) as on_d,
        ):
            wait_for(lambda: f"forwarding queue://{name}.east to" in d.log_text(), "demand at D")
            send(port, queue(f"{name}.east"), to_amq)
            send(amq.openwire_port, queue(f"{name}.west"), to_d)
            assert receive(on_amq, 50) == to_amq
            assert receive(on_d, 50) == to_d
            assert quiet(on_amq) and quiet(on_d)


def test_a_dovecote_duplex_connector_to_activemq_carries_both_directions(
    amq: ActiveMQ, tmp_path: Path
) -> None:
    """dovecote's duplex = true connector to ActiveMQ: ActiveMQ bridges back over the same
    connection, configured from the networkProperties of our BrokerInfo (without them its
    bridge back had no producer for our forwards and closed the connection on the first
    one), and messages reach consumers on either side, once, without the bridge restarting."""
    name = f"net.dxo.{uuid.uuid4().hex[:8]}"
    config = connector_toml("A", [amq.openwire_port], name="dx-to-amq", duplex=True)
    with running_broker(config, tmp_path) as a:
        wait_for(lambda: "bridge to broker" in a.log_text(), "the bridge to ActiveMQ")
        to_amq = [f"to-amq-{i}" for i in range(50)]
        to_a = [f"to-a-{i}" for i in range(50)]
        with (
            consumer(amq.openwire_port, queue(f"{name}.east")) as on_amq,
            consumer(a.openwire_port, queue(f"{name}.west")) as on_a,
        ):
            wait_for(lambda: f"forwarding queue://{name}.east to" in a.log_text(), "demand at A")
            send(a.openwire_port, queue(f"{name}.east"), to_amq)
            send(amq.openwire_port, queue(f"{name}.west"), to_a)
            assert receive(on_amq, 50) == to_amq
            assert receive(on_a, 50) == to_a
            assert quiet(on_amq) and quiet(on_a)
        # One bridge the whole time: ActiveMQ never closed it.
        assert a.log_text().count("bridge to broker") == 1
        assert browse_count(a.openwire_port, queue(f"{name}.east")) == 0
        assert browse_count(amq.openwire_port, queue(f"{name}.west")) == 0


def test_a_forwarded_message_shows_stomp_subscribers_what_activemq_shows(
    amq: ActiveMQ, bridged: BrokerProcess, tmp_path: Path
) -> None:
    """A message that crossed a bridge, received by a STOMP subscriber: ActiveMQ shows no
    trace of its brokerPath; dovecote (which keeps the path in an internal property)
    must not either: the same headers on both."""
    name = f"net.stomp.{uuid.uuid4().hex[:8]}"
    with Client(("127.0.0.1", amq.stomp_port)) as on_amq:
        on_amq.subscribe(f"/queue/{name}")
        wait_for(lambda: f"forwarding queue://{name} to" in bridged.log_text(), "demand")
        send(bridged.openwire_port, queue(name), ["over"])
        at_amq = on_amq.receive()
    b_port = free_port()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with running_broker('[broker]\nname = "B"\n', tmp_path / "b", openwire_port=b_port) as b, \
            running_broker(connector_toml("A", [b_port]), tmp_path / "a") as a:  # fmt: skip
        wait_for(lambda: "bridge to broker B" in a.log_text(), "A->B")
        with Client(b.stomp_address) as on_b:
            on_b.subscribe(f"/queue/{name}")
            wait_for(lambda: f"forwarding queue://{name} to" in a.log_text(), "demand")
            send(a.openwire_port, queue(name), ["over"])
            at_b = on_b.receive()
    assert at_b.body == at_amq.body == "over"
    assert [h for h in at_b.headers if "brokerpath" in h.lower() or h.startswith("dovecote.")] == []
    # (dovecote writes ack and content-length on every STOMP 1.2 delivery, bridged or not;
    # ActiveMQ leaves them out for an auto-ack text message: not this test's concern.)
    assert set(at_b.headers) - {"ack", "content-length"} == set(at_amq.headers)


def test_request_reply_across_a_duplex_bridge_with_activemq_both_ways(
    amq: ActiveMQ, tmp_path: Path
) -> None:
    """Temporary reply queues cross the bridge as ActiveMQ's bridgeTempDestinations: a
    requester on either broker, its service on the other, over dovecote's duplex connector
    to ActiveMQ."""
    name = f"net.rr.{uuid.uuid4().hex[:8]}"
    config = connector_toml("A", [amq.openwire_port], name="rr-to-amq", duplex=True)
    with running_broker(config, tmp_path) as a:
        wait_for(lambda: "bridge to broker" in a.log_text(), "the bridge to ActiveMQ")
        ask_across(a.openwire_port, amq.openwire_port, f"{name}.on-dovecote")
        ask_across(amq.openwire_port, a.openwire_port, f"{name}.on-activemq")
