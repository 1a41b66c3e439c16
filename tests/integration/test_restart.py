"""What every persistent store keeps across a broker restart (issue: persistence, item 5):
durable subscriptions and their backlog, committed transactions (and not open ones),
redelivery counters, and messages moved to the dead-letter queue. Each store runs the same
scenario through stomp.py against real broker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers import running_broker
from postgres import postgres_server
from stompclient import Client


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["journal", "sqlite", "postgresql", "journaled-sql"])
def config(request: pytest.FixtureRequest) -> str:
    lease = "lock_lease_ms = 600\n"
    if request.param == "journal":
        return '[store]\nkind = "journal"\n'
    if request.param == "sqlite":
        return f'[store]\nkind = "sql"\n{lease}'
    if request.param == "journaled-sql":
        return f'[store]\nkind = "journaled-sql"\n{lease}'
    return f'[store]\nkind = "sql"\nurl = "{request.getfixturevalue("pg_url")}"\n{lease}'


def test_state_survives_a_restart(tmp_path: Path, config: str) -> None:
    with running_broker(config, workdir=tmp_path) as broker:
        sub = Client(broker.stomp_address, client_id="keeper")
        sid = sub.subscribe("/topic/news", **{"activemq.subscriptionName": "s"})
        sub.unsubscribe(sid)
        sub.close()
        producer = Client(broker.stomp_address)
        producer.send("/topic/news", "while away", persistent="true")
        producer.conn.begin("done")
        producer.send("/queue/tx", "committed", persistent="true", transaction="done")
        producer.conn.commit("done")
        producer.conn.begin("open")
        producer.send("/queue/tx", "never committed", persistent="true", transaction="open")
        producer.send("/queue/redo", "redelivered", persistent="true")
        producer.send("/queue/poison", "dead", persistent="true")
        consumer = Client(broker.stomp_address)
        consumer.subscribe("/queue/redo", ack="client-individual")
        consumer.receive()  # delivered once, never acked: its counter goes up
        consumer.subscribe("/queue/poison", ack="client-individual")
        consumer.nack(consumer.receive())
        consumer.sync()
        consumer.close()
        producer.close()  # the open transaction is rolled back with its connection
    with running_broker(config, workdir=tmp_path) as broker:
        back = Client(broker.stomp_address, client_id="keeper")
        back.subscribe("/topic/news", **{"activemq.subscriptionName": "s"})
        assert back.receive().body == "while away"
        client = Client(broker.stomp_address)
        client.subscribe("/queue/tx")
        assert client.receive().body == "committed"
        assert client.nothing_more()
        client.subscribe("/queue/redo")
        redone = client.receive()
        assert redone.body == "redelivered" and redone.headers["redelivered"] == "true"
        client.subscribe("/queue/ActiveMQ.DLQ")
        dead = client.receive()
        assert dead.body == "dead"
        assert dead.headers["original-destination"] == "/queue/poison"
        back.close()
        client.close()


def test_a_backlog_comes_back_whole_by_priority_and_selector(tmp_path: Path, config: str) -> None:
    # The journal recovers it from its index alone and reads each message when it is
    # dispatched: selectors, priorities, properties and bodies must all come back.
    with running_broker(config, workdir=tmp_path) as broker:
        producer = Client(broker.stomp_address)
        for i in range(30):
            priority = "9" if i in (3, 8, 13) else "4"
            producer.send("/queue/backlog", f"body {i}", persistent="true", priority=priority,
                          n=str(i), kind="odd" if i % 2 else "even")  # fmt: skip
        producer.close()
    with running_broker(config, workdir=tmp_path) as broker:
        picky = Client(broker.stomp_address)
        picky.subscribe("/queue/backlog", ack="client-individual", selector="kind = 'odd'")
        odd = picky.receive_n(15)
        assert {m.headers["n"] for m in odd} == {str(i) for i in range(1, 30, 2)}
        assert [m.body for m in odd[:2]] == ["body 3", "body 13"]  # priority 9 first
        assert picky.nothing_more()
        rest = Client(broker.stomp_address)
        rest.subscribe("/queue/backlog")
        even = rest.receive_n(15)
        later = [f"body {i}" for i in range(0, 30, 2) if i != 8]
        assert [m.body for m in even] == ["body 8", *later]
        assert all(m.headers["kind"] == "even" for m in even)
        picky.close()
        rest.close()


def test_full_store_fails_sends_clearly_and_keeps_what_it_has(tmp_path: Path) -> None:
    config = "[usage]\nstore_limit = 200000\nsend_fail_if_no_space = true\n"
    with running_broker(config, workdir=tmp_path) as broker:
        producer = Client(broker.stomp_address)
        accepted = 0
        for i in range(1000):
            producer.conn.send("/queue/big", "x" * 2048, headers={"persistent": "true",
                                                                 "receipt": f"r{i}"})  # fmt: skip
            error_or_receipt = None
            while error_or_receipt is None:
                if not producer.listener.errors.empty():
                    error_or_receipt = producer.listener.errors.get()
                elif not producer.listener.receipts.empty():
                    error_or_receipt = producer.listener.receipts.get()
            if not isinstance(error_or_receipt, str):
                assert "store limit" in error_or_receipt.headers["message"]
                break
            accepted += 1
        assert 0 < accepted < 1000
    with running_broker(config, workdir=tmp_path) as broker:
        consumer = Client(broker.stomp_address)
        consumer.subscribe("/queue/big")
        assert len(consumer.receive_n(accepted)) == accepted
