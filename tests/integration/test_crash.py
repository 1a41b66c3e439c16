"""Durability under kill -9 (compatibility M7): a broker on each store kind takes concurrent
persistent STOMP sends with receipts while consumers ack, and is killed with SIGKILL at
random moments and restarted, again and again. Afterwards every message whose receipt
arrived has been delivered, no message whose ack was confirmed comes back, and the durable
subscriber gets its backlog.

20 cycles on the journal (the default store) and 10 on each other store in the default run;
DOVECOTE_LONG=1 runs 100 on each.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from brokers import BrokerProcess, running_broker
from dovecote.client import ConnectionFactory, Message
from dovecote.protocol.stomp import Frame
from dovecote.store.journal.catchup import INDEX_HOLD_ADDS
from postgres import postgres_server
from stomplink import Link

LONG = bool(os.environ.get("DOVECOTE_LONG"))
QUEUE = "/queue/crash"
TOPIC = "/topic/crash"
DURABLE = ("crash-durable", "d")
JOURNAL = '[store]\nkind = "journal"\n'


@dataclass
class Ledger:
    """What the clients were told, shared by the threads of every cycle."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    receipted: dict[str, set[str]] = field(default_factory=lambda: {QUEUE: set(), TOPIC: set()})
    delivered: dict[str, set[str]] = field(default_factory=lambda: {QUEUE: set(), TOPIC: set()})
    acked: dict[str, set[str]] = field(default_factory=lambda: {QUEUE: set(), TOPIC: set()})
    violations: list[str] = field(default_factory=list)
    counter: int = 0

    def next_body(self, prefix: str) -> str:
        with self.lock:
            self.counter += 1
            return f"{prefix}-{self.counter}"


def produce(port: int, destination: str, ledger: Ledger, stop: threading.Event) -> None:
    try:
        link = Link(port)
        while not stop.is_set():
            body = ledger.next_body(destination.rsplit("/", 1)[1])
            link.send(Frame("SEND", (("destination", destination), ("persistent", "true"),
                                     ("receipt", body)), body.encode()))  # fmt: skip
            reply = link.read()
            if reply.command != "RECEIPT" or reply.get("receipt-id") != body:
                ledger.violations.append(f"unexpected answer to a send: {reply}")
                return
            with ledger.lock:
                ledger.receipted[destination].add(body)
    except (OSError, ConnectionError):
        return  # the broker was killed


def consume(
    port: int, destination: str, ledger: Ledger, stop: threading.Event, ready: threading.Event
) -> None:
    try:
        durable = destination == TOPIC
        link = Link(port, client_id=DURABLE[0] if durable else None)
        headers = [("destination", destination), ("id", "1"), ("ack", "client-individual"),
                   ("activemq.prefetchSize", "20"), ("receipt", "subscribed")]  # fmt: skip
        if durable:
            headers.append(("activemq.subscriptionName", DURABLE[1]))
        link.send(Frame("SUBSCRIBE", tuple(headers)))
        awaiting: dict[str, str] = {}
        while not stop.is_set():
            frame = link.read()
            if frame.command == "RECEIPT":
                receipt = frame.get("receipt-id") or ""
                if receipt == "subscribed":
                    ready.set()
                elif receipt in awaiting:
                    with ledger.lock:
                        ledger.acked[destination].add(awaiting.pop(receipt))
                continue
            body = frame.body.decode()
            with ledger.lock:
                if body in ledger.acked[destination]:
                    ledger.violations.append(f"{body} came back after its ack was confirmed")
                ledger.delivered[destination].add(body)
            ack_id = frame.get("ack") or ""
            awaiting[f"ack-{body}"] = body
            link.send(Frame("ACK", (("id", ack_id), ("receipt", f"ack-{body}"))))
    except (OSError, ConnectionError):
        ready.set()
        return


@contextmanager
def broker_in(workdir: Path, config: str) -> Iterator[BrokerProcess]:
    with running_broker(config, workdir=workdir) as broker:
        yield broker


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["journal", "sqlite", "postgresql", "journaled-sql", "leveldb"])
def store_config(request: pytest.FixtureRequest) -> str:
    if request.param == "journal":
        return JOURNAL
    if request.param == "leveldb":
        return '[store]\nkind = "leveldb"\n'
    # A short lease: a broker restarted after kill -9 waits out its predecessor's lease.
    lease = "lock_lease_ms = 600\n"
    if request.param == "sqlite":
        return f'[store]\nkind = "sql"\n{lease}'
    if request.param == "journaled-sql":
        return f'[store]\nkind = "journaled-sql"\ncheckpoint_interval_ms = 200\n{lease}'
    url = request.getfixturevalue("pg_url")
    return f'[store]\nkind = "sql"\nurl = "{url}"\n{lease}'


