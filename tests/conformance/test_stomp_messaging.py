"""STOMP conformance over real sockets with stomp.py: sending, receiving, the three
protocol versions, headers, bodies, topics, durable subscriptions, temp destinations."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from stompclient import Client

Connect = Callable[..., Client]


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_queue_send_and_receive_each_version(connect: Connect, name: str, version: str) -> None:
    client = connect(version=version)
    client.subscribe(f"/queue/{name}", sub_id=f"/queue/{name}" if version == "1.0" else None)
    client.send(f"/queue/{name}", "hello", color="blue")
    got = client.receive()
    assert got.body == "hello"
    assert got.headers["destination"] == f"/queue/{name}"
    assert got.headers["color"] == "blue"
    assert got.headers["priority"] == "4"
    assert got.headers["message-id"].startswith("ID:")


def test_queue_message_goes_to_one_consumer_only(connect: Connect, name: str) -> None:
    a, b = connect(), connect()
    a.subscribe(f"/queue/{name}")
    b.subscribe(f"/queue/{name}")
    producer = connect()
    for i in range(10):
        producer.send(f"/queue/{name}", f"m{i}")
    got = []
    while len(got) < 10:
        for client in (a, b):
            while not client.listener.messages.empty():
                got.append(client.receive().body)
        if len(got) < 10:
            a.sync()
            b.sync()
    assert sorted(got) == sorted(f"m{i}" for i in range(10))
    assert a.nothing_more() and b.nothing_more()


def test_topic_message_reaches_every_subscriber(connect: Connect, name: str) -> None:
    subs = [connect() for _ in range(3)]
    for client in subs:
        client.subscribe(f"/topic/{name}")
    connect().send(f"/topic/{name}", "news")
    assert [c.receive().body for c in subs] == ["news"] * 3


def test_topic_subscriber_gets_nothing_sent_before_it_subscribed(
    connect: Connect, name: str
) -> None:
    producer = connect()
    producer.send(f"/topic/{name}", "too early")
    late = connect()
    late.subscribe(f"/topic/{name}")
    producer.send(f"/topic/{name}", "on time")
    assert late.receive().body == "on time"
    assert late.nothing_more()


def test_durable_subscription_receives_what_was_published_while_away(
    connect: Connect, name: str
) -> None:
    client_id = f"durable-{name}"
    sub = connect(client_id=client_id)
    sid = sub.subscribe(f"/topic/{name}", **{"activemq.subscriptionName": "s1"})
    sub.unsubscribe(sid)  # deactivate, keep the subscription
    sub.close()
    producer = connect()
    for i in range(3):
        producer.send(f"/topic/{name}", f"while away {i}", persistent="true")
    back = connect(client_id=client_id)
    back.subscribe(f"/topic/{name}", ack="client-individual", **{"activemq.subscriptionName": "s1"})
    got = back.receive_n(3)
    assert [m.body for m in got] == [f"while away {i}" for i in range(3)]
    for m in got:
        back.ack(m)
    assert back.nothing_more()


def test_durable_subscription_removed_by_unsubscribe_with_its_name(
    connect: Connect, name: str
) -> None:
    client_id = f"durable-{name}"
    sub = connect(client_id=client_id)
    sid = sub.subscribe(f"/topic/{name}", **{"activemq.subscriptionName": "gone"})
    sub.unsubscribe(sid)  # the consumer first: named while in use, it is refused
    sub.unsubscribe(sid, **{"activemq.subscriptionName": "gone"})
    sub.close()
    connect().send(f"/topic/{name}", "nobody keeps this", persistent="true")
    back = connect(client_id=client_id)
    back.subscribe(f"/topic/{name}", **{"activemq.subscriptionName": "gone"})
    assert back.nothing_more()


def test_durable_subscription_without_a_client_id_is_the_connections(
    connect: Connect, name: str
) -> None:
    """As on ActiveMQ, the connection's own id stands in for a missing client-id header."""
    client = connect()
    client.subscribe(f"/topic/{name}", **{"activemq.subscriptionName": "x"})
    connect().send(f"/topic/{name}", "kept", persistent="true")
    assert client.receive().body == "kept"
    assert client.listener.errors.empty()


def test_wildcard_topic_subscriptions(connect: Connect, name: str) -> None:
    one, rest = connect(), connect()
    one.subscribe(f"/topic/{name}.*.price")
    rest.subscribe(f"/topic/{name}.>")
    producer = connect()
    producer.send(f"/topic/{name}.ibm.price", "p1")
    producer.send(f"/topic/{name}.ibm.volume", "v1")
    producer.send(f"/topic/{name}.ibm.price.extra", "x1")
    assert one.receive().body == "p1"
    assert one.nothing_more()
    assert sorted(m.body for m in rest.receive_n(3)) == ["p1", "v1", "x1"]


