"""STOMP conformance: ack modes, redelivery, NACK, dead-letter queues, expiry and
transactions (compatibility C4, R1-R4, T1), over real sockets with stomp.py."""

from __future__ import annotations

import time
from collections.abc import Callable

from stompclient import Client

Connect = Callable[..., Client]


def _fill(client: Client, destination: str, count: int, **headers: str) -> None:
    for i in range(count):
        client.send(destination, f"m{i}", **headers)


def _dlq_consumer(connect: Connect, dlq: str, name: str) -> Client:
    """A consumer of a dead-letter queue that sees only this test's messages."""
    client = connect()
    client.subscribe(f"/queue/{dlq}", selector=f"test = '{name}'")
    return client


def test_client_ack_is_cumulative(connect: Connect, name: str) -> None:
    client = connect()
    _fill(client, f"/queue/{name}", 3)
    sid = client.subscribe(f"/queue/{name}", ack="client")
    got = client.receive_n(3)
    client.ack(got[1])  # acks m0 and m1
    client.unsubscribe(sid)
    client.subscribe(f"/queue/{name}", ack="client")
    again = client.receive()
    assert again.body == "m2"
    assert again.headers["redelivered"] == "true"
    assert client.nothing_more()


def test_client_individual_ack_acks_one(connect: Connect, name: str) -> None:
    client = connect()
    _fill(client, f"/queue/{name}", 3)
    sid = client.subscribe(f"/queue/{name}", ack="client-individual")
    got = client.receive_n(3)
    client.ack(got[1])
    client.unsubscribe(sid)
    client.subscribe(f"/queue/{name}", ack="client-individual")
    assert [m.body for m in client.receive_n(2)] == ["m0", "m2"]
    assert client.nothing_more()


def test_unacked_messages_redelivered_with_flag_after_consumer_leaves(
    connect: Connect, name: str
) -> None:
    first = connect()
    first.subscribe(f"/queue/{name}", ack="client-individual")
    connect().send(f"/queue/{name}", "once")
    got = first.receive()
    assert "redelivered" not in got.headers
    first.close()  # leaves without acking
    second = connect()
    second.subscribe(f"/queue/{name}", ack="client-individual")
    again = second.receive()
    assert again.body == "once"
    assert again.headers["redelivered"] == "true"
    assert again.id == got.id


def test_auto_ack_messages_are_not_redelivered(connect: Connect, name: str) -> None:
    first = connect()
    sid = first.subscribe(f"/queue/{name}")
    connect().send(f"/queue/{name}", "once")
    first.receive()
    first.unsubscribe(sid)
    first.subscribe(f"/queue/{name}")
    assert first.nothing_more()


def test_nack_sends_a_persistent_message_to_the_shared_dlq(connect: Connect, name: str) -> None:
    dlq = _dlq_consumer(connect, "ActiveMQ.DLQ", name)
    client = connect()
    client.subscribe(f"/queue/{name}", ack="client-individual")
    client.send(f"/queue/{name}", "bad", persistent="true", test=name)
    client.nack(client.receive())
    dead = dlq.receive()
    assert dead.body == "bad"
    assert dead.headers["original-destination"] == f"/queue/{name}"
    assert "dlqDeliveryFailureCause" not in dead.headers  # a NACK gives no cause, as ActiveMQ
    assert client.nothing_more()


def test_nack_under_the_individual_strategy_goes_to_dlq_dot_queue(
    connect: Connect, name: str
) -> None:
    queue = f"indiv.{name}"
    dlq = _dlq_consumer(connect, f"DLQ.{queue}", name)
    client = connect()
    client.subscribe(f"/queue/{queue}", ack="client")
    client.send(f"/queue/{queue}", "bad", persistent="true", test=name)
    client.nack(client.receive())
    assert dlq.receive().body == "bad"


def test_non_persistent_message_nacked_is_discarded_not_dead_lettered(
    connect: Connect, name: str
) -> None:
    dlq = _dlq_consumer(connect, "ActiveMQ.DLQ", name)
    client = connect()
    client.subscribe(f"/queue/{name}", ack="client-individual")
    client.send(f"/queue/{name}", "gone", test=name)
    client.nack(client.receive())
    assert client.nothing_more()
    assert dlq.nothing_more()


