"""Client options and consumer features, side by side: prefetch from the URL and from the
destination's options, selectors, browsing, temporary-queue request/reply, producer
windows, async and sync sends, a client id from the URL. Each scenario returns what the
client observed; the test compares it across ActiveMQ and dovecote."""

from __future__ import annotations

import threading

from differ import Target
from dovecote.client import AckMode, ConnectionFactory, Message


def prefetch_one_from_the_url(target: Target) -> dict[str, object]:
    """jms.prefetchPolicy.queuePrefetch=1: a client-ack consumer is given one message at a
    time (the one it holds unacked, then, once the client has said it was delivered, one
    more); another connection's consumer gets the rest (with the default 1000: nothing)."""
    url = target.url + "?jms.prefetchPolicy.queuePrefetch=1"
    with (
        ConnectionFactory(url).create_connection() as slow,
        ConnectionFactory(target.url).create_connection() as fast,
    ):
        slow.start()
        fast.start()
        slow_session = slow.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = slow_session.queue(target.name)
        producer = fast.create_session().create_producer(queue)
        for i in range(4):
            producer.send(f"m{i}")
        holder = slow_session.create_consumer(queue)
        first = holder.receive(5)
        # A round trip on its connection: the broker has the client's delivered-ack before
        # the other consumer exists.
        slow_session.create_producer(queue)
        others = fast.create_session().create_consumer(queue)
        rest = [m.body for m in iter(lambda: others.receive(1), None)]
        return {
            "held": first.body if first else None,
            "rest": rest,
            "held_more": holder.receive(0.5) is not None,
        }


def test_prefetch_one_from_the_url(differ) -> None:
    differ(prefetch_one_from_the_url, {"held": "m0", "rest": ["m2", "m3"], "held_more": True})


def prefetch_zero_from_the_url_takes_nothing_unasked(target: Target) -> dict[str, object]:
    """A pulling consumer (prefetch 0) is given nothing until it asks; a prefetching one
    beside it takes every message sent meanwhile."""
    url = target.url + "?jms.prefetchPolicy.queuePrefetch=0"
    with (
        ConnectionFactory(url).create_connection() as pulling,
        ConnectionFactory(target.url).create_connection() as pushing,
    ):
        pulling.start()
        pushing.start()
        queue = pulling.create_session().queue(target.name)
        puller = pulling.create_session().create_consumer(queue)
        taker = pushing.create_session().create_consumer(queue)
        producer = pushing.create_session().create_producer(queue)
        for i in range(3):
            producer.send(f"m{i}")
        taken = [taker.receive(5) for _ in range(3)]
        return {"taken": [m.body if m else None for m in taken], "pulled": puller.receive(0.5)}


def test_prefetch_zero_from_the_url_takes_nothing_unasked(differ) -> None:
    differ(
        prefetch_zero_from_the_url_takes_nothing_unasked,
        {"taken": ["m0", "m1", "m2"], "pulled": None},
    )


def prefetch_from_the_destination_options(target: Target) -> dict[str, object]:
    """``name?consumer.prefetchSize=1``: the option of the consumers made on it (the Java
    client's destination options), whatever the URL's policy says."""
    with (
        ConnectionFactory(target.url).create_connection() as slow,
        ConnectionFactory(target.url).create_connection() as fast,
    ):
        slow.start()
        fast.start()
        slow_session = slow.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        queue = slow_session.queue(target.name)
        producer = fast.create_session().create_producer(queue)
        for i in range(4):
            producer.send(f"m{i}")
        holder = slow_session.create_consumer(
            slow_session.queue(f"{target.name}?consumer.prefetchSize=1")
        )
        first = holder.receive(5)
        # A round trip on its connection: the broker has the client's delivered-ack before
        # the other consumer exists.
        slow_session.create_producer(queue)
        others = fast.create_session().create_consumer(queue)
        rest = [m.body for m in iter(lambda: others.receive(1), None)]
        return {"held": first.body if first else None, "rest": rest}


def test_prefetch_from_the_destination_options(differ) -> None:
    differ(prefetch_from_the_destination_options, {"held": "m0", "rest": ["m2", "m3"]})


