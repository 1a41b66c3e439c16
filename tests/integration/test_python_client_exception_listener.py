"""Connection.set_exception_listener (JMS's ExceptionListener), against dovecote and a real
ActiveMQ 5.17: the listener hears of the connection's loss (with failover, once it has
given up) and of a command the broker refused without being asked for a response."""

from __future__ import annotations

import queue
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from activemq import running_activemq
from brokers import running_broker
from dovecote.client import ConnectionFactory, JMSError


@pytest.fixture(params=["dovecote", "activemq"])
def broker(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[int, subprocess.Popen]]:  # type: ignore[type-arg]
    if request.param == "dovecote":
        with running_broker(workdir=tmp_path) as ours:
            yield ours.openwire_port, ours.process
    else:
        with running_activemq() as amq:
            yield amq.openwire_port, amq.process


@pytest.mark.parametrize(
    "options",
    ["", "failover:(tcp://127.0.0.1:{port})?maxReconnectAttempts=2&initialReconnectDelay=50"],
)
def test_the_listener_hears_of_the_lost_broker(broker, options: str) -> None:  # type: ignore[no-untyped-def]
    port, process = broker
    url = options.format(port=port) if options else f"tcp://127.0.0.1:{port}"
    heard: queue.Queue[JMSError] = queue.Queue()
    conn = ConnectionFactory(url).create_connection()
    try:
        conn.set_exception_listener(heard.put)
        conn.start()
        process.send_signal(signal.SIGKILL)
        process.wait()
        error = heard.get(timeout=20)
        assert error.class_name == "javax.jms.JMSException", error
        assert heard.empty()
    finally:
        conn.close()


def test_a_closed_connection_tells_its_listener_nothing(broker) -> None:  # type: ignore[no-untyped-def]
    port, _ = broker
    heard: queue.Queue[JMSError] = queue.Queue()
    conn = ConnectionFactory(f"tcp://127.0.0.1:{port}").create_connection()
    conn.set_exception_listener(heard.put)
    conn.start()
    conn.close()
    with pytest.raises(queue.Empty):
        heard.get(timeout=1)
