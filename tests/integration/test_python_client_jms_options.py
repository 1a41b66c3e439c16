"""The ``jms.*`` connection-factory options (and failover's startupMaxReconnectAttempts)
the Python client acts on as ActiveMQ's Java client 5.17 does: what it sends on the wire,
recorded at the transport, and what the application sees, against dovecote and a real
ActiveMQ 5.17 (docs/client-options.md)."""

from __future__ import annotations

import re
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from dovecote.client import AckMode, Connection, ConnectionFactory, Message
from dovecote.client.transport import ClientTransport
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t

STANDARD, EXPIRED = 2, 6


@pytest.fixture
def name() -> str:
    return f"jms.{uuid.uuid4().hex[:10]}"


class Wire:
    """Every command any client transport sends while it is installed, as sent (with the
    responseRequired flag the transport set)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.commands: list[Structure] = []
        send = ClientTransport._send

        def record(transport: ClientTransport, structure: Structure, *held: bool) -> None:
            self.commands.append(structure)
            send(transport, structure, *held)

        monkeypatch.setattr(ClientTransport, "_send", record)

    def of(self, kind: int) -> list[Structure]:
        return [s for s in self.commands if s.type == kind]


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    return Wire(monkeypatch)


def _connect(url: str) -> Connection:
    conn = ConnectionFactory(url).create_connection()
    conn.start()
    return conn


def _with(url: str, options: str) -> str:
    return f"{url}?{options}"


# -- 1. jms.clientIDPrefix, jms.connectionIDPrefix ---------------------------------------------

# IdGenerator's form: <prefix>-<port>-<millis>-<generator>:<sequence>
GENERATED = r"{}-\d+-\d{{13}}-\d+:{}"


def test_ids_are_made_from_the_prefixes(broker_url: str, wire: Wire, name: str) -> None:
    factory = ConnectionFactory(
        _with(broker_url, "jms.clientIDPrefix=app.one&jms.connectionIDPrefix=conn")
    )
    with factory.create_connection() as first, factory.create_connection() as second:
        infos = wire.of(t.CONNECTION_INFO)
        assert len(infos) == 2
        for info, sequence in zip(infos, (1, 2), strict=True):
            assert re.fullmatch(GENERATED.format(r"app\.one", sequence), info["clientId"])
            assert re.fullmatch(GENERATED.format("conn", sequence), info["connectionId"]["value"])
        assert (first.client_id, second.client_id) == (infos[0]["clientId"], infos[1]["clientId"])
        # The broker took both (distinct client ids) and the connections work.
        session = second.create_session()
        queue = session.queue(name)
        session.create_producer(queue).send("hello")
        second.start()
        got = session.create_consumer(queue).receive(10)
        assert got is not None and got.text == "hello"
        assert got.message_id is not None and got.message_id.startswith("conn-")


def test_a_client_id_given_is_used_and_the_prefix_not(broker_url: str, wire: Wire) -> None:
    client_id = f"mine-{uuid.uuid4().hex[:8]}"
    url = _with(broker_url, f"jms.clientIDPrefix=app&jms.clientID={client_id}")
    with ConnectionFactory(url).create_connection():
        assert [i["clientId"] for i in wire.of(t.CONNECTION_INFO)] == [client_id]


# -- 2. the consumers' ConsumerInfo ------------------------------------------------------------


def test_consumer_info_takes_the_connection_options(broker_url: str, wire: Wire, name: str) -> None:
    options = (
        "jms.exclusiveConsumer=true&jms.dispatchAsync=false&jms.useRetroactiveConsumer=true"
        "&jms.prefetchPolicy.maximumPendingMessageLimit=7"
    )
    with _connect(_with(broker_url, options)) as conn:
        session = conn.create_session()
        session.create_consumer(session.queue(name))
        session.create_consumer(session.topic(name))
        infos = [i for i in wire.of(t.CONSUMER_INFO) if not i["destination"]["physicalName"]
                 .startswith("ActiveMQ.Advisory")]  # fmt: skip
        fields = [
            (i["exclusive"], i["dispatchAsync"], i["retroactive"], i["maximumPendingMessageLimit"])
            for i in infos
        ]
        assert fields == [(True, False, True, 7)] * 2  # as Java: on every consumer
        # The broker took them: a topic message reaches the (retroactive) subscriber.
        session.create_producer(session.topic(name)).send("t")
        topic_consumer = session._consumers[-1]
        got = topic_consumer.receive(10)
        assert got is not None and got.text == "t"


def test_the_defaults_are_javas(broker_url: str, wire: Wire, name: str) -> None:
    with _connect(broker_url) as conn:
        session = conn.create_session()
        session.create_consumer(session.queue(name))
        (info,) = [i for i in wire.of(t.CONSUMER_INFO) if i["destination"]["physicalName"] == name]
        fields = (info["exclusive"], info["dispatchAsync"], info["retroactive"],
                  info["maximumPendingMessageLimit"])  # fmt: skip
        assert fields == (False, True, False, 0)


def _second_gets(url: str, name: str, options: str = "") -> int:
    """How many of 6 messages a queue's second consumer gets (prefetch 1 each)."""
    with _connect(_with(url, f"jms.prefetchPolicy.all=1{options}")) as conn:
        session = conn.create_session()
        queue = session.queue(name)
        first, second = session.create_consumer(queue), session.create_consumer(queue)
        producer = session.create_producer(queue)
        for i in range(6):
            producer.send(f"m{i}")
        counts = [0, 0]
        for index, consumer in enumerate((second, first)):
            while consumer.receive(1.0) is not None:
                counts[index] += 1
        assert sum(counts) == 6
        return counts[0]


