"""Network durable subscriptions, dovecote against an ActiveMQ 5.17 pair (the same steps
on each, observed by clients). dynamicOnly: B's durable subscriber has gone away, B goes
down, A keeps 20 messages in its network durable subscription and restarts, B comes back:
with
dynamicOnly false (ActiveMQ's default) A's new bridge activates that subscription as it
starts and the 20 go to B, where the subscriber finds them with A stopped; with true they
stay on A until the subscriber is back. (That is all dynamicOnly does in ActiveMQ:
statically included destinations are forwarded from the bridge's start either way.)
Unsubscribing on B deletes the network subscription on A."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from activemq import running_activemq
from brokers import running_broker
from dovecote.client import ConnectionFactory
from dovecote.core.destinations import topic
from networks import WAIT_S, consumer, receive, send, topic_statistics, url, wait_for
from ports import free_port


@contextmanager
def broker(kind: str, role: str, workdir: Path, port: int, remote: int, dynamic_only: bool,
           synced: str | None = None) -> Iterator[None]:  # fmt: skip
    """Broker ``role`` (A bridges to ``remote``; B has no connector) of either kind, on a
    fixed port and a store that outlives it; ``synced``: A's connector syncs the durable
    subscriptions on these topics (syncDurableSubs, the topics dynamically included)."""
    if kind == "activemq":
        sync = ""
        if synced is not None:
            included = f'<topic physicalName="{synced}"/>'
            sync = (' syncDurableSubs="true"><dynamicallyIncludedDestinations>'
                    f"{included}</dynamicallyIncludedDestinations>")  # fmt: skip
        connector = (
            f'<networkConnector name="a-b" uri="static:(tcp://127.0.0.1:{remote})" '
            f'dynamicOnly="{str(dynamic_only).lower()}"'
            + (f"{sync}</networkConnector>" if sync else "/>")
        )
        with running_activemq(base=workdir, openwire_port=port,
                              network_connectors=connector if role == "A" else ""):  # fmt: skip
            yield
        return
    config = f'[broker]\nname = "{role}"\n'
    if role == "A":
        config += (
            f'[[network_connectors]]\nname = "a-b"\nuri = "static:(tcp://127.0.0.1:{remote})"\n'
            f"dynamic_only = {str(dynamic_only).lower()}\n"
        )
        if synced is not None:
            included = f'[{{ topic = "{synced}" }}]'
            config += f"sync_durable_subs = true\ndynamically_included_destinations = {included}\n"
    with running_broker(config, workdir, openwire_port=port):
        yield


def bridged_once(a_port: int, b_port: int, name: str) -> None:
    """Wait for A's bridge: a marker published on A until a plain subscriber on B gets it."""
    with ConnectionFactory(url(b_port)).create_connection() as connection:
        connection.start()
        marker = connection.create_session().create_consumer(topic(f"{name}.marker"))
        wait_for(lambda: bool(send(a_port, topic(f"{name}.marker"), ["m"], persistent=False)
                              or marker.receive(0.3)), "the bridge", 60)  # fmt: skip


