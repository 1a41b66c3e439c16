"""ActiveMQ's syncDurableSubs, a dovecote pair beside an ActiveMQ 5.17 pair (the same client
steps on each). A's connector asks B, as its bridge starts, for B's durable subscriptions
on the dynamically included topics (a BrokerSubscriptionInfo): a subscription deleted on
B while A was down takes A's network durable subscription with it, and one made on B
while A was down (its subscriber gone again) gets one on A, so that what A gets meanwhile
waits on B for the subscriber. Without the sync A knows of neither: it keeps forwarding
for the deleted one and holds nothing for the new one."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_network_durable_differential import bridged_once, places
from test_network_durable_differential import broker as durable_pair_broker

from dovecote.client import ConnectionFactory
from dovecote.core.destinations import topic
from networks import receive, send, topic_statistics, url, wait_for

INCLUDED = "net.sync.>"


@contextmanager
def broker(kind: str, role: str, workdir: Path, port: int, remote: int) -> Iterator[None]:
    """A (sync on, the test topics included) or B, of either kind."""
    with durable_pair_broker(kind, role, workdir, port, remote, False, synced=INCLUDED):
        yield


@contextmanager
def subscriber(port: int, name: str) -> Iterator[object]:
    with ConnectionFactory(url(port)).create_connection(client_id="watcher") as connection:
        connection.start()
        yield connection.create_session().create_durable_subscriber(topic(name), "w")


def subscribe_and_leave(port: int, name: str) -> None:
    with subscriber(port, name):
        pass


def consumers(port: int, name: str) -> int:
    return int(str(topic_statistics(port, name).get("consumerCount", 0)))


def enqueued(port: int, name: str) -> int:
    return int(str(topic_statistics(port, name).get("enqueueCount", 0)))


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_a_subscription_deleted_while_the_bridge_was_down_goes_on_a_too(
    tmp_path: Path, kind: str
) -> None:
    name = f"net.sync.gone.{uuid.uuid4().hex[:8]}"
    a_port, b_port, a_dir, b_dir = places(tmp_path)
    with broker(kind, "B", b_dir, b_port, 0):
        with broker(kind, "A", a_dir, a_port, b_port):
            bridged_once(a_port, b_port, name)
            with subscriber(b_port, name) as on_b:  # A's network subscription follows it
                wait_for(lambda: bool(send(a_port, topic(name), ["probe"], persistent=False)
                                      or on_b.receive(0.3)), "demand at A", 60)  # type: ignore[attr-defined]  # fmt: skip
            assert consumers(a_port, name) == 1
        with ConnectionFactory(url(b_port)).create_connection(client_id="watcher") as c:
            c.create_session().unsubscribe("w")  # A is down: it is not told
        with broker(kind, "A", a_dir, a_port, b_port):
            bridged_once(a_port, b_port, name)
            wait_for(lambda: consumers(a_port, name) == 0, "A's network subscription gone", 30)


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_a_subscription_made_while_the_bridge_was_down_gets_what_a_receives(
    tmp_path: Path, kind: str
) -> None:
    name = f"net.sync.new.{uuid.uuid4().hex[:8]}"
    a_port, b_port, a_dir, b_dir = places(tmp_path)
    sent = [f"n{i}" for i in range(20)]
    with broker(kind, "B", b_dir, b_port, 0):
        with broker(kind, "A", a_dir, a_port, b_port):
            bridged_once(a_port, b_port, name)
        subscribe_and_leave(b_port, name)  # A is down: it never hears of it
        with broker(kind, "A", a_dir, a_port, b_port):
            bridged_once(a_port, b_port, name)
            wait_for(lambda: consumers(a_port, name) == 1, "A's network subscription", 30)
            send(a_port, topic(name), sent)
            wait_for(lambda: enqueued(b_port, name) >= 20, "the 20 on B", 30)
        with subscriber(b_port, name) as on_b:  # A stopped: they wait on B
            assert receive(on_b, 20, timeout=5.0) == sent  # type: ignore[arg-type]
