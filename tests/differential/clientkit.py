"""What the client scenarios (test_client_*.py) share: a started connection to a target,
draining a consumer, polling for a condition."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from differ import Target
from dovecote.client import Connection, ConnectionFactory, Message, MessageConsumer

NO_DELAY = "jms.redeliveryPolicy.initialRedeliveryDelay=0&jms.redeliveryPolicy.redeliveryDelay=0"
"""Redelivered at once after a recover or rollback (the policy's default waits a second)."""


@contextmanager
def connected(
    target: Target, options: str = "", client_id: str | None = None, start: bool = True
) -> Iterator[Connection]:
    url = f"{target.url}?{options}" if options else target.url
    connection = ConnectionFactory(url).create_connection(client_id=client_id)
    try:
        if start:
            connection.start()
        yield connection
    finally:
        connection.close()


def drain(consumer: MessageConsumer, timeout: float = 1.0) -> list[Message]:
    """Every message the consumer receives until one receive waits ``timeout`` in vain."""
    received = []
    while (message := consumer.receive(timeout)) is not None:
        received.append(message)
    return received


def seen(messages: list[Message]) -> list[tuple[object, bool, int]]:
    """Body, redelivered flag and JMSXDeliveryCount of each message."""
    return [(m.body, m.redelivered, m.delivery_count) for m in messages]


def until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
