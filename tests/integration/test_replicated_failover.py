"""Three dovecote brokers as processes on one replicated LevelDB store and one real ZooKeeper
(issue 35): one master serves the clients; kill -9 of the master under load from failover
producers and an auto-acknowledging consumer (our client's failover: URL over the three,
and ActiveMQ's Java client's failover:(...) beside it) loses no message whose send was
answered and hands none to the application twice; the time a slave takes to take over is
measured and printed; the old master comes back as a slave and catches up."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from brokergroup import caught_up, failover_url, listening, master_of, running_group, wait_for
from dovecote.client import ConnectionFactory, JMSError, Message
from zookeeper import ZooKeeperServer, running_ensemble, running_zookeeper, zookeeper_available

pytestmark = pytest.mark.skipif(not zookeeper_available(), reason="no ZooKeeper installed")
QUEUE = "replicated.orders"
LONG_CYCLES = 5


@pytest.fixture(scope="module")
def zk() -> Iterator[ZooKeeperServer]:
    with running_zookeeper() as server:
        yield server


def test_one_master_serves_clients_and_the_slaves_say_whom_they_follow(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    with running_group(zk.address, tmp_path) as brokers:
        master = master_of(brokers)
        slaves = [b for b in brokers if b is not master]
        for slave in slaves:
            slave.wait_role("slave")
        assert listening(master.openwire_port) and listening(master.stomp_port)
        for slave in slaves:
            assert not listening(slave.openwire_port) and not listening(slave.stomp_port)
            status, health = slave.api("/api/health")
            assert status == 200 and health["role"] == "slave" and health["status"] == "standby"
            replication = slave.replication()
            assert replication is not None
            assert replication["master"] == f"127.0.0.1:{master.replication_port}"
            status, refused = slave.api("/api/broker")  # no broker runs on a slave
            assert status == 503 and "not master" in refused["error"]
        status, health = master.api("/api/health")
        assert status == 200 and health == {
            "status": "ok", "serving": True, "role": "master", "broker": master.name,
            "store_degraded": None,
        }  # fmt: skip

        def connected() -> list[str]:
            seen = master.replication() or {"replicas": []}
            return sorted(r["address"] for r in seen["replicas"] if r["connected"])

        wanted = sorted(f"127.0.0.1:{s.replication_port}" for s in slaves)
        wait_for(lambda: connected() == wanted, 10, "the master sees both slaves connected")


@dataclass
class Ledger:
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: set[str] = field(default_factory=set)
    """Sends the broker answered (persistent sends wait for the answer)."""
    received: list[str] = field(default_factory=list)
    """Messages handed to the consuming application, in order."""
    errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """Sends refused for want of a quorum (not answered: nothing is owed for them)."""
    sent_at: list[float] = field(default_factory=list)


def produce(url: str, prefix: str, ledger: Ledger, stop: threading.Event) -> None:
    connection = ConnectionFactory(url).create_connection()
    try:
        producer = connection.create_session().create_producer(
            connection.create_session().queue(QUEUE)
        )
        n = 0
        while not stop.is_set():
            body = f"{prefix}-{n}"
            n += 1
            try:
                producer.send(Message(body), persistent=True)
            except JMSError as exc:
                if "no quorum" not in str(exc):
                    raise
                ledger.refused.append(f"{body}: {exc}")
                continue
            with ledger.lock:
                ledger.sent.add(body)
                ledger.sent_at.append(time.monotonic())
    except JMSError as exc:
        ledger.errors.append(f"{prefix}: {exc}")
    finally:
        connection.close()


def consume(url: str, ledger: Ledger, stop: threading.Event) -> None:
    """Auto-acknowledged, as most applications consume: what the application was handed."""
    connection = ConnectionFactory(url).create_connection()
    connection.start()
    consumer = connection.create_session().create_consumer(
        connection.create_session().queue(QUEUE), prefetch=20
    )
    try:
        while not stop.is_set():
            message = consumer.receive(0.2)
            if message is not None:
                with ledger.lock:
                    ledger.received.append(str(message.body))
    finally:
        connection.close()


JAVA_COUNT = 1000


class JavaLoad:
    """ActiveMQ's own Java client on the same failover:(...) URL: tests/java/FailoverLoad.java,
    a producer and an auto-acknowledging consumer; its lines say what was answered and what
    was received."""

    def __init__(self, url: str) -> None:
        from activemq import classpath, java_classes  # Debian's ActiveMQ jars

        classes = java_classes()
        self.process = subprocess.Popen(
            ["java", "-cp", f"{classpath()}:{classes}", "FailoverLoad", url, "replicated.java",
             str(JAVA_COUNT), "20"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        self.lines.extend(self.process.stdout)

    def said(self, what: str) -> list[str]:
        return [x.split(": ", 1)[1].split()[0] for x in self.lines if x.startswith(what + ": ")]

    def wait_sending(self, count: int) -> None:
        deadline = time.monotonic() + 60
        while len(self.said("sent")) < count:
            assert self.process.poll() is None and time.monotonic() < deadline, (
                f"the Java client sent {len(self.said('sent'))}:\n" + "".join(self.lines[-15:])
            )
            time.sleep(0.05)

    def finish(self) -> None:
        try:
            self.process.wait(timeout=120)
        finally:
            self.stop()
        self._reader.join(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def check(self) -> None:
        sent, received = set(self.said("sent")), self.said("received")
        tail = "".join(self.lines[-10:])
        assert len(sent) + len(self.said("refused")) == JAVA_COUNT, tail
        assert sent <= set(received), f"Java: lost {sorted(sent - set(received))[:10]}"
        assert len(received) == len(set(received)), "Java: a message handed twice"


def test_kill_9_of_the_master_under_load_loses_nothing_and_the_old_master_rejoins(
    zk: ZooKeeperServer, tmp_path: Path
) -> None:
    with running_group(zk.address, tmp_path) as brokers:
        master = master_of(brokers)
        url = failover_url(brokers)
        ledger, stop, stop_consuming = Ledger(), threading.Event(), threading.Event()
        producers = [
            threading.Thread(target=produce, args=(url, f"p{i}", ledger, stop), daemon=True)
            for i in range(2)
        ]
        consumer = threading.Thread(target=consume, args=(url, ledger, stop_consuming), daemon=True)
        for thread in [*producers, consumer]:
            thread.start()
        java = JavaLoad(url) if shutil.which("javac") else None
        try:
            try:
                wait_for(lambda: len(ledger.received) >= 150, 30, "150 received before the kill")
                if java is not None:
                    java.wait_sending(50)
                before = len(ledger.sent_at)
                master.kill()
                killed_at = time.monotonic()
                new_master = master_of(brokers)
                elected = time.monotonic() - killed_at
                wait_for(lambda: ledger.sent_at[-1] > killed_at, 30, "sends go on")
                first_send = min(t for t in ledger.sent_at[before:] if t > killed_at) - killed_at
                print(f"\ntakeover after kill -9 of the master: elected in {elected:.2f}s, "
                      f"first send answered after {first_send:.2f}s; "
                      f"{len(ledger.refused)} sends refused for want of a quorum")  # fmt: skip
                wait_for(lambda: len(ledger.sent) >= before + 150, 30, "150 sent after the kill")
            finally:
                stop.set()
                for thread in producers:
                    thread.join(60)
            deadline = time.monotonic() + 30
            while missing := sorted(ledger.sent - set(ledger.received)):
                assert time.monotonic() < deadline, (
                    f"{len(missing)} answered sends never consumed: {missing[:10]}; "
                    f"{len(ledger.received)} received; refused {ledger.refused[:3]}; the queue "
                    f"on the master: {new_master.api(f'/api/queues/{QUEUE}')}"
                )
                time.sleep(0.1)
            stop_consuming.set()
            consumer.join(30)
            if java is not None:
                java.finish()
                java.check()
            assert ledger.errors == []
            twice = sorted({b for b in ledger.received if ledger.received.count(b) > 1})
            assert twice == [], f"handed to the application twice: {twice}"
            assert new_master is not master and elected < 15
        finally:
            stop_consuming.set()  # also when an assertion failed: no thread left behind
            if java is not None:
                java.stop()
        # The old master comes back as a slave of the new one and gets what it missed.
        master.start()
        master.wait_role("slave")
        wait_for(lambda: caught_up(master, new_master), 30, "the old master caught up")
        replication = master.replication()
        assert replication is not None
        assert replication["master"] == f"127.0.0.1:{new_master.replication_port}"


@pytest.mark.skipif(not os.environ.get("DOVECOTE_LONG"), reason="long form: DOVECOTE_LONG=1")
def test_long_repeated_kills_of_the_master_with_a_zookeeper_ensemble(tmp_path: Path) -> None:
    """The long form: a ZooKeeper ensemble of three, and the master killed again and again
    under load, each killed broker started again as a slave before the next kill."""
    takeovers: list[float] = []
    with (
        running_ensemble(base=tmp_path / "zk") as ensemble,
        running_group(ensemble.address, tmp_path / "group") as brokers,
    ):
        url = failover_url(brokers)
        ledger, stop, stop_consuming = Ledger(), threading.Event(), threading.Event()
        producers = [
            threading.Thread(target=produce, args=(url, f"p{i}", ledger, stop), daemon=True)
            for i in range(2)
        ]
        consumer = threading.Thread(target=consume, args=(url, ledger, stop_consuming), daemon=True)
        for thread in [*producers, consumer]:
            thread.start()
        try:
            for _ in range(LONG_CYCLES):
                master = master_of(brokers)
                for broker in brokers:
                    if broker is not master:
                        wait_for(lambda b=broker, m=master: caught_up(b, m), 60, "caught up")
                before = len(ledger.sent)
                wait_for(lambda n=before: len(ledger.sent) >= n + 100, 60, "100 more sent")
                master.kill()
                killed_at = time.monotonic()
                master_of(brokers)
                takeovers.append(time.monotonic() - killed_at)
                master.start()
        finally:
            stop.set()
            for thread in producers:
                thread.join(60)
        wait_for(lambda: ledger.sent <= set(ledger.received), 60, "every answered send received")
        stop_consuming.set()
        consumer.join(30)
    print(f"\ntakeovers (s): {', '.join(f'{t:.2f}' for t in takeovers)}")
    assert ledger.errors == []
    twice = sorted({b for b in ledger.received if ledger.received.count(b) > 1})
    assert twice == [], f"handed to the application twice: {twice}"
