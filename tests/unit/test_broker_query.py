"""The broker's read-only query API: what the admin API, /metrics and plugins see of
destinations, connections (with their peer and user), consumers, producers, durable
subscriptions, a browse and the usages. A real broker on the memory store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dovecote.broker.broker import Broker
from dovecote.broker.connection import ConnectionState, Peer, Principal
from dovecote.broker.plugins import BrokerPlugin
from dovecote.broker.policy import BrokerSettings
from dovecote.core.commands import (
    ConnectionInfo,
    ConsumerInfo,
    MessageDispatch,
    ProducerInfo,
    RemoveInfo,
    SendMessage,
    SessionInfo,
)
from dovecote.core.destinations import queue, topic
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId, SessionId
from dovecote.core.message import Message
from dovecote.store.memory import MemoryPersistenceAdapter

ALICE = ConnectionId("ID:alice")
BOB = ConnectionId("ID:bob")


class NamesUsers(BrokerPlugin):
    """Authenticates everyone as the user they say they are."""

    async def on_connect(self, state: ConnectionState) -> None:
        if state.info.user_name:
            state.principal = Principal(state.info.user_name, frozenset({"users"}))


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = Broker(
        BrokerSettings(expire_messages_period_ms=0),
        MemoryPersistenceAdapter(),
        plugins=[NamesUsers()],
    )
    await b.start()
    yield b
    await b.stop()


def send(name: str, n: int, producer: ProducerId) -> SendMessage:
    message = Message(f"ID:{producer}:{n}", queue(name), f"m{n}".encode(), persistent=False)
    return SendMessage(message)


async def test_destinations_clients_and_usage_as_they_are(broker: Broker) -> None:
    got: list[MessageDispatch] = []
    peer = Peer("10.0.0.7:40000", "openwire", tls=True, certificate_subject="CN=alice")
    await broker.add_connection(ConnectionInfo(ALICE, "alice-app", "alice"), got.append, peer)
    await broker.add_connection(ConnectionInfo(BOB, None), got.append)
    session = SessionId(ALICE, 1)
    await broker.process(ALICE, SessionInfo(session))
    producer = ProducerId(session, 1)
    await broker.process(ALICE, ProducerInfo(producer, queue("orders")))
    for n in range(1, 4):
        await broker.process(ALICE, send("orders", n, producer))
    consumer = ConsumerId(session, 1)
    await broker.process(ALICE, ConsumerInfo(consumer, queue("orders"), prefetch_size=2))
    durable = ConsumerId(session, 2)
    await broker.process(ALICE, ConsumerInfo(durable, topic("news"), subscription_name="feed"))

    orders, news = broker.query.destinations()
    assert (orders.destination, orders.size, orders.enqueued, orders.inflight) == (
        queue("orders"), 3, 3, 2,
    )  # fmt: skip
    assert (orders.consumers, orders.producers, orders.dequeued) == (1, 1, 0)
    assert orders.memory_usage > 0
    assert (news.destination, news.consumers, news.enqueued) == (topic("news"), 1, 0)
    assert broker.query.destinations(queue(">")) == [orders]
    assert broker.query.destinations(queue("nothing")) == []

    totals = broker.query.broker().as_map()
    assert totals["size"] == 3 and totals["connectionCount"] == 2
    assert totals["memoryUsage"] == broker.query.usage().memory_used > 0

    alice, bob = sorted(broker.query.connections(), key=lambda c: c.connection_id)
    assert (alice.client_id, alice.peer, alice.user) == ("alice-app", peer, "alice")
    assert (alice.sessions, alice.consumers, alice.producers) == (1, 2, 1)
    assert (bob.client_id, bob.peer.address, bob.user) == (str(BOB), "", None)

    consumers = {c.consumer_id: c for c in broker.query.consumers()}
    assert consumers[str(consumer)].inflight == 2
    assert consumers[str(consumer)].prefetch == 2
    assert consumers[str(durable)].subscription_name == "feed"
    assert [(p.producer_id, p.destination) for p in broker.query.producers()] == [
        (str(producer), queue("orders"))
    ]
    [feed] = broker.query.durable_subscriptions()
    assert (feed.client_id, feed.name, feed.destination, feed.active) == (
        "alice-app", "feed", topic("news"), True,
    )  # fmt: skip

    # A browse sees what the queue holds, in order, and consumes nothing.
    assert [m.body for m in broker.query.browse(queue("orders"), 2)] == [b"m1", b"m2"]
    assert broker.query.browse(queue("absent"), 10) == []
    assert broker.query.destinations(queue("orders"))[0].size == 3

    await broker.process(ALICE, RemoveInfo(durable))
    assert not broker.query.durable_subscriptions()[0].active


async def test_the_query_changes_nothing(broker: Broker) -> None:
    """Listing a topic that only has a subscription does not make it a topic that was
    sent to; asking about a queue does not make it."""
    await broker.add_connection(ConnectionInfo(ALICE), lambda d: None)
    session = SessionId(ALICE, 1)
    await broker.process(ALICE, SessionInfo(session))
    await broker.process(ALICE, ConsumerInfo(ConsumerId(session, 1), topic("t")))
    before = broker.query.destinations()
    assert broker.query.browse(queue("q"), 5) == []
    assert not broker.query.destination_exists(queue("q"))
    assert broker.query.destinations() == before
    assert broker.query.sequence_watermark() == 0
