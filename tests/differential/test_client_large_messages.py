"""Large messages reach our client whole and in order from either broker: its reader asks the
socket for what a large frame still lacks (up to client.transport.MAX_READ at a time), so a
frame larger than that comes in several reads, and a small one after it in the same stream."""

from __future__ import annotations

import hashlib

from clientkit import connected

from differ import Target
from dovecote.client import Message
from dovecote.client.transport import MAX_READ

SIZES = (MAX_READ + MAX_READ // 2, 3, 2 * MAX_READ + 1, 1000)


def body(size: int, seed: int) -> bytes:
    return (hashlib.sha256(b"%d" % seed).digest() * (size // 32 + 1))[:size]


def large_bodies_round_trip(target: Target) -> list[tuple[int, str]]:
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for seed, size in enumerate(SIZES):
            producer.send(Message(body(size, seed)))
        consumer = session.create_consumer(queue)
        got = []
        for _ in SIZES:
            message = consumer.receive(10)
            assert message is not None and isinstance(message.body, bytes)
            got.append((len(message.body), hashlib.sha256(message.body).hexdigest()))
        return got


def test_large_bodies_come_whole_and_in_order(differ) -> None:
    expected = [(size, hashlib.sha256(body(size, seed)).hexdigest())
                for seed, size in enumerate(SIZES)]  # fmt: skip
    differ(large_bodies_round_trip, expected)
