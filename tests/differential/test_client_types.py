"""Property and map values keep their Java type through the broker: int, short, byte and
float (the wrapper types) apart from long and double (plain Python int and float)."""

from __future__ import annotations

from clientkit import connected

from differ import Target
from dovecote.client import JavaByte, JavaChar, JavaFloat, JavaInt, JavaShort, Message

VALUES = {
    "i": JavaInt(7), "s": JavaShort(-3), "b": JavaByte(5), "f": JavaFloat(1.5), "l": 2**40,
    "d": 2.25, "t": True, "x": "text", "c": JavaChar("z"),
}  # fmt: skip


def _typed(values: dict[str, object]) -> list[tuple[str, str, object]]:
    return sorted((k, type(v).__name__, v) for k, v in values.items())


def typed_values_round_trip(target: Target) -> tuple[object, ...]:
    with connected(target) as conn:
        session = conn.create_session()
        queue = session.queue(target.name)
        session.create_producer(queue).send(Message(dict(VALUES), properties=dict(VALUES)))
        # A selector sees the int property as a number: the type reached the broker.
        consumer = session.create_consumer(queue, selector="i = 7 AND s < 0 AND f > 1")
        message = consumer.receive(5)
        assert message is not None and isinstance(message.body, dict)
        return _typed(message.properties), _typed(message.body)


def test_typed_values_round_trip(differ) -> None:
    differ(typed_values_round_trip, (_typed(VALUES), _typed(VALUES)))
