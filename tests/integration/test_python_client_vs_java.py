"""The Python client sends what the Java client 5.17 sends: each scenario runs once with the
Java client (tests/java/WireScenarios.java) and once with dovecote's Python client, both
through a recording proxy in front of one dovecote broker; the commands each sent (consumer
settings, acks, transactions, RemoveInfos, sends), named by the bodies of the messages they
concern, must be the same list."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from activemq import classpath, java_classes
from brokers import BrokerProcess, running_broker
from dovecote.client import (
    AckMode,
    Connection,
    ConnectionFactory,
    JavaByte,
    JavaFloat,
    JavaInt,
    JavaShort,
    Message,
)
from dovecote.protocol.openwire import NEED_DATA, FrameReader, Marshaller, Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.primitives import decode_map, decode_text_body
from tcpproxy import TcpProxy

ID_KINDS = {t.CONNECTION_ID: "connection", t.SESSION_ID: "session", t.CONSUMER_ID: "consumer",
            t.PRODUCER_ID: "producer"}  # fmt: skip
SENDS = (t.TEXT_MESSAGE, t.BYTES_MESSAGE, t.MAP_MESSAGE)


def _typed(properties: bytes | None) -> list[tuple[str, str, object]]:
    """Marshalled properties as (name, decoded type, value): the Java type they travel as."""
    decoded = decode_map(properties) if properties else {}
    return sorted((k, type(v).__name__, v) for k, v in decoded.items())


class Recording:
    """Decodes both directions of one proxied connection: what the client sent, and the
    bodies of the messages (by id) so that acks and RemoveInfos can be named by them."""

    def __init__(self) -> None:
        self.sent: list[Structure] = []
        self.bodies: dict[tuple[str, int], str] = {}
        self.by_sequence: dict[int, str] = {}

    def learn(self, message: Structure) -> None:
        mid = message["messageId"]
        body = decode_text_body(message["content"]) if message["content"] else ""
        self.bodies[(str(mid["producerId"]), mid["producerSequenceId"])] = body
        if mid.get("brokerSequenceId") is not None:
            self.by_sequence[mid["brokerSequenceId"]] = body

    def body_of(self, mid: Structure | None) -> str | None:
        if mid is None:
            return None
        return self.bodies.get((str(mid["producerId"]), mid["producerSequenceId"]), "?")

    def commands(self) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for s in self.sent:
            destination = s["destination"] if s.type in (t.CONSUMER_INFO, t.MESSAGE_ACK) else None
            if destination is not None and "Advisory" in str(destination["physicalName"]):
                continue  # the advisory consumer: a different mechanism in each client
            if s.type == t.CONSUMER_INFO:
                out.append(("consumer", s["prefetchSize"], s["selector"], bool(s["noLocal"]),
                            bool(s["exclusive"]), s.get("priority", 0), bool(s["browser"]),
                            s["subscriptionName"], bool(s["retroactive"]),
                            s.get("maximumPendingMessageLimit", 0)))  # fmt: skip
            elif s.type == t.MESSAGE_ACK:
                out.append(("ack", s["ackType"], s["messageCount"],
                            self.body_of(s["firstMessageId"]), self.body_of(s["lastMessageId"]),
                            s["transactionId"] is not None))  # fmt: skip
            elif s.type == t.TRANSACTION_INFO:
                out.append(("transaction", s["type"]))
            elif s.type == t.REMOVE_INFO:
                last = s["lastDeliveredSequenceId"]
                out.append(("remove", ID_KINDS.get(s["objectId"].type),
                            self.by_sequence.get(last, last)))  # fmt: skip
            elif s.type in SENDS:
                body = decode_text_body(s["content"]) if s["content"] else ""
                out.append(("send", body, bool(s["persistent"]), s["transactionId"] is not None,
                            s["groupID"], s.get("groupSequence", 0), s["userID"],
                            s["correlationId"], s["type"], s.get("priority"),
                            (s.get("expiration") or 0) > 0,
                            _typed(s["marshalledProperties"])))  # fmt: skip
            elif s.type == t.SHUTDOWN_INFO:
                out.append(("shutdown",))
            elif s.type == t.MESSAGE_PULL:
                out.append(("pull", s["timeout"]))
            elif s.type == t.DESTINATION_INFO:
                out.append(("destination", s["destination"].type, s["operationType"]))
        return out


class RecordingProxy(TcpProxy):
    """A TCP proxy in front of the broker that records every connection through it."""

    def __init__(self, upstream: int) -> None:
        self.recordings: list[Recording] = []
        super().__init__(upstream, self._record)

    def _record(self) -> Callable[[bool, bytes], bytes]:
        recording = Recording()
        self.recordings.append(recording)
        readers = {True: (FrameReader(), Marshaller()), False: (FrameReader(), Marshaller())}

        def tap(from_client: bool, data: bytes) -> bytes:
            frames, marshaller = readers[from_client]
            marshaller.version = 12
            frames.receive_data(data)
            while (frame := frames.next_frame()) is not NEED_DATA:
                command = marshaller.parse_body(frame)
                if from_client:
                    recording.sent.append(command)
                    if command.type in SENDS:
                        recording.learn(command)
                elif command.type == t.MESSAGE_DISPATCH and command["message"] is not None:
                    recording.learn(command["message"])
            return data

        return tap


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(workdir=tmp_path_factory.mktemp("vsjava")) as proc:
        yield proc


@pytest.fixture(scope="module")
def scenarios() -> Path:
    return java_classes()


@contextmanager
def proxied(broker: BrokerProcess) -> Iterator[RecordingProxy]:
    proxy = RecordingProxy(broker.openwire_port)
    try:
        yield proxy
    finally:
        proxy.close()


def _settled(proxy: RecordingProxy) -> list[tuple[Any, ...]]:
    """The recording once the client's last command (ShutdownInfo) has passed through."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proxy.recordings and ("shutdown",) in proxy.recordings[-1].commands():
            break
        time.sleep(0.02)
    return proxy.recordings[-1].commands()


