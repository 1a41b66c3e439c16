"""Durable topic subscribers: kept while away, reconnected by name, deleted by
unsubscribe; and temporary topics."""

from __future__ import annotations

from clientkit import connected, drain

from differ import Target
from dovecote.client import JMSError


def durable_subscriber_keeps_messages_while_away(target: Target) -> list[object]:
    client_id = f"durable-{target.name}"
    with connected(target, client_id=client_id) as conn:
        session = conn.create_session()
        topic = session.topic(target.name)
        subscriber = session.create_durable_subscriber(topic, "sub")
        session.create_producer(topic).send("while here")
        here = [m.body for m in drain(subscriber)]
    with connected(target) as other:
        producer = other.create_session().create_producer(topic)
        for i in range(3):
            producer.send(f"away {i}")
    with connected(target, client_id=client_id) as conn:
        session = conn.create_session()
        subscriber = session.create_durable_subscriber(topic, "sub")
        back = [m.body for m in drain(subscriber)]
        try:
            session.unsubscribe("sub")  # still active: refused
            in_use = "accepted"
        except JMSError as refused:
            in_use = refused.class_name
        subscriber.close()
        session.unsubscribe("sub")
    with connected(target) as other:
        other.create_session().create_producer(topic).send("after unsubscribe")
    with connected(target, client_id=client_id) as conn:
        session = conn.create_session()
        fresh = [m.body for m in drain(session.create_durable_subscriber(topic, "sub"))]
        session.close()
        conn.create_session().unsubscribe("sub")
    return [here, back, in_use, fresh]


def test_durable_subscriber_keeps_messages_while_away(differ) -> None:
    differ(durable_subscriber_keeps_messages_while_away, [
        ["while here"], ["away 0", "away 1", "away 2"], "javax.jms.JMSException", [],
    ])  # fmt: skip


def durable_subscriber_needs_a_client_id(target: Target) -> str:
    with connected(target) as conn:
        session = conn.create_session()
        try:
            session.create_durable_subscriber(session.topic(target.name), "sub")
        except JMSError as refused:
            return refused.class_name
        return "accepted"


def test_durable_subscriber_needs_a_client_id(differ) -> None:
    differ(durable_subscriber_needs_a_client_id, "javax.jms.IllegalStateException")


def temporary_topic_request_and_reply(target: Target) -> tuple[list[object], list[object]]:
    """Two subscribers of a temporary topic both get what another connection sends to it."""
    with connected(target) as owner, connected(target) as other:
        session = owner.create_session()
        temp = session.create_temporary_topic()
        first = session.create_consumer(temp)
        second = owner.create_session().create_consumer(temp)
        producer = other.create_session().create_producer()
        for i in range(2):
            producer.send(f"r{i}", temp)
        return [m.body for m in drain(first)], [m.body for m in drain(second)]


def test_temporary_topic_request_and_reply(differ) -> None:
    differ(temporary_topic_request_and_reply, (["r0", "r1"], ["r0", "r1"]))