def places(tmp_path: Path) -> tuple[int, int, Path, Path]:
    """A's and B's ports and directories."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    return free_port(), free_port(), tmp_path / "a", tmp_path / "b"


def subscribed(a_port: int, b_port: int, name: str) -> None:
    """B's durable subscriber "w" subscribes until A forwards to it (a probe published on A
    reaches it), then goes away (its subscription stays)."""
    with durable(b_port, name) as on_b:
        wait_for(lambda: bool(send(a_port, topic(name), ["probe"], persistent=False)
                              or on_b.receive(0.3)), "demand at A", 60)  # type: ignore[attr-defined]  # fmt: skip


def enqueued(port: int, name: str) -> int:
    return int(str(topic_statistics(port, name).get("enqueueCount", 0)))


def durable(port: int, name: str) -> AbstractContextManager[object]:
    @contextmanager
    def subscriber() -> Iterator[object]:
        with ConnectionFactory(url(port)).create_connection(client_id="watcher") as connection:
            connection.start()
            yield connection.create_session().create_durable_subscriber(topic(name), "w")

    return subscriber()


@pytest.mark.parametrize("dynamic_only", [False, True])
@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_dynamic_only_as_activemq(tmp_path: Path, kind: str, dynamic_only: bool) -> None:
    name = f"net.dyn.{uuid.uuid4().hex[:8]}"
    a_port, b_port, a_dir, b_dir = places(tmp_path)
    away = [f"w{i}" for i in range(20)]
    with broker(kind, "A", a_dir, a_port, b_port, dynamic_only):
        with broker(kind, "B", b_dir, b_port, 0, dynamic_only):
            bridged_once(a_port, b_port, name)
            subscribed(a_port, b_port, name)
        # B is down, so is the bridge: A keeps these in its network subscription.
        send(a_port, topic(name), away)
    # A restarts (ActiveMQ takes the topics with durable subscriptions at its start).
    with broker(kind, "A", a_dir, a_port, b_port, dynamic_only), \
            broker(kind, "B", b_dir, b_port, 0, dynamic_only):  # fmt: skip
        bridged_once(a_port, b_port, name)
        if not dynamic_only:
            wait_for(lambda: enqueued(b_port, name) >= 20, "the 20 on B", 60)
    with broker(kind, "B", b_dir, b_port, 0, dynamic_only), durable(b_port, name) as on_b:
        got = [body for body in receive(on_b, 30, timeout=2.0) if body != "probe"]  # type: ignore[arg-type]
    assert got == ([] if dynamic_only else away)


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_unsubscribing_on_b_deletes_the_network_subscription_as_activemq(
    tmp_path: Path, kind: str
) -> None:
    """After the subscriber on B unsubscribes, what A gets for the topic is kept for nobody:
    a new subscription of the same name on B gets none of it (a network subscription left
    on A would hand it over as soon as the new subscriber's demand arrives)."""
    name = f"net.unsub.{uuid.uuid4().hex[:8]}"
    a_port, b_port, a_dir, b_dir = places(tmp_path)
    with broker(kind, "B", b_dir, b_port, 0, False), \
            broker(kind, "A", a_dir, a_port, b_port, False):  # fmt: skip
        bridged_once(a_port, b_port, name)
        advisories = topic(f"ActiveMQ.Advisory.Consumer.Topic.{name}")
        with consumer(a_port, advisories) as seen:
            subscribed(a_port, b_port, name)
            assert seen.receive(WAIT_S) is not None  # A's network subscription's consumer
            with ConnectionFactory(url(b_port)).create_connection(client_id="watcher") as c:
                c.create_session().unsubscribe("w")
            assert seen.receive(WAIT_S) is not None  # ... closed
        send(a_port, topic(name), [f"after{i}" for i in range(5)])
        with durable(b_port, name) as on_b:
            wait_for(lambda: bool(send(a_port, topic(name), ["probe"], persistent=False)
                                  or on_b.receive(0.3)), "demand at A again", 60)  # type: ignore[attr-defined]  # fmt: skip
            got = [body for body in receive(on_b, 10, timeout=2.0) if body != "probe"]  # type: ignore[arg-type]
    assert got == []


@pytest.mark.parametrize("kind", ["dovecote", "activemq"])
def test_while_the_subscriber_is_away_a_forwards_for_its_subscription_on_b(
    tmp_path: Path, kind: str
) -> None:
    """B's durable subscriber goes away: A's network subscription stays active (the remote
    subscription still exists), so what A gets goes to B and waits there; the subscriber
    finds it on B with A stopped."""
    name = f"net.away.{uuid.uuid4().hex[:8]}"
    a_port, b_port, a_dir, b_dir = places(tmp_path)
    away = [f"w{i}" for i in range(20)]
    with broker(kind, "B", b_dir, b_port, 0, False):
        with broker(kind, "A", a_dir, a_port, b_port, False):
            bridged_once(a_port, b_port, name)
            subscribed(a_port, b_port, name)
            before = enqueued(b_port, name)
            send(a_port, topic(name), away)
            wait_for(lambda: enqueued(b_port, name) >= before + 20, "the 20 on B")
        with durable(b_port, name) as on_b:
            got = [body for body in receive(on_b, 30, timeout=2.0) if body != "probe"]  # type: ignore[arg-type]
    assert got == away
