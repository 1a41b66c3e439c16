"""A send in flight at the master's kill -9 is not delivered twice (issue 35): the master
stored it and shipped it to its slaves, but its answer never reached the producer, whose
failover transport then sends it again to the new master. The new master's producer
duplicate check (broker/producer_audit.py), rebuilt from its replicated store at
promotion, drops the second copy and answers it, as ActiveMQ does for a failover producer
(ProducerBrokerExchange with KahaDB's producerSequenceIdTracker). Before, the new master
stored it again and a transacted consumer got both copies.

To make the lost answer certain rather than a matter of timing, the producer reaches the
master through a proxy that, once told to, passes nothing from the broker back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokergroup import GroupBroker, failover_url, master_of, running_group, wait_for
from dovecote.client import ConnectionFactory, Message
from tcpproxy import AnswerHolder
from zookeeper import ZooKeeperServer, running_zookeeper, zookeeper_available

pytestmark = pytest.mark.skipif(not zookeeper_available(), reason="no ZooKeeper installed")
QUEUE = "replicated.once"


@pytest.fixture(scope="module")
def zk() -> Iterator[ZooKeeperServer]:
    with running_zookeeper() as server:
        yield server


def stored_on(broker: GroupBroker, queue: str) -> int:
    status, row = broker.api(f"/api/queues/{queue}")
    return int(row["size"]) if status == 200 else -1


def consume_transacted(url: str, received: list[str], stop: threading.Event) -> None:
    """A transacted consumer committing each message: the bodies it was handed, in order."""
    connection = ConnectionFactory(url).create_connection()
    connection.start()
    try:
        session = connection.create_session(transacted=True)
        consumer = session.create_consumer(session.queue(QUEUE))
        while not stop.is_set():
            message = consumer.receive(0.2)
            if message is not None:
                received.append(str(message.body))
                session.commit()
    finally:
        connection.close()


def test_a_send_whose_answer_the_kill_lost_is_not_delivered_twice(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    with running_group(zk.address, tmp_path) as brokers:
        master = master_of(brokers)
        proxies = {b.name: AnswerHolder(b.openwire_port) for b in brokers}
        ports = [proxies[b.name].port for b in [master] + [b for b in brokers if b is not master]]
        producer_url = (
            f"failover:({','.join(f'tcp://127.0.0.1:{port}' for port in ports)})"
            "?randomize=false&initialReconnectDelay=50&maxReconnectDelay=500"
        )
        producing = ConnectionFactory(producer_url).create_connection()
        received: list[str] = []
        stop = threading.Event()
        consumer: threading.Thread | None = None
        try:
            session = producing.create_session()
            producer = session.create_producer(session.queue(QUEUE))
            for n in range(3):
                producer.send(Message(f"before-{n}"), persistent=True)
            proxies[master.name].hold.set()  # the producer hears nothing more from it
            for broker in brokers:
                if broker is not master:  # and reaches the next master only when let
                    proxies[broker.name].admit.clear()
            answered = threading.Event()

            def send_in_flight() -> None:
                producer.send(Message("in-flight"), persistent=True)
                answered.set()

            sender = threading.Thread(target=send_in_flight, daemon=True)
            sender.start()
            # Stored by the master, so held by a quorum (the master answers only then).
            wait_for(lambda: stored_on(master, QUEUE) == 4, 30, "the master stored it")
            assert not answered.is_set()
            master.kill()
            new_master = master_of(brokers)
            # A transacted consumer on the new master has the replicated copy first ...
            consumer = threading.Thread(
                target=consume_transacted, args=(failover_url(brokers), received, stop),
                daemon=True,
            )  # fmt: skip
            consumer.start()
            wait_for(lambda: "in-flight" in received, 30, "the replicated copy consumed")
            # ... then the producer's failover reaches the new master and sends it again.
            for proxy in proxies.values():
                proxy.admit.set()
            sender.join(60)
            assert answered.is_set(), "the send in flight was never answered"
            producer.send(Message("after"), persistent=True)
            wait_for(lambda: "after" in received, 30, "the next send consumed")
            wait_for(lambda: stored_on(new_master, QUEUE) == 0, 10, "all committed")
            assert received == ["before-0", "before-1", "before-2", "in-flight", "after"]
            assert "duplicate send of" in new_master.log_text()
        finally:
            stop.set()
            if consumer is not None:
                consumer.join(30)
            for proxy in proxies.values():
                proxy.admit.set()
                proxy.close()
            producing.close()
