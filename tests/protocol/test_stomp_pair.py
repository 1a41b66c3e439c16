"""The STOMP converter and the broker paired in memory (no sockets), h11's ConnectionPair
style: frames in, frames out, through the real broker and memory store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dovecote.broker.broker import Broker
from dovecote.broker.policy import BrokerSettings
from dovecote.core.errors import DovecoteError, RemoteProtocolError, UnknownSubscriptionError
from dovecote.core.ids import ConnectionId
from dovecote.protocol.stomp import Frame, encode_frame
from dovecote.protocol.stomp.converter import StompConverter
from dovecote.store.journal import JournalPersistenceAdapter
from dovecote.store.memory import MemoryPersistenceAdapter


class Client:
    """One converter wired to the broker; ``out`` collects every frame sent to the client."""

    def __init__(self, broker: Broker, name: str) -> None:
        self.broker = broker
        self.converter = StompConverter(ConnectionId(f"ID:{name}"))
        self.out: list[Frame] = []

    async def frame(self, command: str, body: bytes = b"", **headers: str) -> None:
        hdrs = tuple((k.replace("_", "-"), v) for k, v in headers.items())
        request = self.converter.on_frame(Frame(command, hdrs, body))
        if request.connect is not None:
            await self.broker.add_connection(request.connect, self._dispatch)
        for cmd in request.commands:
            await self.broker.process(self.converter.connection_id, cmd)
        if request.reply is not None:
            self.out.append(request.reply)

    def _dispatch(self, dispatch: object) -> None:
        frame = self.converter.on_dispatch(dispatch)  # type: ignore[arg-type]
        if frame is not None:
            self.out.append(frame)

    def messages(self) -> list[Frame]:
        got = [f for f in self.out if f.command == "MESSAGE"]
        self.out = [f for f in self.out if f.command != "MESSAGE"]
        return got


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    b = Broker(BrokerSettings(expire_messages_period_ms=0), MemoryPersistenceAdapter())
    await b.start()
    yield b
    await b.stop()


async def connected(broker: Broker, name: str, version: str = "1.2", **headers: str) -> Client:
    client = Client(broker, name)
    await client.frame("CONNECT", accept_version=version, host="x", **headers)
    assert client.out.pop().command == "CONNECTED"
    return client


async def test_connect_negotiates_the_highest_common_version(broker: Broker) -> None:
    client = Client(broker, "c")
    await client.frame("CONNECT", accept_version="1.0,1.1", host="x", heart_beat="0,0")
    connected_frame = client.out[-1]
    assert connected_frame.get("version") == "1.1"
    assert connected_frame.get("heart-beat") == "0,0"


async def test_send_receive_maps_headers(broker: Broker) -> None:
    client = await connected(broker, "c")
    await client.frame("SUBSCRIBE", destination="/queue/a", id="1", ack="client")
    await client.frame("SEND", b"hi", destination="/queue/a", persistent="true", color="red")
    (message,) = client.messages()
    assert message.body == b"hi"
    assert message.get("persistent") == "true"
    assert message.get("color") == "red"
    assert message.get("ack") == message.get("message-id")
    assert message.get("subscription") == "1"


async def test_receipt_follows_commands(broker: Broker) -> None:
    client = await connected(broker, "c")
    await client.frame("SEND", b"x", destination="/queue/a", receipt="r1")
    assert client.out[-1] == Frame("RECEIPT", (("receipt-id", "r1"),))


async def test_nack_is_not_in_stomp_1_0(broker: Broker) -> None:
    client = await connected(broker, "c", version="1.0")
    with pytest.raises(RemoteProtocolError, match="NACK"):
        await client.frame("NACK", message_id="x")


async def test_ack_of_an_unknown_message_names_it(broker: Broker) -> None:
    client = await connected(broker, "c")
    await client.frame("SUBSCRIBE", destination="/queue/a", id="1", ack="client")
    with pytest.raises(UnknownSubscriptionError, match="ID:none"):
        await client.frame("ACK", id="ID:none")


async def test_ack_on_an_auto_subscription_is_refused(broker: Broker) -> None:
    client = await connected(broker, "c")
    await client.frame("SUBSCRIBE", destination="/queue/a", id="1")
    await client.frame("SEND", b"x", destination="/queue/a")
    (message,) = client.messages()
    with pytest.raises(UnknownSubscriptionError):
        await client.frame("ACK", id=message.get("ack") or "")


async def test_error_frame_names_the_problem_and_the_receipt(broker: Broker) -> None:
    client = await connected(broker, "c")
    frame = Frame("COMMIT", (("transaction", "t9"), ("receipt", "r9")))
    try:
        client.converter.on_frame(frame)
    except DovecoteError as exc:
        error = client.converter.error_frame(exc, frame)
    assert error.command == "ERROR"
    assert "t9" in (error.get("message") or "")
    assert error.get("receipt-id") == "r9"


async def test_client_ack_settles_everything_up_to_the_acked_message(broker: Broker) -> None:
    client = await connected(broker, "c")
    await client.frame("SUBSCRIBE", destination="/queue/a", id="1", ack="client")
    for i in range(3):
        await client.frame("SEND", f"m{i}".encode(), destination="/queue/a")
    got = client.messages()
    await client.frame("ACK", id=got[1].get("ack") or "")
    assert broker.regions.queues[next(iter(broker.regions.queues))].size() == 1


async def test_temp_queue_names_are_private_to_the_connection(broker: Broker) -> None:
    owner = await connected(broker, "owner")
    await owner.frame("SUBSCRIBE", destination="/temp-queue/r", id="1")
    await owner.frame("SEND", b"q", destination="/queue/work", reply_to="/temp-queue/r")
    worker = await connected(broker, "worker")
    await worker.frame("SUBSCRIBE", destination="/queue/work", id="1")
    (request,) = worker.messages()
    reply_to = request.get("reply-to") or ""
    assert reply_to.startswith("/remote-temp-queue/")
    await worker.frame("SEND", b"a", destination=reply_to)
    (reply,) = owner.messages()
    assert reply.get("destination") == "/temp-queue/r"


async def test_stomp_1_0_message_headers_carry_no_raw_line_feed(broker: Broker) -> None:
    """A property with a line feed (an OpenWire producer may set one) cannot be escaped in
    STOMP 1.0: it reaches a 1.0 subscriber with the line feed turned into a space."""
    client = await connected(broker, "c", version="1.0")
    await client.frame("SUBSCRIBE", destination="/queue/lf", id="1")
    other = await connected(broker, "p", version="1.2")
    await other.frame("SEND", b"x", destination="/queue/lf", note="two\nlines")
    (message,) = client.messages()
    assert message.get("note") == "two lines"
    assert b"two\nlines" not in encode_frame(message, "1.0")


async def test_encoded_dispatch_is_the_frame_for_every_subscriber(broker: Broker) -> None:
    """encode_dispatch shares the encoding of a topic message among subscribers: the bytes
    each gets are still exactly its own frame, whatever its version and subscription id."""
    sender = await connected(broker, "sender")
    receivers = [
        await connected(broker, f"r{i}", version=("1.0", "1.1", "1.2")[i % 3]) for i in range(5)
    ]
    encoded: dict[int, list[bytes]] = {i: [] for i in range(5)}
    for i, receiver in enumerate(receivers):
        original = receiver.converter

        def capture(dispatch: object, i: int = i, converter: StompConverter = original) -> None:
            frame = converter.on_dispatch(dispatch)  # type: ignore[arg-type]
            data = converter.encode_dispatch(dispatch)  # type: ignore[arg-type]
            assert frame is not None and data == encode_frame(frame, converter.version)
            encoded[i].append(data)

        receiver._dispatch = capture  # type: ignore[method-assign]
        broker._connections[receiver.converter.connection_id].sink = capture
        await receiver.frame("SUBSCRIBE", destination="/topic/news", id=f"sub:{i}\\x")
    await sender.frame("SEND", b"one", destination="/topic/news", colour="r:ed")
    await sender.frame("SEND", b"two", destination="/topic/news", reply_to="/queue/replies")
    assert all(len(frames) == 2 for frames in encoded.values())


async def test_only_acks_with_a_receipt_ask_for_a_synced_store_write(broker: Broker) -> None:
    client = await connected(broker, "c")
    await client.frame("SUBSCRIBE", destination="/queue/a", id="1", ack="client-individual")
    for body in (b"one", b"two"):
        await client.frame("SEND", body, destination="/queue/a", persistent="true")
    first, second = client.messages()
    plain = client.converter.on_frame(Frame("ACK", (("id", first.get("ack") or ""),)))
    receipted = client.converter.on_frame(
        Frame("ACK", (("id", second.get("ack") or ""), ("receipt", "r")))
    )
    assert [c.sync for c in plain.commands] == [False]  # type: ignore[attr-defined]
    assert [c.sync for c in receipted.commands] == [True]  # type: ignore[attr-defined]


async def test_only_sends_with_a_receipt_ask_for_a_synced_store_write(broker: Broker) -> None:
    client = await connected(broker, "c")
    plain = client.converter.on_frame(
        Frame("SEND", (("destination", "/queue/a"), ("persistent", "true")), b"x")
    )
    receipted = client.converter.on_frame(
        Frame("SEND", (("destination", "/queue/a"), ("persistent", "true"), ("receipt", "r")))
    )
    assert [c.sync for c in plain.commands] == [False]  # type: ignore[attr-defined]
    assert [c.sync for c in receipted.commands] == [True]  # type: ignore[attr-defined]


async def test_a_persistent_send_is_fsynced_only_when_its_receipt_is_waited_for(
    tmp_path: Path, log_fsyncs: list[str]
) -> None:
    """KahaDB's rule, through the broker to a real journal: a send without a receipt is
    written (a later receipt's sync covers it), one with a receipt is synced first."""
    synced = log_fsyncs
    store = JournalPersistenceAdapter(tmp_path / "journal")
    b = Broker(BrokerSettings(expire_messages_period_ms=0), store)
    await b.start()
    try:
        client = await connected(b, "p")
        for _ in range(3):
            await client.frame("SEND", b"x", destination="/queue/a", persistent="true")
        assert synced == []
        await client.frame("SEND", b"y", destination="/queue/a", persistent="true", receipt="r")
        assert synced != []
        assert client.out[-1].command == "RECEIPT"
    finally:
        await b.stop()
    # Written all the same: a broker started on the store has all four.
    again = Broker(BrokerSettings(expire_messages_period_ms=0),
                   JournalPersistenceAdapter(tmp_path / "journal"))  # fmt: skip
    await again.start()
    try:
        client = await connected(again, "c")
        await client.frame("SUBSCRIBE", destination="/queue/a", id="1")
        assert [m.body for m in client.messages()] == [b"x", b"x", b"x", b"y"]
    finally:
        await again.stop()


async def test_written_dispatches_what_waits_and_starts_nothing_when_nothing_does(
    broker: Broker,
) -> None:
    # Auto-acked deliveries fill the window until the connection has written them.
    client = await connected(broker, "c")
    prefetch = {"activemq.prefetchSize": "2"}
    await client.frame("SUBSCRIBE", destination="/queue/a", id="1", **prefetch)
    for i in range(3):
        await client.frame("SEND", f"m{i}".encode(), destination="/queue/a")
    assert [m.body for m in client.messages()] == [b"m0", b"m1"]
    connection_id = client.converter.connection_id
    tasks = asyncio.all_tasks()
    broker.written(connection_id)  # m2 waits: a dispatch starts
    (dispatch,) = asyncio.all_tasks() - tasks
    await dispatch
    assert [m.body for m in client.messages()] == [b"m2"]
    broker.written(connection_id)  # the queue is empty: nothing to start
    assert asyncio.all_tasks() == tasks
