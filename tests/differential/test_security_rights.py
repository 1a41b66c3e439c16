"""Authentication and authorization side by side: dovecote and a real ActiveMQ 5.17, both
configured with tests/securitykit.py's users, groups and authorization map, as the Java
JMS client, stomp.py and dovecote.client see them: good and bad credentials, anonymous
access, and each right on queues, topics, temporary destinations and advisory topics.
Every outcome (an "ok" or the error the client raised, with ActiveMQ's words) must agree."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import stomp

from activemq import classpath, java_classes, running_activemq
from brokers import running_broker
from differ import Peers
from dovecote.client import ConnectionFactory
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from rawopenwire import Peer as RawPeer
from rawopenwire import client_wfi, ids
from securitykit import activemq_plugins, dovecote_toml
from stompclient import Collector

CREDENTIALS = ("admin:adminpw", "writer:writerpw", "reader:readerpw", "blind:blindpw", "-",
               "admin:wrong", "nobody:nobodypw")  # fmt: skip
WAIT_S = 10.0


@pytest.fixture(scope="module")
def secure_peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peers]:
    with (
        running_activemq(plugins=activemq_plugins()) as amq,
        running_broker(dovecote_toml(), workdir=tmp_path_factory.mktemp("secure")) as ours,
    ):
        yield Peers((ours.openwire_port, ours.stomp_port), (amq.openwire_port, amq.stomp_port))


def normal(text: str, name: str) -> str:
    """An outcome without what differs by broker on purpose: the run's destination names
    and temporary destinations' generated ids."""
    return re.sub(r"ID:[^\s,]+", "ID:*", text.replace(name, "NAME"))


def both(peers: Peers, scenario: Callable[[int, int, str], dict[str, str]]) -> dict[str, str]:
    """``scenario(openwire_port, stomp_port, name)`` on each broker; their outcomes, which
    must agree (ActiveMQ's returned)."""
    outcomes = []
    for openwire, stomp_port in (peers.activemq, peers.dovecote):
        name = f"sec{uuid.uuid4().hex[:8]}"
        got = scenario(openwire, stomp_port, name)
        outcomes.append({k: normal(v, name) for k, v in got.items()})
    activemq, dovecote = outcomes
    differing = {k: (dovecote.get(k), activemq.get(k)) for k in activemq.keys() | dovecote.keys()
                 if dovecote.get(k) != activemq.get(k)}  # fmt: skip
    assert not differing, "dovecote, ActiveMQ:\n" + "\n".join(
        f"{k}: {d!r} vs {a!r}" for k, (d, a) in sorted(differing.items())
    )
    return activemq


# -- the Java client ---------------------------------------------------------------------


