"""Network durable subscriptions (ActiveMQ's DurableConduitBridge): one per topic on the
forwarding broker, named NC-DS_<broker>_<topic>. Deleting the remote durable subscription
deletes the network one, seen through the admin API (test_network_durable_differential.py
has the same and dynamic_only side by side with ActiveMQ, seen by clients)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from brokers import BrokerProcess, running_broker
from dovecote.client import ConnectionFactory
from dovecote.client.connection import MessageConsumer
from dovecote.core.destinations import topic
from networks import admin_get, connector_toml, quiet, receive, send, url, wait_for
from ports import free_port


def network_subscription(broker: BrokerProcess, name: str) -> dict[str, Any] | None:
    """The network durable subscription broker A keeps for topic ``name``, if any."""
    for found in admin_get(broker.console_port, "/api/subscriptions"):
        if found["name"] == f"NC-DS_A_{name}":
            return dict(found)
    return None


@contextmanager
def durable_subscriber(port: int, name: str) -> Iterator[MessageConsumer]:
    with ConnectionFactory(url(port)).create_connection(client_id="watcher") as connection:
        connection.start()
        yield connection.create_session().create_durable_subscriber(topic(name), "w")


def unsubscribe(port: int) -> None:
    with ConnectionFactory(url(port)).create_connection(client_id="watcher") as connection:
        connection.create_session().unsubscribe("w")


def dirs(tmp_path: Path) -> tuple[Path, Path]:
    for name in ("a", "b"):
        (tmp_path / name).mkdir(exist_ok=True)
    return tmp_path / "a", tmp_path / "b"


def test_deleting_the_remote_durable_subscription_deletes_the_network_one(
    tmp_path: Path,
) -> None:
    name = f"net.unsub.{uuid.uuid4().hex[:8]}"
    b_port = free_port()
    a_dir, b_dir = dirs(tmp_path)
    with running_broker('[broker]\nname = "B"\n', b_dir, openwire_port=b_port), \
            running_broker(connector_toml("A", [b_port], name="a-b"), a_dir) as a:  # fmt: skip
        wait_for(lambda: "bridge to broker B" in a.log_text(), "A->B")
        with durable_subscriber(b_port, name) as on_b:
            wait_for(lambda: network_subscription(a, name) is not None, "the network subscription")
            send(a.openwire_port, topic(name), ["first"])
            assert receive(on_b, 1) == ["first"]
        unsubscribe(b_port)
        wait_for(lambda: network_subscription(a, name) is None, "the network one deleted")
        send(a.openwire_port, topic(name), [f"after{i}" for i in range(5)])  # kept for nobody
        with durable_subscriber(b_port, name) as on_b:  # a new subscription: nothing old
            wait_for(lambda: network_subscription(a, name) is not None, "a new one")
            assert quiet(on_b, 1.0)
            assert network_subscription(a, name)["pending"] == 0  # type: ignore[index]
