"""dovecote bridged to dovecote (compatibility N1), each broker its own process on
loopback: demand forwarding from consumer advisories, a line of three brokers with
networkTTL, a consumer moving between brokers mid-stream."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from brokers import BrokerProcess, running_broker
from dovecote.broker.security.users import hash_password
from dovecote.client import ConnectionFactory
from dovecote.client.connection import MessageConsumer
from dovecote.core.destinations import queue, topic
from networks import (
    browse_count,
    connector_toml,
    consumer,
    quiet,
    receive,
    send,
    wait_for,
)
from ports import free_port


def bridges(broker: BrokerProcess) -> list[dict[str, object]]:
    """The admin API's list of a broker's bridges."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{broker.console_port}/api/network/bridges",
        headers={"Host": "localhost"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        found: list[dict[str, object]] = json.load(answer)
        return found


def receive_all(consumers: tuple[MessageConsumer, ...], count: int) -> list[str]:
    """``count`` bodies from any of ``consumers`` (fewer when none comes for 30 s)."""
    got: list[str] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        for c in consumers:
            message = c.receive(0.02)
            if message is not None:
                got.append(message.text)
                deadline = time.monotonic() + 30
    return got


def wd(tmp_path: Path, name: str) -> Path:
    (tmp_path / name).mkdir(exist_ok=True)
    return tmp_path / name


def unique(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


def test_a_forwards_to_b_only_what_b_has_consumers_for(tmp_path: Path) -> None:
    name = unique("pair.q")
    marker = queue(f"{name}.marker")
    bodies = [f"m{i}" for i in range(200)]
    b_port = free_port()
    a_config = connector_toml("A", [b_port])
    with running_broker('[broker]\nname = "B"\n', wd(tmp_path, "b"), openwire_port=b_port) as b, \
            running_broker(a_config, wd(tmp_path, "a")) as a:  # fmt: skip
        wait_for(lambda: "bridge to broker B" in a.log_text(), "the bridge A->B")
        with consumer(b.openwire_port, marker) as on_marker:
            wait_for(lambda: f"forwarding queue://{marker.name} to" in a.log_text(), "demand")
            send(a.openwire_port, queue(name), bodies)
            send(a.openwire_port, marker, ["after"])
            assert receive(on_marker, 1) == ["after"]
        assert browse_count(a.openwire_port, queue(name)) == 200
        assert browse_count(b.openwire_port, queue(name)) == 0
        with consumer(b.openwire_port, queue(name)) as on_b:
            assert receive(on_b, 200) == bodies
            assert quiet(on_b)
        assert browse_count(a.openwire_port, queue(name)) == 0
        [bridge] = bridges(a)
        assert bridge["name"] == "bridge" and bridge["remote_broker"] == "B"
        assert bridge["state"] == "connected" and bridge["forwarded"] == 201
        assert bridges(b) == []
        # Topics: to B's subscribers, through one conduit consumer.
        with (
            consumer(b.openwire_port, topic(name)) as t1,
            consumer(b.openwire_port, topic(name)) as t2,
        ):
            wait_for(lambda: f"forwarding topic://{name} to" in a.log_text(), "topic demand")
            send(a.openwire_port, topic(name), bodies[:20], persistent=False)
            assert receive(t1, 20) == bodies[:20]
            assert receive(t2, 20) == bodies[:20]


def test_a_line_of_three_with_network_ttl_2_reaches_the_end(tmp_path: Path) -> None:
    name = unique("line.q")
    bodies = [f"m{i}" for i in range(100)]
    c_port, b_port = free_port(), free_port()
    a_config = connector_toml("A", [b_port], name="a-to-b", network_ttl=2)
    b_config = connector_toml("B", [c_port], name="b-to-c", network_ttl=2)
    with running_broker('[broker]\nname = "C"\n', wd(tmp_path, "c"), openwire_port=c_port) as c, \
            running_broker(b_config, wd(tmp_path, "b"), openwire_port=b_port) as b, \
            running_broker(a_config, wd(tmp_path, "a")) as a:  # fmt: skip
        wait_for(lambda: "bridge to broker C" in b.log_text(), "B->C")
        wait_for(lambda: "bridge to broker B" in a.log_text(), "A->B")
        with consumer(c.openwire_port, queue(name)) as on_c:
            # C's demand reaches B (path []) and, through B's network consumer, A (path [C]).
            wait_for(lambda: f"forwarding queue://{name} to" in a.log_text(), "demand at A")
            send(a.openwire_port, queue(name), bodies)
            assert receive(on_c, 100) == bodies
            assert quiet(on_c)
        assert browse_count(a.openwire_port, queue(name)) == 0
        assert browse_count(b.openwire_port, queue(name)) == 0


def test_a_line_of_three_with_network_ttl_1_stops_at_one_hop(tmp_path: Path) -> None:
    name = unique("line1.q")
    marker = queue(f"{name}.marker")
    c_port, b_port = free_port(), free_port()
    a_config = connector_toml("A", [b_port], name="a-to-b", network_ttl=1)
    b_config = connector_toml("B", [c_port], name="b-to-c", network_ttl=1)
    with running_broker('[broker]\nname = "C"\n', wd(tmp_path, "c"), openwire_port=c_port) as c, \
            running_broker(b_config, wd(tmp_path, "b"), openwire_port=b_port) as b, \
            running_broker(a_config, wd(tmp_path, "a")) as a:  # fmt: skip
        wait_for(lambda: "bridge to broker C" in b.log_text(), "B->C")
        wait_for(lambda: "bridge to broker B" in a.log_text(), "A->B")
        with consumer(c.openwire_port, queue(name)) as on_c:
            wait_for(lambda: f"forwarding queue://{name} to" in b.log_text(), "demand at B")
            # B's advisories come in order: its network consumer's before the marker's.
            with consumer(b.openwire_port, marker) as on_marker:
                wait_for(lambda: f"forwarding queue://{marker.name} to" in a.log_text(), "marker")
                send(a.openwire_port, queue(name), ["m"] * 10)
                send(a.openwire_port, marker, ["after"])
                assert receive(on_marker, 1) == ["after"]
            # C's consumer is two hops from A: its demand (consumer TTL 1) stopped at B.
            assert f"forwarding queue://{name} to" not in a.log_text()
            assert quiet(on_c)
        assert browse_count(a.openwire_port, queue(name)) == 10


def test_a_consumer_moving_from_b_to_a_takes_its_messages_along(tmp_path: Path) -> None:
    """A and B bridged both ways. Messages sent to A follow the consumer to B; it takes a
    part and leaves, the rest stranded on B; a consumer on A then gets every one left,
    those on B replayed back (they came from A, and nobody on B wants them), none twice."""
    name = unique("move.q")
    first = [f"m{i}" for i in range(300)]
    later = [f"n{i}" for i in range(100)]
    a_port, b_port = free_port(), free_port()
    a_config = connector_toml("A", [b_port], name="a-to-b")
    b_config = connector_toml("B", [a_port], name="b-to-a")
    with running_broker(a_config, wd(tmp_path, "a"), openwire_port=a_port) as a, \
            running_broker(b_config, wd(tmp_path, "b"), openwire_port=b_port) as b:  # fmt: skip
        wait_for(lambda: "bridge to broker B" in a.log_text(), "A->B")
        wait_for(lambda: "bridge to broker A" in b.log_text(), "B->A")
        with consumer(b_port, queue(name)) as on_b:
            wait_for(lambda: f"forwarding queue://{name} to" in a.log_text(), "demand at A")
            send(a_port, queue(name), first)
            got_on_b = receive(on_b, 100)
            wait_for(lambda: browse_count(a_port, queue(name)) == 0, "all moved to B")
        assert len(got_on_b) == 100
        with consumer(a_port, queue(name)) as on_a:
            send(a_port, queue(name), later)
            got_on_a = receive(on_a, 300)
            assert quiet(on_a)
        assert sorted(got_on_b + got_on_a) == sorted(first + later), "lost or repeated"
        assert browse_count(b_port, queue(name)) == 0


def test_a_bridge_reconnects_with_back_off_and_masterslave_takes_who_answers(
    tmp_path: Path,
) -> None:
    """A's connector lists a dead address first and B second (masterslave:): it bridges to
    B once B is up, waits while B is down (the admin API says so, one WARNING for a run of
    the same failure), and bridges again when B is back."""
    name = unique("reconnect.q")
    dead, b_port = free_port(), free_port()
    uri = f"masterslave:(tcp://127.0.0.1:{dead},tcp://127.0.0.1:{b_port})"
    a_config = (
        f'[broker]\nname = "A"\n[[network_connectors]]\nname = "ms"\nuri = "{uri}"\n'
        "initial_reconnect_delay_ms = 100\nmax_reconnect_delay_ms = 400\n"
    )
    b_config = '[broker]\nname = "B"\n'
    with running_broker(a_config, wd(tmp_path, "a")) as a:
        wait_for(lambda: bridges(a)[0]["state"] == "waiting", "a failed attempt")
        assert "cannot connect" in str(bridges(a)[0]["last_error"])
        with running_broker(b_config, wd(tmp_path, "b"), openwire_port=b_port) as b:
            wait_for(lambda: bridges(a)[0]["state"] == "connected", "the bridge to B")
            with consumer(b_port, queue(name)) as on_b:
                send(a.openwire_port, queue(name), ["before"])
                assert receive(on_b, 1) == ["before"]
            wait_for(lambda: browse_count(b_port, queue(name)) == 0, "the ack on B")
            b.process.kill()
            b.process.wait()
        wait_for(lambda: bridges(a)[0]["state"] == "waiting", "B gone")
        send(a.openwire_port, queue(name), ["while B was down"])
        with running_broker(b_config, wd(tmp_path, "b"), openwire_port=b_port):
            wait_for(lambda: bridges(a)[0]["state"] == "connected", "the bridge again")
            with consumer(b_port, queue(name)) as on_b:
                assert receive(on_b, 1) == ["while B was down"]
        warnings = [line for line in a.log_lines if "WARNING" in line and "ms to" in line]
        # One line per change of problem, not one per attempt (there were many).
        assert 1 <= len(warnings) <= 8, warnings


def test_a_mesh_of_three_with_network_ttl_1_delivers_each_message_once(tmp_path: Path) -> None:
    """A, B and C each bridged to the other two: producers on every broker, consumers on
    every broker, every message consumed once (none loops, none is lost)."""
    name = unique("mesh.q")
    ports = {n: free_port() for n in "ABC"}
    configs = {
        n: connector_toml(n, [p for m, p in ports.items() if m != n], name=f"{n}-mesh")
        for n in "ABC"
    }
    sent = {n: [f"{n}{i}" for i in range(150)] for n in "ABC"}
    a_dir, b_dir, c_dir = (wd(tmp_path, n) for n in "abc")
    with running_broker(configs["A"], a_dir, openwire_port=ports["A"]) as a, \
            running_broker(configs["B"], b_dir, openwire_port=ports["B"]) as b, \
            running_broker(configs["C"], c_dir, openwire_port=ports["C"]) as c:  # fmt: skip
        for broker in (a, b, c):
            wait_for(lambda broker=broker: len(bridges(broker)) == 2 and all(
                x["state"] == "connected" for x in bridges(broker)), "the mesh")  # fmt: skip
        with (
            consumer(ports["A"], queue(name)) as on_a,
            consumer(ports["B"], queue(name)) as on_b,
            consumer(ports["C"], queue(name)) as on_c,
        ):
            for broker in (a, b, c):
                wait_for(lambda broker=broker: broker.log_text().count(
                    f"forwarding queue://{name} to") == 2, "demand everywhere")  # fmt: skip
            for n in "ABC":
                send(ports[n], queue(name), sent[n])
            got = receive_all((on_a, on_b, on_c), 450)
            assert quiet(on_a) and quiet(on_b) and quiet(on_c)
    assert sorted(got) == sorted(sent["A"] + sent["B"] + sent["C"]), "lost or delivered twice"


def test_a_duplex_connector_bridges_both_ways_over_one_connection(tmp_path: Path) -> None:
    """A's connector to B with duplex = true, nothing configured on B: B bridges back over
    A's connection (as it would for ActiveMQ's duplex connector), so messages flow to
    consumers on either side."""
    name = unique("duplex.q")
    b_port = free_port()
    a_config = connector_toml("A", [b_port], name="a-b", duplex=True)
    with running_broker('[broker]\nname = "B"\n', wd(tmp_path, "b"), openwire_port=b_port) as b, \
            running_broker(a_config, wd(tmp_path, "a")) as a:  # fmt: skip
        wait_for(lambda: "duplex bridge back to broker A started" in b.log_text(), "B -> A")
        to_b = [f"to-b-{i}" for i in range(50)]
        to_a = [f"to-a-{i}" for i in range(50)]
        with (
            consumer(b_port, queue(f"{name}.b")) as on_b,
            consumer(a.openwire_port, queue(f"{name}.a")) as on_a,
        ):
            wait_for(lambda: f"forwarding queue://{name}.a to" in b.log_text(), "demand at B")
            wait_for(lambda: f"forwarding queue://{name}.b to" in a.log_text(), "demand at A")
            send(a.openwire_port, queue(f"{name}.b"), to_b)
            send(b_port, queue(f"{name}.a"), to_a)
            assert receive(on_b, 50) == to_b
            assert receive(on_a, 50) == to_a
            assert quiet(on_a) and quiet(on_b)
        assert [x["name"] for x in bridges(b)] == ["duplex-A"]


def test_topic_messages_reach_a_durable_subscriber_across_absence_and_a_restart(
    tmp_path: Path,
) -> None:
    """A durable subscriber on B of a topic published on A: A keeps one durable network
    subscription for it (NC-DS_A_<topic>), so what A gets while the subscriber is away, and
    across a restart of A, reaches it when it is back; none twice."""
    name = unique("durable.t")
    b_port, a_port = free_port(), free_port()
    a_config = connector_toml("A", [b_port], name="a-b")
    b_config = '[broker]\nname = "B"\n'
    first = [f"f{i}" for i in range(20)]
    away = [f"w{i}" for i in range(20)]

    def durable() -> Iterator[MessageConsumer]:
        factory = ConnectionFactory(f"tcp://127.0.0.1:{b_port}")
        with factory.create_connection(client_id="watcher") as connection:
            connection.start()
            yield connection.create_session().create_durable_subscriber(topic(name), "w")

    subscriber = contextmanager(durable)
    with running_broker(b_config, wd(tmp_path, "b"), openwire_port=b_port):
        with running_broker(a_config, wd(tmp_path, "a"), openwire_port=a_port) as a:
            wait_for(lambda: "bridge to broker B" in a.log_text(), "A->B")
            with subscriber() as on_b:
                wait_for(lambda: f"forwarding topic://{name} to" in a.log_text(), "demand")
                send(a_port, topic(name), first)
                assert receive(on_b, 20) == first
            send(a_port, topic(name), away)  # kept on A: nobody on B wants them now
        with running_broker(a_config, wd(tmp_path, "a"), openwire_port=a_port) as a:
            wait_for(lambda: "bridge to broker B" in a.log_text(), "A->B again")
            with subscriber() as on_b:
                assert receive(on_b, 20) == away
                assert quiet(on_b)


def test_a_bridge_logs_in_to_a_broker_with_security_on(tmp_path: Path) -> None:
    """B requires a login: A's connector without one is refused (waiting, the refusal in
    the admin API), with the connector's user and password it bridges."""
    name = unique("secure.q")
    b_port = free_port()
    b_config = (
        '[broker]\nname = "B"\n[[security.users]]\nname = "bridge"\n'
        f'password = "{hash_password("s3cret")}"\ngroups = ["admins"]\n'
        '[[security.users]]\nname = "app"\n'
        f'password = "{hash_password("app")}"\ngroups = ["admins"]\n'
    )
    refused = connector_toml("A", [b_port], name="a-b", initial_reconnect_delay_ms=100)
    allowed = connector_toml("A", [b_port], name="a-b", user="bridge", password="s3cret")
    with running_broker(b_config, wd(tmp_path, "b"), openwire_port=b_port):
        with running_broker(refused, wd(tmp_path, "a1")) as a:
            wait_for(lambda: "refused" in str(bridges(a)[0]["last_error"]), "the refusal")
        with running_broker(allowed, wd(tmp_path, "a2")) as a:
            wait_for(lambda: bridges(a)[0]["state"] == "connected", "the bridge")
            factory = ConnectionFactory(f"tcp://127.0.0.1:{b_port}")
            with factory.create_connection("app", "app") as connection:
                connection.start()
                on_b = connection.create_session().create_consumer(queue(name))
                wait_for(lambda: f"forwarding queue://{name} to" in a.log_text(), "demand")
                send(a.openwire_port, queue(name), ["in"])
                assert receive(on_b, 1) == ["in"]


def test_a_send_refused_on_an_accepted_duplex_connection_is_answered(tmp_path: Path) -> None:
    """B's authorization lets A's duplex bridge write to dx.ok.> only: a forward to
    dx.secret.> is answered with B's refusal (A's bridge reports it, as ActiveMQ's ends its
    bridge on a refused forward), where B used to close the connection without a word."""
    name = unique("dx")
    b_port = free_port()
    b_config = (
        '[broker]\nname = "B"\n[security]\nallow_anonymous = true\n'
        'anonymous_groups = ["admins"]\n[[security.users]]\nname = "bridge"\n'
        f'password = "{hash_password("s3cret")}"\ngroups = ["bridges"]\n'
    )
    for kind, pattern, groups in (
        ("queue", ">", '["admins"]'),
        ("queue", "dx.ok.>", '["bridges"]'),
        ("topic", ">", '["admins"]'),
        ("topic", "ActiveMQ.Advisory.>", '["admins", "bridges"]'),
    ):
        b_config += (
            f'[[security.authorization]]\n{kind} = "{pattern}"\n'
            f"read = {groups}\nwrite = {groups}\nadmin = {groups}\n"
        )
    a_config = connector_toml("A", [b_port], name="a-b", duplex=True, user="bridge",
                              password="s3cret", initial_reconnect_delay_ms=200)  # fmt: skip
    with running_broker(b_config, wd(tmp_path, "b"), openwire_port=b_port) as b, \
            running_broker(a_config, wd(tmp_path, "a")) as a:  # fmt: skip
        wait_for(lambda: bridges(a)[0]["state"] == "connected", "the bridge")
        with (
            consumer(b_port, queue(f"dx.ok.{name}")) as on_ok,
            consumer(b_port, queue(f"dx.secret.{name}")),
        ):
            wait_for(lambda: f"forwarding queue://dx.secret.{name} to" in a.log_text(), "demand")
            send(a.openwire_port, queue(f"dx.ok.{name}"), ["fine"])
            assert receive(on_ok, 1) == ["fine"]
            send(a.openwire_port, queue(f"dx.secret.{name}"), ["hidden"])
            wait_for(
                lambda: "refused a forwarded message" in str(bridges(a)[0]["last_error"]),
                "the refusal, told to A",
            )
        assert "not authorized" in str(bridges(a)[0]["last_error"]).lower()
        assert "closing it" not in b.log_text()
        assert browse_count(a.openwire_port, queue(f"dx.secret.{name}")) == 1  # kept on A


def test_the_bridge_back_of_a_duplex_connector_keeps_its_settings(tmp_path: Path) -> None:
    """B bridges back over A's duplex connection with the settings A's BrokerInfo carries
    (networkProperties, as ActiveMQ's responder takes them): A's excluded destinations are
    not forwarded from B to A either."""
    name = unique("dxs")
    b_port = free_port()
    a_config = connector_toml("A", [b_port], name="a-b", duplex=True) + (
        f'excluded_destinations = [{{ queue = "secret.{name}" }}]\n'
    )
    with running_broker('[broker]\nname = "B"\n', wd(tmp_path, "b"), openwire_port=b_port), \
            running_broker(a_config, wd(tmp_path, "a")) as a:  # fmt: skip
        wait_for(lambda: bridges(a)[0]["state"] == "connected", "the bridge")
        with (
            consumer(a.openwire_port, queue(f"open.{name}")) as on_open,
            consumer(a.openwire_port, queue(f"secret.{name}")) as on_secret,
        ):
            send(b_port, queue(f"secret.{name}"), ["kept on B"])
            send(b_port, queue(f"open.{name}"), ["crosses"])
            assert receive(on_open, 1) == ["crosses"]
            assert quiet(on_secret)
        assert browse_count(b_port, queue(f"secret.{name}")) == 1
