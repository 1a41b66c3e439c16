"""The admin API and metrics on the console port (compatibility O1), over real HTTP to a real broker
process, checked against what a STOMP client sends and receives."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from brokers import BrokerProcess, running_broker
from stompclient import Client


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(workdir=tmp_path_factory.mktemp("admin")) as process:
        yield process


def call(broker: BrokerProcess, path: str, method: str = "GET", body: bytes | None = None
         ) -> tuple[int, Any]:  # fmt: skip
    url = f"http://127.0.0.1:{broker.console_port}{path}"
    headers = {"Content-Type": "application/json"} if method == "POST" else {}  # CSRF rule
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            kind = response.headers.get("content-type", "")
            return response.status, json.loads(raw) if "json" in kind else raw.decode()
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_send_browse_and_counters_agree_with_a_stomp_client(broker: BrokerProcess) -> None:
    name = f"admin.{uuid.uuid4().hex[:8]}"
    for i in range(3):
        status, answer = call(broker, f"/api/queues/{name}/messages", "POST", f"m{i}".encode())
        assert status == 201 and answer["message_id"]
    status, browsed = call(broker, f"/api/queues/{name}/messages?limit=2")
    assert status == 200 and [m["text"] for m in browsed] == ["m0", "m1"]
    assert browsed[0]["persistent"] is True
    with Client(broker.stomp_address) as client:
        client.subscribe(
            f"/queue/{name}", ack="client-individual", **{"activemq.prefetchSize": "1"}
        )
        frame = client.receive()
        assert frame.body == "m0"
        status, row = call(broker, f"/api/queues/{name}")
        assert status == 200
        assert (row["size"], row["enqueued"], row["inflight"], row["consumers"]) == (3, 3, 1, 1)
        client.ack(frame)
        client.sync()
    # The closed connection's unacknowledged message (m1) goes back to the queue as the
    # broker processes the disconnect: poll for it.
    deadline = time.monotonic() + 10
    while True:
        status, rows = call(broker, "/api/destinations?type=queue")
        row = next(r for r in rows if r["name"] == name)
        if (row["size"], row["dequeued"], row["consumers"]) == (2, 1, 0):
            break
        assert time.monotonic() < deadline, row
        time.sleep(0.05)
    status, totals = call(broker, "/api/broker")
    assert status == 200 and totals["enqueueCount"] >= 3 and totals["storeUsage"] > 0


def test_purge_and_delete(broker: BrokerProcess) -> None:
    name = f"purge.{uuid.uuid4().hex[:8]}"
    for _ in range(5):
        call(broker, f"/api/queues/{name}/messages", "POST", b"x")
    assert call(broker, f"/api/queues/{name}/purge", "POST") == (200, {"purged": 5})
    assert call(broker, f"/api/queues/{name}")[1]["size"] == 0
    assert call(broker, f"/api/queues/{name}", "DELETE")[0] == 200
    status, error = call(broker, f"/api/queues/{name}")
    assert status == 404 and name in error["error"]


def test_topic_counters(broker: BrokerProcess) -> None:
    name = f"news.{uuid.uuid4().hex[:8]}"
    with Client(broker.stomp_address) as client:
        client.subscribe(f"/topic/{name}")
        call(broker, f"/api/topics/{name}/messages?persistent=false", "POST", b"hello")
        assert client.receive().body == "hello"
        status, row = call(broker, f"/api/topics/{name}")
        assert status == 200 and row["type"] == "topic"
        assert (row["enqueued"], row["consumers"]) == (1, 1)


def test_bad_requests_get_clear_errors_and_the_broker_keeps_serving(broker: BrokerProcess) -> None:
    assert call(broker, "/api/things/x") == (
        404, {"error": "unknown destination kind 'things': use queues or topics"},
    )  # fmt: skip
    status, error = call(broker, "/api/topics/t/purge", "POST")
    assert status == 400 and "only queues" in error["error"]
    status, error = call(broker, "/api/queues/q/messages?priority=high", "POST", b"x")
    assert status == 400 and "high" in error["error"]
    assert call(broker, "/api/queues/never.made/purge", "POST")[0] == 404
    with Client(broker.stomp_address) as client:
        client.send("/queue/still.ok", "alive")
        client.subscribe("/queue/still.ok")
        assert client.receive().body == "alive"


def test_metrics_in_prometheus_text_format(broker: BrokerProcess) -> None:
    name = f"metrics.{uuid.uuid4().hex[:8]}"
    call(broker, f"/api/queues/{name}/messages", "POST", b"x")
    status, text = call(broker, "/metrics")
    assert status == 200
    assert f'dovecote_destination_size{{destination="{name}",type="queue"}} 1.0' in text
    assert "dovecote_connection_count" in text