def drain(port: int, destination: str, ledger: Ledger) -> None:
    """Take everything left with auto ack (Link.take_backlog)."""
    durable = destination == TOPIC
    link = Link(port, client_id=DURABLE[0] if durable else None)
    extra = [("activemq.subscriptionName", DURABLE[1])] if durable else []
    for frame in link.take_backlog(destination, *extra):
        body = frame.body.decode()
        if body in ledger.acked[destination]:
            ledger.violations.append(f"{body} came back after its ack was confirmed")
        ledger.delivered[destination].add(body)
    link.close()


@pytest.mark.timeout(600)
def test_kill_9_loses_no_receipted_message_and_resurrects_no_acked_one(
    tmp_path: Path, store_config: str
) -> None:
    ledger = Ledger()
    rng = random.Random(20261122)
    # Each cycle costs a broker start and a restart (and the lease's wait on the SQL stores).
    cycles = 100 if LONG else 20 if store_config == JOURNAL else 10
    for _ in range(cycles):
        with broker_in(tmp_path, store_config) as broker:
            stop = threading.Event()
            readies = [threading.Event(), threading.Event()]
            consumers = [
                threading.Thread(
                    target=consume, args=(broker.stomp_port, dest, ledger, stop, ready)
                )
                for dest, ready in zip((QUEUE, TOPIC), readies, strict=True)
            ]
            for thread in consumers:
                thread.start()
            for ready in readies:
                assert ready.wait(10)
            producers = [
                threading.Thread(target=produce, args=(broker.stomp_port, dest, ledger, stop))
                for dest in (QUEUE, QUEUE, TOPIC)
            ]
            for thread in producers:
                thread.start()
            # The random moment of the crash is the point of the test, not a wait for state.
            time.sleep(rng.uniform(0.2, 0.8))
            broker.process.send_signal(signal.SIGKILL)
            broker.process.wait()
            stop.set()
            for thread in consumers + producers:
                thread.join(20)
                assert not thread.is_alive()
    with broker_in(tmp_path, store_config) as broker:
        drain(broker.stomp_port, QUEUE, ledger)
        drain(broker.stomp_port, TOPIC, ledger)
    print(
        {
            d: (len(ledger.receipted[d]), len(ledger.delivered[d]), len(ledger.acked[d]))
            for d in (QUEUE, TOPIC)
        }
    )
    assert ledger.violations == []
    for destination in (QUEUE, TOPIC):
        receipted = ledger.receipted[destination]
        assert receipted, f"no send to {destination} was confirmed: the test tested nothing"
        lost = receipted - ledger.delivered[destination]
        assert not lost, (
            f"{len(lost)} receipted messages to {destination} were lost: {sorted(lost)[:5]}"
        )


def _kill_once_handled(broker: BrokerProcess, link: Link) -> None:
    """SIGKILL once the broker has handled every frame sent on ``link`` (frames are handled
    in order: a later frame's receipt says the ones before it are done, their store writes
    included), though none of them asked for a receipt of its own."""
    link.send(Frame("SUBSCRIBE", (("destination", "/queue/elsewhere"), ("id", "handled"),
                                 ("receipt", "handled"))))  # fmt: skip
    link.until_receipt()
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait()


def test_acks_without_receipts_survive_kill_9(tmp_path: Path) -> None:
    """Acks nobody waits for are written without an fsync of their own; the page cache
    still has them when the broker process dies, so none of them comes back."""
    with running_broker(workdir=tmp_path) as broker:
        link = Link(broker.stomp_port)
        for i in range(40):
            link.send(Frame("SEND", (("destination", "/queue/acks"), ("persistent", "true"),
                                     ("receipt", f"s{i}")), f"m{i}".encode()))  # fmt: skip
            assert link.read().command == "RECEIPT"
        link.send(Frame("SUBSCRIBE", (("destination", "/queue/acks"), ("id", "1"),
                                     ("ack", "client-individual"),
                                     ("activemq.prefetchSize", "40"))))  # fmt: skip
        got = [link.read() for _ in range(40)]
        for message in got[:30]:
            link.send(Frame("ACK", (("id", message.get("ack") or ""),)))
        _kill_once_handled(broker, link)
    with running_broker(workdir=tmp_path) as broker:
        bodies = [m.body for m in Link(broker.stomp_port).take_backlog("/queue/acks")]
        assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(30, 40))