def test_redelivery_exhaustion_ends_in_the_dlq_after_six_redeliveries(
    connect: Connect, name: str
) -> None:
    dlq = _dlq_consumer(connect, "ActiveMQ.DLQ", name)
    client = connect()
    client.send(f"/queue/{name}", "poison", persistent="true", test=name)
    deliveries = 0
    for _ in range(7):
        sid = client.subscribe(f"/queue/{name}", ack="client")
        client.receive()
        deliveries += 1
        client.unsubscribe(sid)  # leave it unacked: it comes back, counted
    client.subscribe(f"/queue/{name}", ack="client")
    assert client.nothing_more()
    assert deliveries == 7  # the first delivery and maximumRedeliveries = 6
    dead = dlq.receive()
    assert dead.body == "poison"
    assert "redelivery" in dead.headers["dlqDeliveryFailureCause"]


def test_redelivery_limit_from_the_policy_with_individual_dlq(connect: Connect, name: str) -> None:
    queue = f"short.{name}"
    dlq = _dlq_consumer(connect, "ActiveMQ.DLQ", name)
    client = connect()
    client.send(f"/queue/{queue}", "poison", persistent="true", test=name)
    for expected in range(3):
        sid = client.subscribe(f"/queue/{queue}", ack="client")
        got = client.receive()
        assert ("redelivered" in got.headers) == (expected > 0)
        client.unsubscribe(sid)
    assert dlq.receive().body == "poison"


def test_expired_message_is_never_delivered_and_goes_to_the_dlq(
    connect: Connect, name: str
) -> None:
    dlq = _dlq_consumer(connect, "ActiveMQ.DLQ", name)
    producer = connect()
    past = int(time.time() * 1000) - 1000
    producer.send(f"/queue/{name}", "stale", persistent="true", expires=past, test=name)
    producer.send(f"/queue/{name}", "stale-np", expires=past, test=name)
    producer.send(f"/queue/{name}", "fresh", test=name)
    consumer = connect()
    consumer.subscribe(f"/queue/{name}")
    assert consumer.receive().body == "fresh"
    assert consumer.nothing_more()
    dead = dlq.receive()
    assert dead.body == "stale"
    assert dead.headers["expires"] == "0"
    assert dlq.nothing_more()  # the non-persistent one is dropped (processNonPersistent=false)


def test_expiry_sweep_moves_messages_nobody_consumes(connect: Connect, name: str) -> None:
    dlq = _dlq_consumer(connect, "ActiveMQ.DLQ", name)
    soon = int(time.time() * 1000) + 300
    connect().send(f"/queue/{name}", "will expire", persistent="true", expires=soon, test=name)
    # No consumer on the queue: only the periodic sweep can find it (every 200 ms here).
    assert dlq.receive().body == "will expire"


def test_transaction_commit_makes_sends_visible(connect: Connect, name: str) -> None:
    consumer = connect()
    consumer.subscribe(f"/queue/{name}")
    producer = connect()
    producer.conn.begin("tx1")
    producer.send(f"/queue/{name}", "t1", transaction="tx1")
    producer.send(f"/queue/{name}", "t2", transaction="tx1")
    assert consumer.nothing_more()
    producer.conn.commit("tx1", headers={"receipt": "c1"})
    producer.wait_receipt("c1")
    assert [m.body for m in consumer.receive_n(2)] == ["t1", "t2"]


def test_transaction_abort_discards_sends(connect: Connect, name: str) -> None:
    consumer = connect()
    consumer.subscribe(f"/queue/{name}")
    producer = connect()
    producer.conn.begin("tx1")
    producer.send(f"/queue/{name}", "never", transaction="tx1")
    producer.conn.abort("tx1", headers={"receipt": "a1"})
    producer.wait_receipt("a1")
    producer.send(f"/queue/{name}", "after")
    assert consumer.receive().body == "after"
    assert consumer.nothing_more()


def test_transacted_ack_abort_redelivers_and_commit_consumes(connect: Connect, name: str) -> None:
    client = connect()
    client.send(f"/queue/{name}", "work")
    client.subscribe(f"/queue/{name}", ack="client-individual")
    got = client.receive()
    client.conn.begin("tx1")
    client.ack(got, transaction="tx1")
    client.conn.abort("tx1")
    again = client.receive()
    assert again.body == "work" and again.headers["redelivered"] == "true"
    client.conn.begin("tx2")
    client.ack(again, transaction="tx2")
    client.conn.commit("tx2", headers={"receipt": "c2"})
    client.wait_receipt("c2")
    other = connect()
    other.subscribe(f"/queue/{name}")
    assert other.nothing_more()
