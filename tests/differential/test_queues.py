"""Queue basics, side by side: what a consumer sees of a queue's messages."""

from __future__ import annotations

from differ import Target
from dovecote.client import AckMode, ConnectionFactory


def sends_arrive_in_order_once(target: Target) -> list[tuple[str, bool]]:
    with ConnectionFactory(target.url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for i in range(3):
            producer.send(f"m{i}")
        consumer = session.create_consumer(queue)
        seen = []
        while (message := consumer.receive(1)) is not None:
            seen.append((message.body, message.redelivered))
        return seen


def test_sends_arrive_in_order_once(differ) -> None:
    differ(sends_arrive_in_order_once, [("m0", False), ("m1", False), ("m2", False)])


def client_ack_close_after_two_of_three(target: Target) -> list[tuple[str, bool]]:
    """A client-ack consumer receives two of three prefetched messages and closes without
    acking: the two it saw come back redelivered, the third as it was."""
    with ConnectionFactory(target.url).create_connection() as conn:
        conn.start()
        session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for i in range(3):
            producer.send(f"m{i}")
        consumer = session.create_consumer(queue)
        assert consumer.receive(5) is not None and consumer.receive(5) is not None
        consumer.close()
        consumer = session.create_consumer(queue)
        seen = []
        while (message := consumer.receive(1)) is not None:
            seen.append((message.body, message.redelivered))
            message.acknowledge()
        return seen


def test_client_ack_close_after_two_of_three(differ) -> None:
    differ(client_ack_close_after_two_of_three, [("m0", True), ("m1", True), ("m2", False)])