def test_exclusive_consumer_takes_every_message_of_the_queue(broker_url: str, name: str) -> None:
    assert _second_gets(broker_url, name) > 0  # not exclusive: the broker shares them
    assert _second_gets(broker_url, name + ".x", "&jms.exclusiveConsumer=true") == 0


def test_the_destination_option_and_the_argument_override_exclusive(
    broker_url: str, name: str
) -> None:
    """With the first consumer exclusive, the second, not exclusive, still gets none (the
    broker's rule); with neither exclusive they share."""
    url = _with(broker_url, "jms.exclusiveConsumer=true&jms.prefetchPolicy.all=1")
    with _connect(url) as conn:
        session = conn.create_session()
        first = session.create_consumer(session.queue(f"{name}?consumer.exclusive=false"))
        second = session.create_consumer(session.queue(name), exclusive=False)
        producer = session.create_producer(session.queue(name))
        for i in range(6):
            producer.send(f"m{i}")
        counts = [0, 0]
        for index, consumer in enumerate((first, second)):
            while consumer.receive(1.0) is not None:
                counts[index] += 1
        assert sum(counts) == 6 and min(counts) > 0


# -- 3. jms.disableTimeStampsByDefault, jms.consumerExpiryCheckEnabled --------------------------


def test_disabled_timestamps_send_zero_and_no_expiration(
    broker_url: str, wire: Wire, name: str
) -> None:
    with _connect(_with(broker_url, "jms.disableTimeStampsByDefault=true")) as conn:
        session = conn.create_session()
        queue = session.queue(name)
        producer = session.create_producer(queue)
        producer.send("no time", time_to_live=60_000)
        producer.disable_message_timestamp = False  # the JMS setter still decides per producer
        before = int(time.time() * 1000)
        producer.send("timed", time_to_live=60_000)
        sent = [(m["timestamp"], m["expiration"]) for m in wire.of(t.TEXT_MESSAGE)]
        assert sent[0] == (0, 0)
        assert sent[1][0] >= before and sent[1][1] == sent[1][0] + 60_000
        consumer = session.create_consumer(queue)
        untimed, timed = consumer.receive(10), consumer.receive(10)
        assert untimed is not None and (untimed.text, untimed.timestamp, untimed.expiration) == (
            "no time",
            0,
            0,
        )
        assert timed is not None and timed.timestamp >= before and timed.expiration > 0