# -- the Python client's side of each scenario (the Java side: WireScenarios.java) ---------


def client_ack_prefetch_1(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
    q = session.queue(queue)
    producer = session.create_producer(q)
    for i in range(5):
        producer.send(f"m{i}")
    consumer = session.create_consumer(q)
    last = None
    for _ in range(5):
        last = consumer.receive(5)
    assert last is not None
    last.acknowledge()


def session_close(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
    q = session.queue(queue)
    producer = session.create_producer(q)
    for i in range(5):
        producer.send(f"m{i}")
    consumer = session.create_consumer(q)
    consumer.receive(5)
    consumer.receive(5)
    session.close()


def recover(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
    q = session.queue(queue)
    session.create_producer(q).send("m0")
    consumer = session.create_consumer(q)
    for _ in range(2):
        consumer.receive(5)
        session.recover()
    message = consumer.receive(5)
    assert message is not None
    message.acknowledge()
    consumer.close()


def transacted(conn: Connection, queue: str) -> None:
    session = conn.create_session(transacted=True)
    q = session.queue(queue)
    producer = session.create_producer(q)
    producer.send("m0")
    producer.send("m1")
    session.commit()
    consumer = session.create_consumer(q)
    consumer.receive(5)
    consumer.receive(5)
    session.commit()
    consumer.receive(0.3)
    session.rollback()


def expired(conn: Connection, queue: str) -> None:
    session = conn.create_session()
    q = session.queue(queue)
    consumer = session.create_consumer(q)
    producer = session.create_producer(q)
    producer.send("short", time_to_live=300)
    producer.send("long")
    time.sleep(0.6)
    consumer.receive(5)
    consumer.receive(0.3)


def auto(conn: Connection, queue: str) -> None:
    session = conn.create_session()
    q = session.queue(queue)
    producer = session.create_producer(q)
    for i in range(3):
        producer.send(f"m{i}")
    consumer = session.create_consumer(q)
    for _ in range(3):
        consumer.receive(5)
    consumer.close()


def individual(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.INDIVIDUAL_ACKNOWLEDGE)
    q = session.queue(queue)
    producer = session.create_producer(q)
    for i in range(3):
        producer.send(f"m{i}")
    consumer = session.create_consumer(q)
    consumer.receive(5)
    second = consumer.receive(5)
    assert second is not None
    second.acknowledge()
    consumer.receive(5)


def dups_ok_topic(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.DUPS_OK_ACKNOWLEDGE)
    topic = session.topic(queue)
    consumer = session.create_consumer(topic)
    producer = session.create_producer(topic)
    for i in range(6):
        producer.send(f"t{i}")
    for _ in range(6):
        consumer.receive(5)
    consumer.close()


def options(conn: Connection, queue: str) -> None:
    session = conn.create_session()
    options = "consumer.exclusive=true&consumer.priority=3&consumer.prefetchSize=7"
    session.create_consumer(session.queue(f"{queue}?{options}"))
    topic = session.topic(queue)
    session.create_consumer(topic, no_local=True)
    session.create_durable_subscriber(topic, "sub", "a > 1").close()
    session.unsubscribe("sub")


def listener_client(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
    q = session.queue(queue)
    producer = session.create_producer(q)
    done = threading.Semaphore(0)

    def on_message(message: Message) -> None:
        if message.body == "m1":
            message.acknowledge()
        done.release()

    for i in range(3):
        producer.send(f"m{i}")
    session.create_consumer(q).set_message_listener(on_message)
    assert all(done.acquire(timeout=5) for _ in range(3))


def browse(conn: Connection, queue: str) -> None:
    session = conn.create_session()
    q = session.queue(queue)
    producer = session.create_producer(q)
    producer.send("m0")
    producer.send("m1")
    assert len(list(session.browse(q))) == 2


def connection_close_unacked(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
    q = session.queue(queue)
    producer = session.create_producer(q)
    for i in range(3):
        producer.send(f"m{i}")
    consumer = session.create_consumer(q)
    consumer.receive(5)
    consumer.receive(5)


def listener_auto_exception(conn: Connection, queue: str) -> None:
    session = conn.create_session()
    q = session.queue(queue)
    session.create_producer(q).send("m0")
    calls = threading.Semaphore(0)
    count = [0]

    def on_message(message: Message) -> None:
        count[0] += 1
        calls.release()
        if count[0] == 1:
            raise RuntimeError("first delivery fails")

    session.create_consumer(q).set_message_listener(on_message)
    assert calls.acquire(timeout=5) and calls.acquire(timeout=5)
    time.sleep(0.2)


def transacted_session_close(conn: Connection, queue: str) -> None:
    session = conn.create_session(transacted=True)
    q = session.queue(queue)
    producer = session.create_producer(q)
    for i in range(3):
        producer.send(f"m{i}")
    session.commit()
    session.create_consumer(q).receive(5)
    session.close()


def pull(conn: Connection, queue: str) -> None:
    session = conn.create_session()
    q = session.queue(queue)
    session.create_producer(q).send("m0")
    consumer = session.create_consumer(q)
    consumer.receive(2)
    consumer.receive(0.3)
    consumer.receive_no_wait()


def temp_queue(conn: Connection, queue: str) -> None:
    session = conn.create_session()
    temp = session.create_temporary_queue()
    consumer = session.create_consumer(temp)
    session.create_producer(temp).send("t0")
    consumer.receive(5)
    consumer.close()
    session.delete_temporary(temp)


def poison(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
    q = session.queue(queue)
    session.create_producer(q).send("m0")
    consumer = session.create_consumer(q)
    for _ in range(2):
        consumer.receive(5)
        session.recover()
    consumer.receive(0.5)


def message_fields(conn: Connection, queue: str) -> None:
    session = conn.create_session()
    producer = session.create_producer(session.queue(queue))
    properties = {"JMSXGroupID": "g", "JMSXGroupSeq": 1, "JMSXUserID": "alice",
                  "i": JavaInt(7), "s": JavaShort(-3), "b": JavaByte(5), "f": JavaFloat(1.5),
                  "l": 2**40, "d": 2.25, "t": True}  # fmt: skip
    message = Message("g1", properties=properties, correlation_id="c1", type="kind")
    producer.send(message, persistent=False, priority=7, time_to_live=60000)
    producer.close()


def durable_reconnect(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
    topic = session.topic(queue)
    session.create_durable_subscriber(topic, "sub").close()
    producer = session.create_producer()
    for i in range(3):
        producer.send(f"d{i}", topic)
    again = session.create_durable_subscriber(topic, "sub")
    for _ in range(3):
        again.receive(5)
    again.close()
    session.unsubscribe("sub")


def recover_in_listener(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.CLIENT_ACKNOWLEDGE)
    q = session.queue(queue)
    session.create_producer(q).send("m0")
    calls = threading.Semaphore(0)
    count = [0]

    def on_message(message: Message) -> None:
        count[0] += 1
        calls.release()
        if count[0] == 1:
            session.recover()
        else:
            message.acknowledge()

    session.create_consumer(q).set_message_listener(on_message)
    assert calls.acquire(timeout=5) and calls.acquire(timeout=5)
    time.sleep(0.2)


def dups_ok_queue(conn: Connection, queue: str) -> None:
    session = conn.create_session(ack_mode=AckMode.DUPS_OK_ACKNOWLEDGE)
    q = session.queue(queue)
    producer = session.create_producer(q)
    for i in range(3):
        producer.send(f"m{i}")
    consumer = session.create_consumer(q)
    for _ in range(3):
        consumer.receive(5)


OPTIONS = {"client_ack_prefetch_1": "&jms.prefetchPolicy.queuePrefetch=1",
           "pull": "&jms.prefetchPolicy.queuePrefetch=0",
           "poison": "&jms.redeliveryPolicy.maximumRedeliveries=1",
           "transacted": "&jms.prefetchPolicy.queuePrefetch=2",
           "dups_ok_topic": "&jms.prefetchPolicy.topicPrefetch=4"}  # fmt: skip
SCENARIOS: list[Callable[[Connection, str], None]] = [
    client_ack_prefetch_1, session_close, recover, transacted, expired, auto, individual,
    dups_ok_topic, options, listener_client, browse, connection_close_unacked,
    listener_auto_exception, transacted_session_close, pull, temp_queue, poison, dups_ok_queue,
    message_fields, durable_reconnect, recover_in_listener,
]  # fmt: skip


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_sends_what_the_java_client_sends(
    broker: BrokerProcess, scenarios: Path, scenario: Callable[[Connection, str], None]
) -> None:
    name = scenario.__name__
    with proxied(broker) as proxy:
        subprocess.run(["java", "-cp", f"{classpath()}:{scenarios}", "WireScenarios",
                        str(proxy.port), f"vsjava.{uuid.uuid4().hex[:8]}", name],
                       check=True, capture_output=True, timeout=60)  # fmt: skip
        java = _settled(proxy)
    url = ("tcp://127.0.0.1:{}?jms.redeliveryPolicy.initialRedeliveryDelay=0"
           "&jms.redeliveryPolicy.redeliveryDelay=0" + OPTIONS.get(name, ""))  # fmt: skip
    with proxied(broker) as proxy:
        queue = f"vsjava.{uuid.uuid4().hex[:8]}"
        client_id = queue if name in ("options", "durable_reconnect") else None
        factory = ConnectionFactory(url.format(proxy.port))
        with factory.create_connection(client_id=client_id) as conn:
            conn.start()
            scenario(conn, queue)
        python = _settled(proxy)
    assert python == java