def java_rights(classes: Path) -> Callable[[int, int, str], dict[str, str]]:
    def scenario(openwire: int, _stomp: int, name: str) -> dict[str, str]:
        result = subprocess.run(
            ["java", "-cp", f"{classpath()}:{classes}", "SecurityRights", str(openwire), name,
             *CREDENTIALS],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        lines = [line for line in result.stdout.splitlines() if ": " in line]
        if not lines:
            raise AssertionError(f"SecurityRights printed nothing:\n{result.stderr}")
        return dict(line.split(": ", 1) for line in lines)

    return scenario


def test_the_java_client_meets_the_same_rights(secure_peers: Peers) -> None:
    seen = both(secure_peers, java_rights(java_classes()))
    refused = "JMSSecurityException: User {} is not authorized to {}"
    # What ActiveMQ showed, so that agreeing on nothing cannot pass.
    assert seen["admin.connect"] == "ok"
    assert seen["admin-bad.connect"] == (
        "JMSSecurityException: User name [admin] or password is invalid."
    )
    assert seen["nobody.connect"].startswith("JMSSecurityException: User name [nobody]")
    assert seen["writer.send_queue"] == "ok"
    assert seen["reader.send_queue"] == refused.format(
        "reader", "write to: queue://orders.NAME.existing"
    )
    assert seen["writer.send_new_queue"] == refused.format(
        "writer", "create: queue://orders.NAME.new_writer"
    )
    assert seen["reader.consume_queue"] == "ok"
    assert seen["writer.consume_queue"] == refused.format(
        "writer", "read from: queue://orders.NAME.existing"
    )
    assert seen["reader.temp_queue"] == "ok/ok"
    assert seen["writer.temp_queue"] == refused.format("writer", "create: temp-queue://ID:*")
    assert seen["blind.connect"] == refused.format(
        "blind", "read from: ActiveMQ.Advisory.TempQueue,ActiveMQ.Advisory.TempTopic"
    )
    assert seen["anonymous.connect"] == refused.format(
        "anonymous", "read from: ActiveMQ.Advisory.TempQueue,ActiveMQ.Advisory.TempTopic"
    )


# -- stomp.py ----------------------------------------------------------------------------


def answer(listener: Collector, receipt: str) -> str:
    """What answered a frame that asked for ``receipt``: "ok" (its RECEIPT) or the ERROR's
    message. ERRORs without a receipt id before it are passed over: ActiveMQ sends one
    more for a /temp-queue/ it may not create (docs/security.md)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        if not listener.receipts.empty():
            assert listener.receipts.get() == receipt
            return "ok"
        if not listener.errors.empty():
            error = listener.errors.get()
            if error.headers.get("receipt-id") == receipt:
                return f"ERROR {error.headers.get('message')}"
            continue
        assert time.monotonic() < deadline, f"no answer to {receipt}"
        time.sleep(0.01)


PYTHON_USERS = (("admin", "adminpw", "admin"), ("writer", "writerpw", "writer"),
                ("reader", "readerpw", "reader"), (None, None, "anonymous"),
                ("admin", "wrong", "admin-bad"))  # fmt: skip
"""(user, password, who) of each connection the Python clients open, in order."""


def stomp_rights(_openwire: int, stomp_port: int, name: str) -> dict[str, str]:
    seen: dict[str, str] = {}
    for user, password, who in PYTHON_USERS:
        seen.update(stomp_user(stomp_port, name, user, password, who))
    return seen


def stomp_user(
    stomp_port: int, name: str, login: str | None, passcode: str | None, who: str
) -> dict[str, str]:
    seen: dict[str, str] = {}
    listener = Collector()
    conn = stomp.Connection([("127.0.0.1", stomp_port)], auto_content_length=False)
    conn.set_listener("", listener)
    try:
        conn.connect(login, passcode, wait=True)
        seen[f"{who}.connect"] = "ok"
    except stomp.exception.ConnectFailedException:
        error = listener.errors.get(timeout=WAIT_S)
        seen[f"{who}.connect"] = f"ERROR {error.headers.get('message')}"
        listener.disconnected.get(timeout=WAIT_S)
        seen[f"{who}.closed"] = "yes"
        return seen

    def attempt(op: str, act: Callable[[str], Any]) -> None:
        receipt = f"{op}-{uuid.uuid4().hex[:6]}"
        act(receipt)
        seen[f"{who}.{op}"] = answer(listener, receipt)

    q, t = f"/queue/orders.{name}", f"/topic/news.{name}"
    attempt("send_queue", lambda r: conn.send(f"{q}.existing", "x", receipt=r))
    attempt("send_new_queue", lambda r: conn.send(f"{q}.new_{who}", "x", receipt=r))
    attempt("subscribe_queue", lambda r: conn.subscribe(f"{q}.existing", "1", receipt=r))
    attempt("subscribe_topic", lambda r: conn.subscribe(f"{t}.existing", "2", receipt=r))
    attempt("send_topic", lambda r: conn.send(f"{t}.existing", "x", receipt=r))
    attempt("temp_queue", lambda r: conn.send(f"/temp-queue/{who}", "x", receipt=r))
    # Refused by both, in other words: ActiveMQ refuses the temporary queue's creation (an
    # ERROR without receipt id) and then the SEND, for its write right first; dovecote
    # refuses the creation, once (docs/security.md).
    seen[f"{who}.temp_queue"] = seen[f"{who}.temp_queue"].split(" is not")[0]
    # A SEND with no receipt, refused: an ERROR (without receipt-id), and the connection
    # goes on (the next frame is answered).
    attempt("sync", lambda r: conn.send(f"{q}.existing", "", receipt=r))
    conn.send(f"/queue/admin.{name}", "x")
    if who != "admin":
        error = listener.errors.get(timeout=WAIT_S)
        receipt_id = error.headers.get("receipt-id")
        seen[f"{who}.receiptless"] = f"{error.headers.get('message')} receipt-id={receipt_id}"
    attempt("after_receiptless", lambda r: conn.send(f"{q}.existing", "y", receipt=r))
    seen[f"{who}.connected"] = str(conn.is_connected())
    conn.disconnect()
    return seen


def test_stomp_meets_the_same_rights(secure_peers: Peers) -> None:
    seen = both(secure_peers, stomp_rights)
    assert seen["admin-bad.connect"] == "ERROR User name [admin] or password is invalid."
    assert seen["admin-bad.closed"] == "yes"
    assert seen["reader.send_queue"] == (
        "ERROR User reader is not authorized to write to: queue://orders.NAME.existing"
    )
    assert seen["reader.receiptless"] == (
        "User reader is not authorized to write to: queue://admin.NAME receipt-id=None"
    )
    assert (
        seen["reader.after_receiptless"]
        == "ERROR User reader is not authorized to write to: queue://orders.NAME.existing"
    )
    assert seen["writer.send_queue"] == "ok"
    assert seen["reader.connected"] == "True"


# -- dovecote.client ---------------------------------------------------------------------


def client_rights(openwire: int, _stomp: int, name: str) -> dict[str, str]:
    seen: dict[str, str] = {}
    factory = ConnectionFactory(f"tcp://127.0.0.1:{openwire}")
    for user, password, who in PYTHON_USERS:
        seen.update(client_user(factory, name, user, password, who))
    return seen


def client_user(
    factory: ConnectionFactory, name: str, user: str | None, password: str | None, who: str
) -> dict[str, str]:
    seen: dict[str, str] = {}
    try:
        connection = factory.create_connection(user, password)
        connection.start()
    except Exception as exc:
        return {f"{who}.connect": f"{type(exc).__name__} {exc}"}
    seen[f"{who}.connect"] = "ok"
    session = connection.create_session()

    def attempt(op: str, act: Callable[[], object]) -> None:
        try:
            act()
            seen[f"{who}.{op}"] = "ok"
        except Exception as exc:
            seen[f"{who}.{op}"] = f"{type(exc).__name__} {exc}"

    queue, topic = session.queue(f"orders.{name}.existing"), session.topic(f"news.{name}.x")
    attempt("send_queue", lambda: session.create_producer(queue).send("x"))
    attempt("consume_queue", lambda: session.create_consumer(queue).close())
    attempt("consume_topic", lambda: session.create_consumer(topic).close())
    attempt("temp_queue", lambda: session.create_temporary_queue())
    connection.close()
    return seen


def test_dovecote_client_meets_the_same_rights(secure_peers: Peers) -> None:
    seen = both(secure_peers, client_rights)
    assert seen["admin-bad.connect"] == (
        "JMSError java.lang.SecurityException: User name [admin] or password is invalid."
    )
    assert seen["admin.send_queue"] == "ok"
    assert seen["writer.send_queue"] == "ok"
    assert seen["reader.send_queue"] == (
        "JMSError java.lang.SecurityException: User reader is not authorized to write to: "
        "queue://orders.NAME.existing"
    )
    assert seen["reader.temp_queue"] == "ok"
    assert seen["writer.consume_queue"] == (
        "JMSError java.lang.SecurityException: User writer is not authorized to read from: "
        "queue://orders.NAME.existing"
    )


# -- the wire ------------------------------------------------------------------------------


def refused_login(openwire: int, _stomp: int, name: str) -> dict[str, str]:
    """The broker's answer to a ConnectionInfo with a wrong password, then whether it
    closes the connection (ActiveMQ does, about 2 s later)."""
    peer = RawPeer(openwire)
    try:
        assert peer.next().type == t.WIRE_FORMAT_INFO  # ActiveMQ's BrokerInfo comes later
        info = {"commandId": 1, "responseRequired": True, "userName": "admin",
                "password": "wrong", "connectionId": ids(f"ID:{name}")["connection"]}  # fmt: skip
        peer.send(client_wfi(), Structure(t.CONNECTION_INFO, info))
        answer = peer.next()
        while answer.type not in (t.RESPONSE, t.EXCEPTION_RESPONSE):
            answer = peer.next()
        exception = answer["exception"]
        seen = {"answer": f"{answer.type} {exception.class_name}: {exception.message}"}
        try:
            while True:
                peer.next(timeout=WAIT_S)
        except EOFError:
            seen["closed"] = "yes"
        return seen
    finally:
        peer.close()


def test_a_refused_login_is_answered_then_the_connection_closed(secure_peers: Peers) -> None:
    seen = both(secure_peers, refused_login)
    assert seen == {
        "answer": f"{t.EXCEPTION_RESPONSE} java.lang.SecurityException: "
        "User name [admin] or password is invalid.",
        "closed": "yes",
    }
