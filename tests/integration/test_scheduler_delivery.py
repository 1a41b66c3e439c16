"""Scheduled delivery (compatibility D5) on a real broker process: STOMP and OpenWire clients send
with AMQ_SCHEDULED_* headers or properties and see the message come when due; transactions
schedule at commit; the admin API browses and cancels; and the schedules survive a restart
(and a kill -9) on the persistent stores, delivered once."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers import BrokerProcess, running_broker
from dovecote.client import ConnectionFactory, Message
from dovecote.client.transport import JMSError
from dovecote.protocol.openwire.primitives import JavaInt
from postgres import postgres_server
from stompclient import Client

PERIOD, REPEAT = "AMQ_SCHEDULED_PERIOD", "AMQ_SCHEDULED_REPEAT"
ON = "[broker]\nscheduler_support = true\n"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(ON, workdir=tmp_path_factory.mktemp("scheduler")) as process:
        yield process


def name() -> str:
    return f"sched.{uuid.uuid4().hex[:8]}"


def stomp_send(client: Client, destination: str, body: str, **headers: str) -> None:
    """A SEND with these headers as they are (the helper's ``send`` renames underscores)."""
    client.send_raw(destination, body, headers)


def test_stomp_delay_holds_the_message_back_then_delivers_it_once(broker: BrokerProcess) -> None:
    queue = f"/queue/{name()}"
    with Client(broker.stomp_address) as client:
        client.subscribe(queue)
        sent = time.monotonic()
        stomp_send(client, queue, "later", AMQ_SCHEDULED_DELAY="700", persistent="true")
        assert client.nothing_more()  # not before its time
        message = client.receive()
        assert time.monotonic() - sent >= 0.6
        assert message.body == "later"
        assert message.headers["scheduledJobId"].startswith("ID:")
        assert "AMQ_SCHEDULED_DELAY" not in message.headers
        assert message.headers["persistent"] == "true"
        time.sleep(0.5)  # a second copy would have come by now (the scheduler ticks at 500 ms)
        assert client.nothing_more()


def test_stomp_repeat_delivers_n_plus_one_copies_with_their_own_ids(
    broker: BrokerProcess,
) -> None:
    queue = f"/queue/{name()}"
    with Client(broker.stomp_address) as client:
        client.subscribe(queue)
        stomp_send(client, queue, "tick", AMQ_SCHEDULED_PERIOD="200", AMQ_SCHEDULED_REPEAT="2")
        copies = client.receive_n(3)
        assert [m.body for m in copies] == ["tick"] * 3
        assert len({m.id for m in copies}) == 3
        assert len({m.headers["scheduledJobId"] for m in copies}) == 1
        time.sleep(0.7)
        assert client.nothing_more()


def test_stomp_bad_value_is_an_error_and_nothing_is_scheduled(broker: BrokerProcess) -> None:
    queue = f"/queue/{name()}"
    with Client(broker.stomp_address) as client:
        client.conn.send(queue, "x", headers={"AMQ_SCHEDULED_DELAY": "soon", "receipt": "r1"})
        error = client.listener.errors.get(timeout=10)
        assert "AMQ_SCHEDULED_DELAY" in error.headers["message"]
    status, jobs = admin(broker, "/api/scheduler/jobs")
    assert status == 200 and all(job["destination"] != queue[7:] for job in jobs)


def test_sends_read_together_before_a_bad_one_still_go(broker: BrokerProcess) -> None:
    """Receiptless SENDs read in one chunk are routed as a batch: a bad schedule among them
    fails from there on, as if they had come one at a time; those before it are kept."""
    queue = f"/queue/{name()}"
    frames = b"".join(
        f"SEND\ndestination:{queue}\n{headers}\n{body}\0".encode()
        for body, headers in [("first", ""), ("bad", "AMQ_SCHEDULED_DELAY:x\n"), ("after", "")]
    )
    with socket.create_connection(broker.stomp_address) as raw:
        raw.sendall(b"CONNECT\naccept-version:1.2\nhost:localhost\n\n\0" + frames)
        raw.settimeout(10)
        answer = b""
        while b"ERROR" not in answer:
            chunk = raw.recv(4096)
            assert chunk, f"closed without an ERROR: {answer!r}"
            answer += chunk
        assert b"AMQ_SCHEDULED_DELAY" in answer
    with Client(broker.stomp_address) as client:
        client.subscribe(queue)
        assert client.receive().body == "first"
        assert client.nothing_more()


def test_stomp_transaction_schedules_at_commit_and_not_on_abort(broker: BrokerProcess) -> None:
    queue = f"/queue/{name()}"
    with Client(broker.stomp_address) as client:
        client.subscribe(queue)
        client.conn.begin("aborted")
        stomp_send(client, queue, "never", AMQ_SCHEDULED_DELAY="100", transaction="aborted")
        client.conn.abort("aborted")
        client.conn.begin("committed")
        stomp_send(client, queue, "kept", AMQ_SCHEDULED_DELAY="100", transaction="committed")
        time.sleep(0.8)  # past its time: only the commit schedules it
        assert client.nothing_more()
        client.conn.commit("committed", headers={"receipt": "c1"})
        client.wait_receipt("c1")
        message = client.receive()
        assert message.body == "kept" and "scheduledJobId" in message.headers
        time.sleep(0.6)
        assert client.nothing_more()


def test_openwire_delay_keeps_the_message_and_its_id(broker: BrokerProcess) -> None:
    destination = name()
    with ConnectionFactory(f"tcp://127.0.0.1:{broker.openwire_port}").create_connection() as c:
        c.start()
        session = c.create_session()
        queue = session.queue(destination)
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        sent = Message(body="hello", properties={"AMQ_SCHEDULED_DELAY": 600, "k": "v"})
        producer.send(sent)
        assert consumer.receive(0.3) is None
        got = consumer.receive(10)
        assert got is not None and got.body == "hello"
        assert got.message_id == sent.message_id
        assert got.properties["k"] == "v" and "AMQ_SCHEDULED_DELAY" not in got.properties
        assert got.properties["scheduledJobId"].startswith("ID:")


def test_openwire_repeat_must_be_an_int_as_activemq_requires(broker: BrokerProcess) -> None:
    destination = name()
    with ConnectionFactory(f"tcp://127.0.0.1:{broker.openwire_port}").create_connection() as c:
        c.start()
        session = c.create_session()
        queue = session.queue(destination)
        consumer = session.create_consumer(queue)
        producer = session.create_producer(queue)
        with pytest.raises(JMSError):  # a Python int is a Java long: ActiveMQ refuses it
            producer.send(Message("x", properties={PERIOD: 100, REPEAT: 1}))
        producer.send(Message("y", properties={PERIOD: 100, REPEAT: JavaInt(1)}))
        bodies = [m.body for m in iter(lambda: consumer.receive(1.5), None)]
        assert bodies == ["y", "y"]


def test_a_job_for_a_temporary_queue_gone_is_dropped(broker: BrokerProcess) -> None:
    """The temporary queue's connection closed before the delay ended: the copy has
    nowhere to go (as ActiveMQ, the scheduler logs it); no queue is made for it."""
    with Client(broker.stomp_address) as client:
        stomp_send(client, "/temp-queue/gone", "orphan", AMQ_SCHEDULED_DELAY="300")
        _, jobs = admin(broker, "/api/scheduler/jobs")
        [job] = [j for j in jobs if j["destination"].startswith("ID:")]
    deadline = time.monotonic() + 10
    while any(j["job_id"] == job["job_id"] for j in admin(broker, "/api/scheduler/jobs")[1]):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    _, queues = admin(broker, "/api/destinations?type=queue")
    assert all(q["name"] != job["destination"] for q in queues)


def admin(broker: BrokerProcess, path: str, method: str = "GET") -> tuple[int, Any]:
    url = f"http://127.0.0.1:{broker.console_port}{path}"
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_admin_api_lists_and_cancels_scheduled_messages(broker: BrokerProcess) -> None:
    destination = name()
    queue = f"/queue/{destination}"
    with Client(broker.stomp_address) as client:
        client.subscribe(queue)
        for delay in ("60000", "30000", "45000"):
            stomp_send(client, queue, f"in {delay}", AMQ_SCHEDULED_DELAY=delay)
        status, jobs = admin(broker, "/api/scheduler/jobs")
        mine = [j for j in jobs if j["destination"] == destination]
        assert status == 200 and [j["delay"] for j in mine] == [30000, 45000, 60000]
        assert mine[0]["next_time"] <= mine[1]["next_time"] <= mine[2]["next_time"]
        status, answer = admin(broker, f"/api/scheduler/jobs/{mine[0]['job_id']}", "DELETE")
        assert (status, answer) == (200, {"removed": mine[0]["job_id"]})
        status, _ = admin(broker, f"/api/scheduler/jobs/{mine[0]['job_id']}", "DELETE")
        assert status == 404
        start, end = mine[1]["next_time"], mine[1]["next_time"]
        status, answer = admin(broker, f"/api/scheduler/jobs?start={start}&end={end}", "DELETE")
        assert (status, answer) == (200, {"removed": 1})
        status, jobs = admin(broker, "/api/scheduler/jobs")
        assert [j["job_id"] for j in jobs if j["destination"] == destination] == [mine[2]["job_id"]]
        status, answer = admin(broker, "/api/scheduler/jobs", "DELETE")
        assert status == 200 and answer["removed"] >= 1
        assert admin(broker, "/api/scheduler/jobs") == (200, [])


def test_without_scheduler_support_messages_go_at_once_with_their_properties(
    tmp_path: Path,
) -> None:
    with running_broker(workdir=tmp_path) as plain, Client(plain.stomp_address) as client:
        queue = f"/queue/{name()}"
        client.subscribe(queue)
        stomp_send(client, queue, "now", AMQ_SCHEDULED_DELAY="60000")
        message = client.receive(2)
        assert message.headers["AMQ_SCHEDULED_DELAY"] == "60000"
        assert "scheduledJobId" not in message.headers
        status, answer = admin(plain, "/api/scheduler/jobs")
        assert status == 404 and "scheduler_support" in answer["error"]


# -- restarts --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["journal", "sqlite", "postgresql"])
def store_config(request: pytest.FixtureRequest) -> str:
    if request.param == "journal":
        return ON
    lease = "lock_lease_ms = 600\n"
    if request.param == "sqlite":
        return f'{ON}[store]\nkind = "sql"\n{lease}'
    return f'{ON}[store]\nkind = "sql"\nurl = "{request.getfixturevalue("pg_url")}"\n{lease}'


def test_schedules_survive_a_restart_and_deliver_once(tmp_path: Path, store_config: str) -> None:
    with (
        running_broker(store_config, workdir=tmp_path) as broker,
        Client(broker.stomp_address) as client,
    ):
        stomp_send(client, "/queue/done", "early", AMQ_SCHEDULED_DELAY="100", persistent="true")
        client.subscribe("/queue/done", ack="client-individual")
        early = client.receive()
        client.ack(early)
        client.sync()
        stomp_send(client, "/queue/later", "later", AMQ_SCHEDULED_DELAY="2500",
                   persistent="true")  # fmt: skip
        stomp_send(client, "/queue/ticks", "tick", AMQ_SCHEDULED_DELAY="100",
                   AMQ_SCHEDULED_PERIOD="1500", AMQ_SCHEDULED_REPEAT="1")  # fmt: skip
        client.subscribe("/queue/ticks")
        assert client.receive().body == "tick"
    # Stopped with "later" not due and one repeat of "tick" left; "early" was delivered.
    with (
        running_broker(store_config, workdir=tmp_path) as broker,
        Client(broker.stomp_address) as client,
    ):
        client.subscribe("/queue/later")
        client.subscribe("/queue/ticks")
        client.subscribe("/queue/done")
        got = sorted(m.body for m in client.receive_n(2))
        assert got == ["later", "tick"]
        time.sleep(2.0)  # past every time once more: nothing fires twice
        assert client.nothing_more()
        status, jobs = admin(broker, "/api/scheduler/jobs")
        assert (status, jobs) == (200, [])


def test_a_scheduled_send_answered_survives_kill_9(tmp_path: Path) -> None:
    with running_broker(ON, workdir=tmp_path) as broker:
        with Client(broker.stomp_address) as client:
            stomp_send(client, "/queue/k", "kept", AMQ_SCHEDULED_DELAY="1000", persistent="true")
        assert (tmp_path / "data" / "scheduler" / "jobs.log").stat().st_size > 8
        broker.process.kill()  # the receipt came: the schedule is on disk
        broker.process.wait()
    with running_broker(ON, workdir=tmp_path) as broker, Client(broker.stomp_address) as client:
        client.subscribe("/queue/k")
        assert client.receive().body == "kept"
        time.sleep(1.0)
        assert client.nothing_more()


def test_a_fired_job_recorded_does_not_fire_again_after_kill_9(tmp_path: Path) -> None:
    with running_broker(ON, workdir=tmp_path) as broker:
        with Client(broker.stomp_address) as client:
            client.subscribe("/queue/once", ack="client-individual")
            stomp_send(client, "/queue/once", "once", AMQ_SCHEDULED_DELAY="200",
                       persistent="true")  # fmt: skip
            message = client.receive()
            client.ack(message)
            client.sync()
            deadline = time.monotonic() + 10
            while admin(broker, "/api/scheduler/jobs")[1] and time.monotonic() < deadline:
                time.sleep(0.02)  # the firing is recorded just after the message is routed
            assert admin(broker, "/api/scheduler/jobs") == (200, [])
        broker.process.kill()
        broker.process.wait()
    with running_broker(ON, workdir=tmp_path) as broker, Client(broker.stomp_address) as client:
        client.subscribe("/queue/once")
        time.sleep(1.0)  # past the scheduler's next tick
        assert client.nothing_more()


def test_on_the_memory_store_schedules_live_in_memory(tmp_path: Path) -> None:
    memory = f"{ON}persistent = false\n"
    with running_broker(memory, workdir=tmp_path) as broker:
        with Client(broker.stomp_address) as client:
            client.subscribe("/queue/m")
            stomp_send(client, "/queue/m", "soon", AMQ_SCHEDULED_DELAY="200")
            stomp_send(client, "/queue/m", "lost", AMQ_SCHEDULED_DELAY="60000")
            assert client.receive().body == "soon"
        assert not (tmp_path / "data" / "scheduler").exists()
    with running_broker(memory, workdir=tmp_path) as broker:
        assert admin(broker, "/api/scheduler/jobs") == (200, [])
