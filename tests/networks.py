"""Helpers for the network-of-brokers tests: connector configurations, and sending and
receiving through the Python client against dovecote or ActiveMQ brokers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dovecote.client import ConnectionFactory, JMSError, Message, MessageProducer
from dovecote.client.connection import MessageConsumer
from dovecote.core.destinations import Destination, queue, topic

WAIT_S = 30.0


def connector_toml(
    broker: str,
    remotes: Sequence[int],
    name: str = "bridge",
    kind: str = "static",
    **options: object,
) -> str:
    """A broker named ``broker`` with one network connector to the OpenWire ports given
    (``kind``: static or masterslave)."""
    uri = ",".join(f"tcp://127.0.0.1:{port}" for port in remotes)
    lines = [f'[broker]\nname = "{broker}"\n', "[[network_connectors]]", f'name = "{name}"',
             f'uri = "{kind}:({uri})"']  # fmt: skip
    for key, value in options.items():
        lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines) + "\n"


def more_connectors(name: str, remotes: Sequence[int], **options: object) -> str:
    """Another ``[[network_connectors]]`` entry, to append to ``connector_toml``."""
    uri = ",".join(f"tcp://127.0.0.1:{port}" for port in remotes)
    lines = ["[[network_connectors]]", f'name = "{name}"', f'uri = "static:({uri})"']
    lines += [f"{key} = {_toml(value)}" for key, value in options.items()]
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def wait_for(check: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def admin_get(console_port: int, path: str) -> Any:
    """A JSON answer of a broker's admin API (``/api/...``)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{console_port}{path}", headers={"Host": "localhost"}
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)


def topic_statistics(port: int, name: str) -> dict[str, object]:
    """What a broker's statistics plugin (ActiveMQ's statisticsBrokerPlugin, dovecote's
    own) says of topic ``name``: its map message, or {} when it has no such topic."""
    end_of_list = "ActiveMQ.Statistics.Destination.List.End.With.Null"
    with ConnectionFactory(url(port)).create_connection() as connection:
        connection.start()
        session = connection.create_session()
        reply_to = session.create_temporary_queue()
        replies = session.create_consumer(reply_to)
        request = Message("", reply_to=reply_to, persistent=False,
                          properties={end_of_list: True})  # fmt: skip
        session.create_producer().send(
            request, destination=topic(f"ActiveMQ.Statistics.Destination.{name}")
        )
        found: dict[str, object] = {}
        while (reply := replies.receive(WAIT_S)) is not None and reply.body:
            assert isinstance(reply.body, dict)
            if str(reply.body.get("destinationName")) == f"topic://{name}":
                found = dict(reply.body)
        return found


def url(port: int) -> str:
    return f"tcp://127.0.0.1:{port}"


def send(
    port: int, destination: Destination, bodies: Sequence[str], persistent: bool = True
) -> None:
    with ConnectionFactory(url(port)).create_connection() as connection:
        session = connection.create_session()
        producer = session.create_producer(destination)
        for body in bodies:
            producer.send(body, persistent=persistent)


def send_in_background(
    port: int, destination: Destination, bodies: Sequence[str]
) -> threading.Event:
    """Send ``bodies`` persistent from a thread (to go on through a broker's kill); the event
    is set once all are sent."""
    sent = threading.Event()

    def produce() -> None:
        with ConnectionFactory(url(port)).create_connection() as connection:
            producer = connection.create_session().create_producer(destination)
            for body in bodies:
                producer.send(Message(body), persistent=True)
        sent.set()

    threading.Thread(target=produce, daemon=True).start()
    return sent


@contextmanager
def consumer(port: int, destination: Destination) -> Iterator[MessageConsumer]:
    with ConnectionFactory(url(port)).create_connection() as connection:
        connection.start()
        yield connection.create_session().create_consumer(destination)


def receive(consumer: MessageConsumer, count: int, timeout: float = WAIT_S) -> list[str]:
    """``count`` text bodies, or fewer when none comes for ``timeout`` seconds."""
    got: list[str] = []
    while len(got) < count:
        message = consumer.receive(timeout)
        if message is None:
            break
        got.append(message.text)
    return got


