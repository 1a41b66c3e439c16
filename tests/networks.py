"""Helpers for the network-of-brokers tests: connector configurations, and sending and
receiving through the Python client against dovecote or ActiveMQ brokers."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from dovecote.client import ConnectionFactory
from dovecote.client.connection import MessageConsumer
from dovecote.core.destinations import Destination

WAIT_S = 30.0


def connector_toml(
    broker: str, remotes: Sequence[int], name: str = "bridge", **options: object
) -> str:
    """A broker named ``broker`` with one network connector to the OpenWire ports given."""
    uri = ",".join(f"tcp://127.0.0.1:{port}" for port in remotes)
    lines = [f'[broker]\nname = "{broker}"\n', "[[network_connectors]]", f'name = "{name}"',
             f'uri = "static:({uri})"']  # fmt: skip
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
