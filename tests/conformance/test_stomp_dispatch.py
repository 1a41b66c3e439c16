"""STOMP conformance: how the broker chooses consumers and order (compatibility C2, C8): prefetch,
selectors, priority, message groups, exclusive consumers."""

from __future__ import annotations

from collections.abc import Callable

from stompclient import Client

Connect = Callable[..., Client]


def test_selector_picks_matching_messages(connect: Connect, name: str) -> None:
    reds = connect()
    reds.subscribe(f"/queue/{name}", selector="color = 'red' AND weight > 2")
    producer = connect()
    producer.send(f"/queue/{name}", "r-heavy", color="red", weight="5")
    producer.send(f"/queue/{name}", "b-heavy", color="blue", weight="5")
    producer.send(f"/queue/{name}", "r-light", color="red", weight="1")
    # STOMP header values are strings, and ActiveMQ's STOMP reads one compared with a number
    # as a number ("5" > 2): the heavy red one matches.
    assert reds.receive().body == "r-heavy"
    assert reds.nothing_more()
    rest = connect()
    rest.subscribe(f"/queue/{name}", selector="color = 'red' OR color LIKE 'bl%'")
    assert sorted(m.body for m in rest.receive_n(2)) == ["b-heavy", "r-light"]


def test_selector_on_headers(connect: Connect, name: str) -> None:
    client = connect()
    client.subscribe(f"/queue/{name}", selector="JMSPriority > 6 OR JMSType = 'urgent'")
    client.send(f"/queue/{name}", "low", priority="2")
    client.send(f"/queue/{name}", "high", priority="8")
    client.send(f"/queue/{name}", "typed", type="urgent")
    assert [m.body for m in client.receive_n(2)] == ["high", "typed"]
    assert client.nothing_more()


def test_invalid_selector_is_an_error(connect: Connect, name: str) -> None:
    client = connect()
    client.conn.subscribe(f"/queue/{name}", "s", headers={"selector": "a = = 1"})
    error = client.listener.errors.get(timeout=10)
    assert "selector" in error.headers["message"]


def test_backlog_is_delivered_in_priority_order(connect: Connect, name: str) -> None:
    producer = connect()
    for priority in (1, 9, 4, 7, 4, 0):
        producer.send(f"/queue/{name}", f"p{priority}", priority=str(priority))
    consumer = connect()
    consumer.subscribe(f"/queue/{name}")
    assert [m.body for m in consumer.receive_n(6)] == ["p9", "p7", "p4", "p4", "p1", "p0"]


def test_message_group_sticks_to_one_consumer(connect: Connect, name: str) -> None:
    a, b = connect(), connect()
    a.subscribe(f"/queue/{name}", ack="client-individual", **{"activemq.prefetchSize": "100"})
    b.subscribe(f"/queue/{name}", ack="client-individual", **{"activemq.prefetchSize": "100"})
    producer = connect()
    for i in range(6):
        producer.send(f"/queue/{name}", f"g1-{i}", JMSXGroupID="g1")
        producer.send(f"/queue/{name}", f"g2-{i}", JMSXGroupID="g2")
    a.sync()
    b.sync()
    by_consumer = {}
    for label, client in (("a", a), ("b", b)):
        while not client.listener.messages.empty():
            m = client.receive()
            group = str(m.body).split("-")[0]  # (no JMSXGroupID header, as on ActiveMQ)
            by_consumer.setdefault(group, set()).add(label)
    assert set(by_consumer) == {"g1", "g2"}
    assert all(len(owners) == 1 for owners in by_consumer.values())


def test_exclusive_consumer_takes_everything(connect: Connect, name: str) -> None:
    shared = connect()
    shared.subscribe(f"/queue/{name}")
    exclusive = connect()
    exclusive.subscribe(f"/queue/{name}", **{"activemq.exclusive": "true"})
    producer = connect()
    for i in range(5):
        producer.send(f"/queue/{name}", f"e{i}")
    assert [m.body for m in exclusive.receive_n(5)] == [f"e{i}" for i in range(5)]
    assert shared.nothing_more()
    exclusive.close()
    producer.send(f"/queue/{name}", "after")
    assert shared.receive().body == "after"


def test_late_consumer_gets_nothing_of_a_backlog_at_default_prefetch(
    connect: Connect, name: str
) -> None:
    """The seeds' prefetch experiment: the first consumer's 1000-message window swallows
    the whole backlog, so a second consumer joining later gets none of it."""
    producer = connect()
    for i in range(1000):
        producer.send(f"/queue/{name}", f"m{i}", receipt=(i == 999))
    first = connect()
    first.subscribe(f"/queue/{name}", ack="client-individual")
    first.receive()
    second = connect()
    second.subscribe(f"/queue/{name}", ack="client-individual")
    assert second.nothing_more()


def test_late_consumer_shares_the_backlog_at_prefetch_one(connect: Connect, name: str) -> None:
    producer = connect()
    for i in range(20):
        producer.send(f"/queue/{name}", f"m{i}", receipt=(i == 19))
    first = connect()
    first.subscribe(f"/queue/{name}", ack="client-individual", **{"activemq.prefetchSize": "1"})
    held = first.receive()
    second = connect()
    second.subscribe(f"/queue/{name}", ack="client-individual", **{"activemq.prefetchSize": "1"})
    got_second = second.receive()
    assert got_second.body != held.body
    assert first.nothing_more()  # its window of 1 is full until it acks
    # Acking frees each window by one; both keep getting a share.
    counts = {"first": 1, "second": 1}
    last = {"first": held, "second": got_second}
    clients = {"first": first, "second": second}
    for _ in range(9):
        for label, client in clients.items():
            client.ack(last[label])
            last[label] = client.receive()
            counts[label] += 1
    assert counts == {"first": 10, "second": 10}


def test_prefetch_window_limits_unacked_messages(connect: Connect, name: str) -> None:
    producer = connect()
    for i in range(10):
        producer.send(f"/queue/{name}", f"m{i}")
    consumer = connect()
    consumer.subscribe(f"/queue/{name}", ack="client", **{"activemq.prefetchSize": "3"})
    got = consumer.receive_n(3)
    assert consumer.nothing_more()
    consumer.ack(got[-1])
    assert [m.body for m in consumer.receive_n(3)] == ["m3", "m4", "m5"]


def test_slow_topic_subscriber_keeps_only_the_newest_pending_messages(
    connect: Connect, name: str
) -> None:
    """constantPendingMessageLimitStrategy (compatibility D4): beyond its prefetch, a non-durable
    subscriber keeps at most the limit, dropping the oldest."""
    slow = connect()
    slow.subscribe(
        f"/topic/{name}",
        ack="client",
        **{"activemq.prefetchSize": "2", "activemq.maximumPendingMessageLimit": "3"},
    )
    producer = connect()
    for i in range(10):
        producer.send(f"/topic/{name}", f"t{i}")
    first = slow.receive_n(2)
    assert [m.body for m in first] == ["t0", "t1"]
    slow.ack(first[-1])
    second = slow.receive_n(2)
    assert [m.body for m in second] == ["t7", "t8"]
    slow.ack(second[-1])
    assert slow.receive().body == "t9"
    assert slow.nothing_more()