def test_sends_without_receipts_survive_kill_9_once_written(tmp_path: Path) -> None:
    """Persistent sends nobody waits for are written without an fsync of their own (as
    KahaDB does): once the broker has handled them, the page cache has them, and killing
    the broker loses none, nor reorders them."""
    with running_broker(workdir=tmp_path) as broker:
        link = Link(broker.stomp_port)
        for i in range(40):
            link.send(Frame("SEND", (("destination", "/queue/unconfirmed"),
                                     ("persistent", "true")), f"m{i}".encode()))  # fmt: skip
        _kill_once_handled(broker, link)
    with running_broker(workdir=tmp_path) as broker:
        bodies = [m.body for m in Link(broker.stomp_port).take_backlog("/queue/unconfirmed")]
        assert bodies == [f"m{i}".encode() for i in range(40)]


def test_openwire_async_sends_survive_kill_9_once_handled(tmp_path: Path) -> None:
    """The same over OpenWire from a real client: persistent sends with
    jms.useAsyncSend=true ask for no response, so they are written without an fsync of
    their own; a later request's response on the connection (a consumer's) says they were
    handled, and killing the broker loses none of them."""
    with running_broker(workdir=tmp_path) as broker:
        url = f"tcp://127.0.0.1:{broker.openwire_port}?jms.useAsyncSend=true"
        conn = ConnectionFactory(url).create_connection()
        session = conn.create_session()
        producer = session.create_producer(session.queue("unconfirmed"))
        for i in range(40):
            producer.send(Message(f"m{i}"), persistent=True)
        session.create_consumer(session.queue("elsewhere"))  # a round trip after them
        broker.process.send_signal(signal.SIGKILL)
        broker.process.wait()
        conn.close()
    with running_broker(workdir=tmp_path) as broker:
        conn = ConnectionFactory(f"tcp://127.0.0.1:{broker.openwire_port}").create_connection()
        conn.start()
        session = conn.create_session()
        consumer = session.create_consumer(session.queue("unconfirmed"))
        received = [consumer.receive(10) for _ in range(40)]
        extra = consumer.receive(0.5)
        conn.close()
        assert [m.body if m else None for m in received] == [f"m{i}" for i in range(40)]
        assert extra is None


def test_large_binary_bodies_survive_kill_9_byte_for_byte(tmp_path: Path) -> None:
    """Bodies past the parser's 4 KiB switch and the journal's 64 KiB group size, with NULs
    and every byte value, go in through a real socket, are written as header plus packed
    payload (pwritev), checksummed, and after SIGKILL are read back, checked and delivered
    exactly as sent."""
    sizes = [4095, 4096, 5000, 70_000, 300_000]
    bodies = [bytes((i * 7 + n) % 256 for i in range(n)) for n in sizes]
    with running_broker(workdir=tmp_path) as broker:
        link = Link(broker.stomp_port)
        for n, body in enumerate(bodies):
            link.send(Frame("SEND", (("destination", "/queue/large"), ("persistent", "true"),
                                     ("content-length", str(len(body))),
                                     ("receipt", f"s{n}")), body))  # fmt: skip
            assert link.read().command == "RECEIPT"
        broker.process.send_signal(signal.SIGKILL)
        broker.process.wait()
    with running_broker(workdir=tmp_path) as broker:
        got = [m.body for m in Link(broker.stomp_port).take_backlog("/queue/large")]
        assert got == bodies


def test_a_bulk_load_consumed_in_part_survives_kill_9_while_the_index_waits(
    tmp_path: Path,
) -> None:
    """A transaction of 10,000 persistent sends from a real client is a bulk load: the
    journal's index waits for its consumers (store/journal/catchup.py, INDEX_HOLD_ADDS). A
    transacted consumer commits most of them; SIGKILL comes while the index still waits for
    both. The restart replays them: the rest are there, in order, and nothing consumed comes
    back."""
    count = INDEX_HOLD_ADDS
    taken = count - 500
    with running_broker(workdir=tmp_path) as broker:
        conn = ConnectionFactory(f"tcp://127.0.0.1:{broker.openwire_port}").create_connection()
        conn.start()
        session = conn.create_session(transacted=True)
        producer = session.create_producer(session.queue("bulk"))
        for i in range(count):
            producer.send(Message(f"m{i}"), persistent=True)
        session.commit()
        consumer = session.create_consumer(session.queue("bulk"))
        received = [consumer.receive(10) for _ in range(taken)]
        session.commit()
        # Many times the index's usual wait (20 ms): without the hold it would have caught up.
        time.sleep(0.5)
        broker.process.send_signal(signal.SIGKILL)
        broker.process.wait()
        conn.close()
        assert [m.body if m else None for m in received] == [f"m{i}" for i in range(taken)]
    with running_broker(workdir=tmp_path) as broker:
        assert "journal replay applied" in broker.log_text()  # (the index had waited)
        bodies = [m.body for m in Link(broker.stomp_port).take_backlog("/queue/bulk")]
        assert bodies == [f"m{i}".encode() for i in range(taken, count)]