def test_composite_destination_sends_to_each(connect: Connect, name: str) -> None:
    q, t = connect(), connect()
    q.subscribe(f"/queue/{name}.a")
    t.subscribe(f"/topic/{name}.b")
    connect().send(f"/queue/{name}.a,/topic/{name}.b", "both")
    assert q.receive().body == "both"
    assert t.receive().body == "both"


def test_headers_survive_the_round_trip_with_escaping(connect: Connect, name: str) -> None:
    client = connect(version="1.2")
    client.subscribe(f"/queue/{name}")
    client.send(
        f"/queue/{name}",
        "x",
        correlation__id="corr-1",
        type="order",
        odd="colon:and\nnewline\\backslash",
    )
    got = client.receive()
    assert got.headers["correlation-id"] == "corr-1"
    assert got.headers["type"] == "order"
    assert got.headers["odd"] == "colon:and\nnewline\\backslash"


def test_binary_body_with_content_length_including_nul(connect: Connect, name: str) -> None:
    client = connect(auto_decode=False)
    client.subscribe(f"/queue/{name}")
    body = bytes(range(256)) * 4
    client.send(f"/queue/{name}", body)
    got = client.receive()
    assert got.body == body
    assert got.headers["content-length"] == str(len(body))


def test_large_binary_bodies_sent_back_to_back_come_whole_and_in_order(
    connect: Connect, name: str
) -> None:
    # Bodies of 32 KiB and more with a content-length reach a broker over many reads, and
    # here the small frame after each comes in the same reads as its end (dovecote collects
    # such a body as its chunks come: frames.COLLECT_FROM).
    client = connect(auto_decode=False)
    client.subscribe(f"/queue/{name}")
    rng = random.Random(7)
    small = b"small\x00between"
    sent: list[bytes] = []
    for size in (32 * 1024, 100 * 1024 + 7, 900 * 1024 + 3):  # (1 MiB frames here)
        body = rng.randbytes(size)  # every byte value, NULs included
        client.send(f"/queue/{name}", body, receipt=False)
        client.send(f"/queue/{name}", small, receipt=False)
        sent += [body, small]
    got = client.receive_n(len(sent))
    assert [m.body for m in got] == sent
    assert [m.headers["content-length"] for m in got] == [str(len(b)) for b in sent]


def test_temp_queue_request_reply(connect: Connect, name: str) -> None:
    server = connect()
    server.subscribe(f"/queue/{name}")
    requester = connect()
    requester.subscribe("/temp-queue/replies")
    requester.send(f"/queue/{name}", "ping", reply__to="/temp-queue/replies")
    request = server.receive()
    reply_to = request.headers["reply-to"]
    assert reply_to.startswith("/remote-temp-queue/")
    server.send(reply_to, "pong", correlation__id=request.id)
    reply = requester.receive()
    assert reply.body == "pong"
    assert reply.headers["correlation-id"] == request.id
    assert reply.headers["destination"] == "/temp-queue/replies"


def test_temp_queue_is_gone_with_its_connection(connect: Connect, name: str) -> None:
    requester = connect()
    requester.subscribe("/temp-queue/replies")
    requester.send(f"/queue/{name}", "ping", reply__to="/temp-queue/replies")
    server = connect()
    server.subscribe(f"/queue/{name}")
    reply_to = server.receive().headers["reply-to"]
    requester.close()
    server.conn.send(reply_to, "too late", headers={"receipt": "late"})
    error = server.listener.errors.get(timeout=10)
    assert "does not exist" in error.headers["message"]


def test_browse_does_not_consume(connect: Connect, name: str) -> None:
    producer = connect()
    for i in range(3):
        producer.send(f"/queue/{name}", f"b{i}")
    browser = connect()
    browser.subscribe(f"/queue/{name}", browser="true")
    seen = browser.receive_n(4)
    assert [m.body for m in seen[:3]] == ["b0", "b1", "b2"]
    assert seen[3].headers["browser"] == "end"
    consumer = connect()
    consumer.subscribe(f"/queue/{name}")
    assert [m.body for m in consumer.receive_n(3)] == ["b0", "b1", "b2"]


def test_no_local_subscriber_skips_its_own_connection(connect: Connect, name: str) -> None:
    client = connect()
    client.subscribe(f"/topic/{name}", **{"activemq.noLocal": "true"})
    client.send(f"/topic/{name}", "mine")
    connect().send(f"/topic/{name}", "theirs")
    assert client.receive().body == "theirs"
    assert client.nothing_more()