def _expired_in_the_buffer(
    url: str, name: str, wire: Wire
) -> tuple[Message | None, list[tuple[int, bool]]]:
    """A message that expires while prefetched, then received; and the acks sent after
    (their type, and whether they waited for the broker)."""
    with _connect(url) as conn:
        session = conn.create_session()
        q = session.queue(name)
        consumer = session.create_consumer(q)
        session.create_producer(q).send("short", time_to_live=300)
        deadline = time.monotonic() + 10
        while len(consumer._buffer) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(consumer._buffer) == 1
        (message,) = [m for m in consumer._buffer._items if m is not None]
        expiration = message["message"]["expiration"]
        while time.time() * 1000 <= expiration + 50:  # until the client's clock says expired
            time.sleep(0.02)
        wire.commands.clear()
        got = consumer.receive(0.5)
        return got, [(a["ackType"], a["responseRequired"]) for a in wire.of(t.MESSAGE_ACK)]


def test_expiry_check_disabled_hands_out_the_expired_message(
    broker_url: str, name: str, wire: Wire
) -> None:
    url = _with(broker_url, "jms.consumerExpiryCheckEnabled=false")
    got, acks = _expired_in_the_buffer(url, name, wire)
    assert got is not None and got.text == "short"
    assert acks == [(STANDARD, False)]


def test_expiry_check_enabled_acks_it_expired(broker_url: str, name: str, wire: Wire) -> None:
    got, acks = _expired_in_the_buffer(broker_url, name, wire)
    assert got is None and acks == [(EXPIRED, False)]


def test_with_acks_that_wait_the_expired_ack_waits_too(
    broker_url: str, name: str, wire: Wire
) -> None:
    got, acks = _expired_in_the_buffer(_with(broker_url, "jms.sendAcksAsync=false"), name, wire)
    assert got is None and acks == [(EXPIRED, True)]


# -- 4. jms.sendAcksAsync ---------------------------------------------------------------------


def _acks_sent(url: str, wire: Wire, name: str, transacted: bool = False) -> list[bool]:
    with _connect(url) as conn:
        session = conn.create_session(transacted=transacted)
        queue = session.queue(name)
        session.create_producer(queue).send("a")
        if transacted:
            session.commit()
        consumer = session.create_consumer(queue)
        got = consumer.receive(10)
        assert got is not None
        if transacted:
            session.commit()
        return [a["responseRequired"] for a in wire.of(t.MESSAGE_ACK)
                if a["destination"]["physicalName"] == name]  # fmt: skip


def test_acks_are_one_way_by_default(broker_url: str, wire: Wire, name: str) -> None:
    assert _acks_sent(broker_url, wire, name) == [False]


def test_send_acks_async_false_waits_for_the_broker(broker_url: str, wire: Wire, name: str) -> None:
    assert _acks_sent(_with(broker_url, "jms.sendAcksAsync=false"), wire, name) == [True]


def test_a_transacted_sessions_acks_stay_one_way(broker_url: str, wire: Wire, name: str) -> None:
    acks = _acks_sent(_with(broker_url, "jms.sendAcksAsync=false"), wire, name, transacted=True)
    assert acks and not any(acks)


