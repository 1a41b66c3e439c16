"""The broker's plugin seam: each hook is called where the broker says, with what it says,
and a hook that raises refuses the thing it was asked about, leaving nothing half-made.
A real broker on the memory store; the plugin records what it is told."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dovecote.broker.broker import Broker
from dovecote.broker.connection import ConnectionState, Peer
from dovecote.broker.plugins import BrokerPlugin, PluginChain
from dovecote.broker.policy import BrokerSettings
from dovecote.core.commands import (
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    MessageDispatch,
    ProducerInfo,
    RemoveInfo,
    SendMessage,
    SessionInfo,
)
from dovecote.core.destinations import Destination, DestinationType, queue
from dovecote.core.errors import BrokerError
from dovecote.core.ids import ConnectionId, ConsumerId, ProducerId, SessionId
from dovecote.core.message import Message
from dovecote.store.memory import MemoryPersistenceAdapter


class Refused(BrokerError):
    pass


class Recorder(BrokerPlugin):
    """Records every hook; refuses what names "forbidden"."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    async def on_connect(self, state: ConnectionState) -> None:
        self.calls.append(("connect", state.peer))
        if state.info.user_name == "forbidden":
            raise Refused("not you")

    async def on_disconnect(self, state: ConnectionState) -> None:
        self.calls.append(("disconnect", state.client_id))

    async def on_add_consumer(self, state: ConnectionState, info: ConsumerInfo) -> None:
        self.calls.append(("add_consumer", info.destination.name))
        if info.destination.name == "forbidden":
            raise Refused("no reading")

    async def on_remove_consumer(self, state: ConnectionState, info: ConsumerInfo) -> None:
        self.calls.append(("remove_consumer", info.destination.name))

    async def on_add_producer(self, state: ConnectionState, info: ProducerInfo) -> None:
        self.calls.append(("add_producer", info.producer_id.value))

    async def on_remove_producer(self, state: ConnectionState, producer_id: ProducerId) -> None:
        self.calls.append(("remove_producer", producer_id.value))

    async def on_add_destination(self, state: ConnectionState, destination: Destination) -> None:
        self.calls.append(("add_destination", destination.name))
        if destination.name == "forbidden":
            raise Refused("no creating")

    async def on_remove_destination(self, state: ConnectionState, destination: Destination) -> None:
        self.calls.append(("remove_destination", destination.name))

    def check_send(self, state: ConnectionState, message: Message) -> None:
        self.calls.append(("send", message.destination.name))
        if message.destination.name == "forbidden":
            raise Refused("no writing")


CONNECTION = ConnectionId("ID:c")
SESSION = SessionId(CONNECTION, 1)


@pytest.fixture
async def broker() -> AsyncIterator[tuple[Broker, Recorder]]:
    recorder = Recorder()
    b = Broker(
        BrokerSettings(expire_messages_period_ms=0), MemoryPersistenceAdapter(), plugins=[recorder]
    )
    await b.start()
    yield b, recorder
    await b.stop()


def send(name: str, n: int = 1) -> SendMessage:
    return SendMessage(Message(f"ID:p:1:1:{n}", queue(name), b"x", persistent=True))


async def test_hooks_are_called_in_order_with_what_they_concern(
    broker: tuple[Broker, Recorder],
) -> None:
    b, recorder = broker
    got: list[MessageDispatch] = []
    peer = Peer("127.0.0.1:5000", "openwire")
    await b.add_connection(ConnectionInfo(CONNECTION, "client"), got.append, peer)
    await b.process(CONNECTION, SessionInfo(SESSION))
    await b.process(CONNECTION, ProducerInfo(ProducerId(SESSION, 1), queue("q")))
    await b.process(CONNECTION, ConsumerInfo(ConsumerId(SESSION, 1), queue("q")))
    await b.process(CONNECTION, send("q"))
    temp = Destination(DestinationType.TEMP_QUEUE, "ID:c:1")
    await b.process(CONNECTION, DestinationInfo(CONNECTION, temp))
    await b.process(CONNECTION, DestinationInfo(CONNECTION, temp, add=False))
    await b.process(CONNECTION, RemoveInfo(ProducerId(SESSION, 1)))
    await b.process(CONNECTION, RemoveInfo(ConsumerId(SESSION, 1)))
    await b.process(CONNECTION, ProducerInfo(ProducerId(SESSION, 2)))
    await b.remove_connection(CONNECTION)
    assert recorder.calls == [
        ("connect", peer),
        ("add_producer", 1),
        ("add_consumer", "q"),
        ("send", "q"),
        ("add_destination", "ID:c:1"),
        ("remove_destination", "ID:c:1"),
        ("remove_producer", 1),
        ("remove_consumer", "q"),
        ("add_producer", 2),
        ("remove_producer", 2),
        ("disconnect", "client"),
    ]
    assert [d.message is not None for d in got] == [True]


async def test_a_refused_connection_is_not_registered(broker: tuple[Broker, Recorder]) -> None:
    b, _ = broker
    with pytest.raises(Refused):
        await b.add_connection(ConnectionInfo(CONNECTION, "same", "forbidden"), lambda d: None)
    assert list(b.connections()) == []
    # Its client id was not taken either.
    await b.add_connection(ConnectionInfo(ConnectionId("ID:d"), "same"), lambda d: None)


async def test_refused_sends_consumers_and_destinations_leave_nothing(
    broker: tuple[Broker, Recorder],
) -> None:
    b, _ = broker
    await b.add_connection(ConnectionInfo(CONNECTION), lambda d: None)
    await b.process(CONNECTION, SessionInfo(SESSION))
    with pytest.raises(Refused):
        await b.process(CONNECTION, send("forbidden"))
    with pytest.raises(Refused):
        b.admit_send_now(CONNECTION, send("forbidden", 2))
    with pytest.raises(Refused):
        await b.process(CONNECTION, ConsumerInfo(ConsumerId(SESSION, 1), queue("forbidden")))
    temp = Destination(DestinationType.TEMP_QUEUE, "forbidden")
    with pytest.raises(Refused):
        await b.process(CONNECTION, DestinationInfo(CONNECTION, temp))
    assert not b.query.destination_exists(queue("forbidden"))
    assert not b.query.destination_exists(temp)
    # The connection goes on.
    await b.process(CONNECTION, send("fine"))
    assert b.query.destination_exists(queue("fine"))


def test_a_chain_calls_only_the_plugins_that_override_a_hook() -> None:
    class SendChecker(BrokerPlugin):
        def check_send(self, state: ConnectionState, message: Message) -> None:
            return None

    assert not PluginChain([BrokerPlugin()]).checks_sends
    assert PluginChain([BrokerPlugin(), SendChecker()]).checks_sends
