"""Protocols meet in one broker: STOMP and OpenWire clients exchange messages with headers,
properties and bodies mapped as ActiveMQ maps them (text without content-length to a
TextMessage, a body with content-length to a BytesMessage); ActiveMQ's own command-line
producer and consumer tools run against dovecote; garbage on the OpenWire port hurts nobody
else."""

from __future__ import annotations

import os
import random
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from activemq import HOME, classpath, java_classes
from brokers import BrokerProcess, running_broker
from dovecote.protocol.openwire import Marshaller, broker_wire_format
from stompclient import Client


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(workdir=tmp_path_factory.mktemp("interop")) as proc:
        yield proc


@pytest.fixture(scope="module")
def interop() -> Path:
    return java_classes()


def java(classes: Path, *args: str) -> str:
    result = subprocess.run(["java", "-cp", f"{classpath()}:{classes}", "Interop", *args],
                            capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return result.stdout.strip()


def test_stomp_text_reaches_java_as_a_text_message(broker: BrokerProcess, interop: Path) -> None:
    # Without content-length, as STOMP text is sent; ActiveMQ makes it a TextMessage.
    client = Client(broker.stomp_address, auto_content_length=False)
    client.send_raw("/queue/i.text", "h\u00e9llo", {"color": "red"})
    client.close()
    assert java(interop, "receive", str(broker.openwire_port), "i.text") == (
        "TextMessage h\u00e9llo color=red"
    )


def test_stomp_content_length_body_reaches_java_as_bytes(
    broker: BrokerProcess, interop: Path
) -> None:
    client = Client(broker.stomp_address, auto_decode=False)
    client.send("/queue/i.bytes", bytes(range(10)), color="red")  # stomp.py adds content-length
    client.close()
    assert java(interop, "receive", str(broker.openwire_port), "i.bytes") == (
        "BytesMessage 00010203040506070809 color=red"
    )


def test_java_text_reaches_stomp_with_headers(broker: BrokerProcess, interop: Path) -> None:
    java(interop, "send", str(broker.openwire_port), "i.back", "from java")
    client = Client(broker.stomp_address)
    client.subscribe("/queue/i.back")
    got = client.receive()
    assert got.body == "from java"
    assert got.headers["color"] == "red" and got.headers["correlation-id"] == "corr-1"
    assert got.headers["destination"] == "/queue/i.back"
    client.close()


def test_java_bytes_reach_stomp_as_raw_bytes(broker: BrokerProcess, interop: Path) -> None:
    java(interop, "bytes", str(broker.openwire_port), "i.raw")
    client = Client(broker.stomp_address, auto_decode=False)
    client.subscribe("/queue/i.raw")
    got = client.receive()
    assert got.body == bytes(range(10)) and got.headers["content-length"] == "10"
    client.close()


def amq_tool(*args: str, cwd: Path) -> str:
    log4j = cwd / "log4j.properties"
    log4j.write_text(
        "log4j.rootLogger=INFO, o\nlog4j.appender.o=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.o.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.o.layout.ConversionPattern=%m%n\n"
    )
    result = subprocess.run(
        ["java", f"-Dlog4j.configuration=file:{log4j}", f"-Dactivemq.home={HOME}",
         "-jar", str(HOME / "bin" / "activemq.jar"), *args],
        capture_output=True, text=True, timeout=120, cwd=cwd, check=True,
    )  # fmt: skip
    return result.stdout


def test_activemq_command_line_tools_report_their_counts(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    url = f"tcp://127.0.0.1:{broker.openwire_port}"
    produced = amq_tool(
        "producer", "--brokerUrl", url, "--destination", "queue://TOOL",
        "--messageCount", "2000", "--messageSize", "1024", cwd=tmp_path,
    )  # fmt: skip
    assert "Produced: 2000 messages" in produced
    consumed = amq_tool("consumer", "--brokerUrl", url, "--destination", "queue://TOOL",
                        "--messageCount", "2000", cwd=tmp_path)  # fmt: skip
    assert "Consumed: 2000 messages" in consumed


def test_garbage_on_the_openwire_port_leaves_others_unaffected(
    broker: BrokerProcess, interop: Path
) -> None:
    rng = random.Random(7)
    wfi = Marshaller().frame(broker_wire_format(0, 0, 0))
    for round_no in range(20):
        with socket.create_connection(("127.0.0.1", broker.openwire_port), timeout=10) as sock:
            if round_no % 2:
                sock.sendall(wfi)  # a valid start, then nonsense
            junk = bytearray(os.urandom(rng.randrange(1, 300)))
            junk[:4] = rng.randrange(1, 200).to_bytes(4, "big")
            sock.sendall(bytes(junk))
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):  # the broker answers or not, then closes: never hangs
                pass
    java(interop, "send", str(broker.openwire_port), "i.alive", "still serving")
    assert java(interop, "receive", str(broker.openwire_port), "i.alive") == (
        "TextMessage still serving color=red"
    )


def test_auto_port_serves_both_protocols(interop: Path, tmp_path: Path) -> None:
    with running_broker("[auto]\nenabled = true\nport = 0\n", workdir=tmp_path) as broker:
        assert broker.auto_port
        java(interop, "send", str(broker.auto_port), "auto.q", "via auto")
        client = Client(("127.0.0.1", broker.auto_port))
        client.subscribe("/queue/auto.q")
        assert client.receive().body == "via auto"
        client.close()