def test_a_listener_and_client_acks_wait_too(broker_url: str, wire: Wire, name: str) -> None:
    """Acks that wait, from the listener's thread and from acknowledge(): every message
    is acked, none hangs (the reader thread reads their answers)."""
    with _connect(_with(broker_url, "jms.sendAcksAsync=false&jms.prefetchPolicy.all=2")) as conn:
        session = conn.create_session()
        queue = session.queue(name)
        producer = session.create_producer(queue)
        for i in range(5):
            producer.send(f"m{i}")
        heard: list[str] = []
        done = threading.Event()

        def listen(message: Message) -> None:
            heard.append(message.text)
            if len(heard) == 5:
                done.set()

        session.create_consumer(queue).set_message_listener(listen)
        assert done.wait(10) and heard == [f"m{i}" for i in range(5)]
        client = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
        session.create_producer(client.queue(name + ".client")).send("c")
        got = client.create_consumer(client.queue(name + ".client")).receive(10)
        assert got is not None
        got.acknowledge()
        acks = [(a["ackType"], a["responseRequired"]) for a in wire.of(t.MESSAGE_ACK)]
        assert [a for a in acks if a[0] == STANDARD] == [(STANDARD, True)] * 6


def test_the_acks_a_close_delivers_stay_one_way(broker_url: str, wire: Wire, name: str) -> None:
    """As Java's deliverAcks (sendAck lazily): an optimized consumer's batch, acked at close."""
    url = _with(broker_url, "jms.sendAcksAsync=false&jms.optimizeAcknowledge=true")
    with _connect(url) as conn:
        session = conn.create_session()
        queue = session.queue(name)
        session.create_producer(queue).send("batched")
        consumer = session.create_consumer(queue)
        assert consumer.receive(10) is not None
        assert wire.of(t.MESSAGE_ACK) == []  # the batch is not due yet
        consumer.close()
        assert [(a["ackType"], a["responseRequired"]) for a in wire.of(t.MESSAGE_ACK)] == [
            (STANDARD, False)
        ]


# -- 5. failover's startupMaxReconnectAttempts ------------------------------------------------


class Refuser:
    """A listener that accepts and at once closes each connection, counting them: a broker
    that is never there for the client (its negotiation fails)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def refuser() -> Iterator[Refuser]:
    r = Refuser()
    yield r
    r.close()


FAST = "initialReconnectDelay=20&useExponentialBackOff=false"


@pytest.mark.parametrize(
    ("options", "attempts"),
    [
        ("startupMaxReconnectAttempts=3", 3),
        ("startupMaxReconnectAttempts=0", 1),  # Java counts 0 as one pass too
        ("maxReconnectAttempts=2", 2),  # startup's -1: maxReconnectAttempts decides
        ("startupMaxReconnectAttempts=2&maxReconnectAttempts=5", 2),
    ],
)
def test_the_first_connection_tries_that_many_times(
    refuser: Refuser, options: str, attempts: int
) -> None:
    url = f"failover:(tcp://127.0.0.1:{refuser.port})?{FAST}&{options}"
    with pytest.raises(OSError):
        ConnectionFactory(url).create_connection()
    assert refuser.accepted == attempts


def test_unlimited_attempts_stop_at_the_failover_timeout(refuser: Refuser) -> None:
    url = f"failover:(tcp://127.0.0.1:{refuser.port})?{FAST}&timeout=400"
    started = time.monotonic()
    with pytest.raises(OSError, match="timed out"):
        ConnectionFactory(url).create_connection()
    assert 0.4 <= time.monotonic() - started < 5
    assert refuser.accepted > 3


def test_the_first_connection_tries_every_uri(broker_url: str, refuser: Refuser) -> None:
    live = broker_url.removeprefix("tcp://")
    url = (f"failover:(tcp://127.0.0.1:{refuser.port},tcp://{live})"
           f"?randomize=false&startupMaxReconnectAttempts=1")  # fmt: skip
    with ConnectionFactory(url).create_connection() as conn:
        conn.start()
        session = conn.create_session(ack_mode=AckMode.AUTO_ACKNOWLEDGE)
        queue = session.queue(f"jms.{uuid.uuid4().hex[:10]}")
        session.create_producer(queue).send("through the second")
        got = session.create_consumer(queue).receive(10)
        assert got is not None and got.text == "through the second"
    assert refuser.accepted == 1