def quiet(consumer: MessageConsumer, seconds: float = 0.5) -> bool:
    """Nothing more comes within ``seconds``."""
    return consumer.receive(seconds) is None


def browse_count(port: int, destination: Destination) -> int:
    with ConnectionFactory(url(port)).create_connection() as connection:
        connection.start()
        return sum(1 for _ in connection.create_session().browse(destination))


class Collector(threading.Thread):
    """Receives from a broker (reconnecting with the failover transport, over the ports
    given in order) until told to stop; keeps every body and which were redeliveries."""

    def __init__(self, ports: int | Sequence[int], destination: Destination) -> None:
        super().__init__(daemon=True)
        self.ports = [ports] if isinstance(ports, int) else list(ports)
        self.destination = destination
        self.bodies: list[str] = []
        self.redelivered: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        addresses = ",".join(url(port) for port in self.ports)
        failover = (
            f"failover:({addresses})?randomize=false&initialReconnectDelay=100"
            "&maxReconnectDelay=500"
        )
        with ConnectionFactory(failover).create_connection() as connection:
            connection.start()
            consumer = connection.create_session().create_consumer(self.destination)
            while not self.done.is_set():
                message = consumer.receive(0.2)
                if message is not None:
                    (self.redelivered if message.redelivered else self.bodies).append(message.text)


def quiet_for(collector: Collector, seconds: float = 1.0) -> bool:
    """Nothing more arrives for a while (a duplicate would come after the last one)."""
    seen = len(collector.bodies)
    time.sleep(seconds)
    return len(collector.bodies) == seen


@dataclass
class Standby:
    """A broker started on a store another broker holds: it waits as a slave for the lock."""

    process: subprocess.Popen[str]
    lines: list[str]

    def log_text(self) -> str:
        return "".join(self.lines)


@contextmanager
def standby_broker(config_toml: str, workdir: Path, openwire_port: int) -> Iterator[Standby]:
    """``dovecote broker`` in ``workdir`` (whose store a running master holds), once it says
    it waits as a slave; SIGKILLed at the end if still running."""
    (workdir / "standby.toml").write_text(config_toml)
    process = subprocess.Popen(
        [sys.executable, "-m", "dovecote", "broker", "--config", "standby.toml",
         "--stomp-port", "0", "--openwire-port", str(openwire_port), "--console-port", "0"],
        cwd=workdir, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    lines: list[str] = []

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)

    threading.Thread(target=pump, daemon=True).start()
    standby = Standby(process, lines)
    try:
        wait_for(lambda: "waiting as a slave" in standby.log_text(), "the slave's wait")
        yield standby
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait()


def ask_across(service_port: int, requester_port: int, service_name: str) -> None:
    """Five requests from a requester on one broker to a service on the other, each
    answered to the requester's temporary queue."""
    with ConnectionFactory(url(service_port)).create_connection() as on_service, \
            ConnectionFactory(url(requester_port)).create_connection() as on_requester:  # fmt: skip
        on_service.start()
        on_requester.start()
        service_session = on_service.create_session()
        service = service_session.create_consumer(queue(service_name))
        answers = service_session.create_producer()
        session = on_requester.create_session()
        replies = session.create_temporary_queue()
        on_replies = session.create_consumer(replies)
        asking = session.create_producer(queue(service_name))
        for i in range(5):
            asking.send(Message(f"q{i}", reply_to=replies))
            request = service.receive(30)
            assert request is not None, f"request {i} did not reach the service"
            # (the reply-to may not be known there yet: the answer waits for it)
            wait_for(lambda r=request: _answered(answers, r), "a reply sent", 30)  # type: ignore[misc]
            reply = on_replies.receive(30)
            assert reply is not None and reply.text == f"a{i}", f"reply {i}"


def _answered(producer: MessageProducer, request: Message) -> bool:
    """Answer ``request``; False while its reply-to is not known here yet."""
    try:
        producer.send(Message(f"a{request.text[1:]}"), destination=request.reply_to)
    except JMSError:
        return False
    return True
