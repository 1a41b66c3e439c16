"""dovecote's Python client and ActiveMQ's Java client 5.17 on either side of dovecote: the
types of properties and map values, the group fields and JMSXDeliveryCount read the same
in both directions."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from activemq import classpath, java_classes
from brokers import BrokerProcess, running_broker
from dovecote.client import (
    AckMode,
    ConnectionFactory,
    JavaByte,
    JavaFloat,
    JavaInt,
    JavaShort,
    Message,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(workdir=tmp_path_factory.mktemp("pyjava")) as proc:
        yield proc


@pytest.fixture(scope="module")
def peer() -> Path:
    return java_classes()


def java(classes: Path, *args: str) -> list[str]:
    result = subprocess.run(["java", "-cp", f"{classpath()}:{classes}", "PyClientPeer", *args],
                            capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return result.stdout.strip().split("\n")


def test_python_to_java(broker: BrokerProcess, peer: Path) -> None:
    name = f"pyjava.{uuid.uuid4().hex[:8]}"
    url = f"tcp://127.0.0.1:{broker.openwire_port}"
    with ConnectionFactory(url).create_connection() as conn:
        session = conn.create_session()
        properties = {"i": JavaInt(7), "s": JavaShort(-3), "b": JavaByte(5), "f": JavaFloat(1.5),
                      "l": 2**40, "d": 2.25, "JMSXGroupID": "g", "JMSXGroupSeq": 2,
                      "JMSXUserID": "alice"}  # fmt: skip
        body = {"i": JavaInt(7), "f": JavaFloat(1.5), "l": 2**40}
        session.create_producer(session.queue(name)).send(Message(body, properties=properties))
    names, entries, group = java(peer, "receive", str(broker.openwire_port), name)
    assert names.split() == [
        "JMSXGroupID=String:g", "JMSXGroupSeq=Integer:2", "JMSXUserID=String:alice",
        "b=Byte:5", "d=Double:2.25", "f=Float:1.5", "i=Integer:7", "l=Long:1099511627776",
        "s=Short:-3",
    ]  # fmt: skip
    assert entries.split() == ["f=Float:1.5", "i=Integer:7", "l=Long:1099511627776"]
    assert group == "group=g seq=2 count=1"  # in the group fields, as Java puts them


def test_java_to_python(broker: BrokerProcess, peer: Path) -> None:
    name = f"pyjava.{uuid.uuid4().hex[:8]}"
    java(peer, "send", str(broker.openwire_port), name)
    with ConnectionFactory(f"tcp://127.0.0.1:{broker.openwire_port}").create_connection() as conn:
        conn.start()
        session = conn.create_session()
        message = session.create_consumer(session.queue(name)).receive(5)
    assert message is not None and isinstance(message.body, dict)
    typed = {k: (type(v).__name__, v) for k, v in message.properties.items()}
    assert typed == {
        "i": ("JavaInt", 7), "s": ("JavaShort", -3), "b": ("JavaByte", 5),
        "f": ("JavaFloat", 1.5), "l": ("int", 2**40), "d": ("float", 2.25),
        "JMSXGroupID": ("str", "g"), "JMSXGroupSeq": ("JavaInt", 2),
    }  # fmt: skip
    assert {k: type(v).__name__ for k, v in message.body.items()} == {
        "i": "JavaInt", "f": "JavaFloat", "l": "int",
    }  # fmt: skip
    assert message.delivery_count == 1


def test_redelivered_counts_alike(broker: BrokerProcess, peer: Path) -> None:
    """The same recover in both clients: the same JMSXDeliveryCount and redelivered flag."""
    name = f"pyjava.{uuid.uuid4().hex[:8]}"
    url = f"tcp://127.0.0.1:{broker.openwire_port}?jms.redeliveryPolicy.initialRedeliveryDelay=0"
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(name)
        producer = session.create_producer(queue)
        producer.send("for java")
        producer.send("for python")
        consumer = session.create_consumer(queue, prefetch=1)
        assert consumer.receive(5) is not None
        session.recover()
        again = consumer.receive(5)
        assert again is not None
        ours = f"count={again.delivery_count} redelivered={str(again.redelivered).lower()}"
        again.acknowledge()
        consumer.close()
        java_side = java(peer, "redeliver", str(broker.openwire_port), name)
    assert ours == java_side[0] == "count=2 redelivered=true"