def selectors_split_a_queue(target: Target) -> dict[str, list[str]]:
    with ConnectionFactory(target.url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for i, color in enumerate(["red", "blue", "red", "green", "blue"]):
            producer.send(Message(f"{color}{i}", properties={"color": color, "n": i}))
        red = session.create_consumer(queue, selector="color = 'red'")
        big = session.create_consumer(queue, selector="n >= 3 AND color <> 'red'")
        rest = session.create_consumer(queue)
        return {
            name: [m.body for m in iter(lambda c=consumer: c.receive(1), None)]
            for name, consumer in (("red", red), ("big", big), ("rest", rest))
        }


def test_selectors_split_a_queue(differ) -> None:
    differ(
        selectors_split_a_queue,
        {"red": ["red0", "red2"], "big": ["green3", "blue4"], "rest": ["blue1"]},
    )


def browsing_sees_all_and_consumes_nothing(target: Target) -> dict[str, list[str]]:
    with ConnectionFactory(target.url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for i in range(4):
            producer.send(Message(f"m{i}", properties={"even": i % 2 == 0}))
        browsed = [m.body for m in session.browse(queue)]
        even = [m.body for m in session.browse(queue, selector="even = TRUE")]
        consumer = session.create_consumer(queue)
        consumed = [m.body for m in iter(lambda: consumer.receive(1), None)]
        after = [m.body for m in session.browse(queue)]
        return {"browsed": browsed, "even": even, "consumed": consumed, "after": after}


def test_browsing_sees_all_and_consumes_nothing(differ) -> None:
    differ(
        browsing_sees_all_and_consumes_nothing,
        {
            "browsed": ["m0", "m1", "m2", "m3"],
            "even": ["m0", "m2"],
            "consumed": ["m0", "m1", "m2", "m3"],
            "after": [],
        },
    )


def request_reply_over_a_temporary_queue(target: Target) -> dict[str, object]:
    """A requester sends with replyTo its temporary queue; a service on another connection
    answers there with the request's correlation id."""
    with (
        ConnectionFactory(target.url).create_connection() as requester,
        ConnectionFactory(target.url).create_connection() as service,
    ):
        requester.start()
        service.start()
        session = requester.create_session()
        replies = session.create_temporary_queue()
        reply_consumer = session.create_consumer(replies)
        requests = session.queue(target.name)
        service_session = service.create_session()
        service_consumer = service_session.create_consumer(requests)
        answer = service_session.create_producer()

        def serve() -> None:
            request = service_consumer.receive(5)
            if request is not None and request.reply_to is not None:
                reply = Message(f"re: {request.body}", correlation_id=request.correlation_id)
                answer.send(reply, destination=request.reply_to)

        server = threading.Thread(target=serve)
        server.start()
        session.create_producer(requests).send(
            Message("ping", reply_to=replies, correlation_id="c-1")
        )
        got = reply_consumer.receive(5)
        server.join(10)
        return {
            "reply": got.body if got else None,
            "correlation": got.correlation_id if got else None,
            "temporary": replies.is_temporary,
        }


def test_request_reply_over_a_temporary_queue(differ) -> None:
    differ(
        request_reply_over_a_temporary_queue,
        {"reply": "re: ping", "correlation": "c-1", "temporary": True},
    )


def producer_window_async_sends_all_arrive(target: Target) -> dict[str, object]:
    """jms.producerWindowSize with async sends: the producer waits for the broker's
    ProducerAcks; every message arrives, in order."""
    url = target.url + "?jms.producerWindowSize=4096&jms.useAsyncSend=true"
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        queue = session.queue(target.name)
        producer = session.create_producer(queue)
        for i in range(40):
            producer.send(Message(f"{i:03d}" + "x" * 1000), persistent=True)
        consumer = session.create_consumer(queue)
        bodies = [m.body[:3] for m in iter(lambda: consumer.receive(2), None)]  # type: ignore[index]
        return {"count": len(bodies), "in_order": bodies == [f"{i:03d}" for i in range(40)]}


def test_producer_window_async_sends_all_arrive(differ) -> None:
    differ(producer_window_async_sends_all_arrive, {"count": 40, "in_order": True})


def async_and_sync_sends(target: Target) -> dict[str, object]:
    """useAsyncSend sends persistent messages without waiting for the broker; alwaysSyncSend
    waits even for non-persistent ones: both arrive, and only the synchronous ones took a
    round trip each."""
    seen: dict[str, object] = {}
    for options, persistent in (
        ("jms.useAsyncSend=true", True),
        ("jms.alwaysSyncSend=true", False),
    ):
        with ConnectionFactory(f"{target.url}?{options}").create_connection() as conn:
            conn.start()
            session = conn.create_session()
            queue = session.queue(f"{target.name}.{options[4:9]}")
            producer = session.create_producer(queue)
            before = conn.transport.round_trips
            for i in range(5):
                producer.send(f"m{i}", persistent=persistent)
            trips = conn.transport.round_trips - before
            consumer = session.create_consumer(queue)
            bodies = [m.body for m in iter(lambda c=consumer: c.receive(1), None)]
            seen[options] = (bodies, trips)
    return seen


def test_async_and_sync_sends(differ) -> None:
    bodies = ["m0", "m1", "m2", "m3", "m4"]
    differ(
        async_and_sync_sends,
        {"jms.useAsyncSend=true": (bodies, 0), "jms.alwaysSyncSend=true": (bodies, 5)},
    )


def durable_subscription_with_the_url_client_id(target: Target) -> list[str]:
    """jms.clientID from the URL names the connection: its durable subscription keeps what
    was published while it was away."""
    url = f"{target.url}?jms.clientID={target.name}.client"
    topic_name = f"{target.name}.topic"
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        session.create_durable_subscriber(session.topic(topic_name), "sub").close()
    with ConnectionFactory(target.url).create_connection() as publisher:
        session = publisher.create_session()
        producer = session.create_producer(session.topic(topic_name))
        for i in range(3):
            producer.send(f"m{i}", persistent=True)
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session()
        subscriber = session.create_durable_subscriber(session.topic(topic_name), "sub")
        got = [m.body for m in iter(lambda: subscriber.receive(2), None)]
        subscriber.close()
        session.unsubscribe("sub")
        return got  # type: ignore[return-value]


def test_durable_subscription_with_the_url_client_id(differ) -> None:
    differ(durable_subscription_with_the_url_client_id, ["m0", "m1", "m2"])
