"""The admin API's console actions over real HTTP to a real broker process with users
(issue 31): one message in full, remove, copy, move and retry chosen messages, durable
subscriptions, consumers, producers, closing a connection (a real STOMP client sees its
socket closed), rates, the OpenAPI description; 400 naming the field for bad input, 403 for
a reader, 401 without a login."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from starlette.routing import Route

from brokers import BrokerProcess, running_broker
from consolekit import CONSOLE_TOML, api
from dovecote.broker.broker import Broker
from dovecote.broker.policy import BrokerSettings
from dovecote.client import ConnectionFactory
from dovecote.client.transport import JMSError
from dovecote.store.memory import MemoryPersistenceAdapter
from dovecote.web.access import ConsoleAccess
from dovecote.web.admin import admin_app
from networks import wait_for
from stompclient import Client


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(CONSOLE_TOML, workdir=tmp_path_factory.mktemp("actions")) as process:
        yield process


def fresh(prefix: str) -> str:
    return f"{prefix}.{uuid.uuid4().hex[:8]}"


def send(broker: BrokerProcess, name: str, texts: list[str], query: str = "") -> list[str]:
    ids = []
    for text in texts:
        status, answer = api(
            broker, f"/api/queues/{name}/messages{query}", "POST", raw=text.encode()
        )
        assert status == 201, answer
        ids.append(answer["message_id"])
    return ids


def texts(broker: BrokerProcess, name: str) -> list[str]:
    status, browsed = api(broker, f"/api/queues/{name}/messages")
    assert status == 200, browsed
    return [m["text"] for m in browsed]


def test_a_message_in_full_with_headers_and_properties(broker: BrokerProcess) -> None:
    name = fresh("full")
    query = '?priority=7&correlationId=c-1&type=order&properties={"region":"eu","n":2}'
    (message_id,) = send(broker, name, ['{"order": 42}'], quote(query, safe="?=&"))
    status, m = api(broker, f"/api/queues/{name}/messages/{quote(message_id)}")
    assert status == 200
    assert (m["priority"], m["correlation_id"], m["type"]) == (7, "c-1", "order")
    assert m["properties"] == {"region": "eu", "n": 2}
    assert m["destination"] == f"queue://{name}" and m["text"] == '{"order": 42}'
    assert m["body_base64"] == "eyJvcmRlciI6IDQyfQ=="
    assert api(broker, f"/api/queues/{name}/messages/ID:none")[0] == 404


def test_browse_pages_with_offset(broker: BrokerProcess) -> None:
    name = fresh("paged")
    send(broker, name, [f"m{i}" for i in range(5)])
    status, page = api(broker, f"/api/queues/{name}/messages?offset=2&limit=2")
    assert status == 200 and [m["text"] for m in page] == ["m2", "m3"]


def test_remove_copy_and_move_chosen_messages(broker: BrokerProcess) -> None:
    source, target = fresh("source"), fresh("target")
    ids = send(broker, source, ["a", "b", "c", "d"])
    assert api(broker, f"/api/queues/{source}/messages/remove", "POST", {"messages": [ids[0]]}) == (
        200, {"removed": 1},
    )  # fmt: skip
    body = {"messages": [ids[1]], "to": target}
    assert api(broker, f"/api/queues/{source}/copy", "POST", body) == (200, {"copied": 1})
    assert texts(broker, source) == ["b", "c", "d"] and texts(broker, target) == ["b"]
    body = {"messages": [ids[2], ids[3]], "to": target, "to_type": "queue"}
    assert api(broker, f"/api/queues/{source}/move", "POST", body) == (200, {"moved": 2})
    assert texts(broker, source) == ["b"] and texts(broker, target) == ["b", "c", "d"]
    status, moved = api(broker, f"/api/queues/{target}/messages/{quote(ids[2])}")
    assert status == 200 and moved["original_destination"] == f"queue://{source}"
    assert api(broker, f"/api/queues/{source}/move", "POST", {"to": target}) == (200, {"moved": 1})
    assert texts(broker, source) == []
    status, row = api(broker, f"/api/queues/{source}")
    assert (row["size"], row["enqueued"], row["dequeued"]) == (0, 4, 4)
    # A moved message is consumed from its new queue.
    with Client(broker.stomp_address) as client:
        client.subscribe(f"/queue/{target}")
        assert [f.body for f in client.receive_n(4)] == ["b", "c", "d", "b"]


def test_an_expired_message_in_the_dlq_is_retried_to_its_queue(broker: BrokerProcess) -> None:
    name = fresh("retried")
    send(broker, name, ["late"], "?timeToLive=1")
    dlq = "ActiveMQ.DLQ"

    def in_dlq() -> list[dict[str, object]]:
        status, browsed = api(broker, f"/api/queues/{dlq}/messages?limit=1000")
        return [m for m in browsed if m["text"] == "late"] if status == 200 else []

    wait_for(lambda: bool(in_dlq()), "the expired message in the DLQ")
    (dead,) = in_dlq()
    retried = api(broker, f"/api/queues/{dlq}/retry", "POST", {"messages": [dead["message_id"]]})
    assert retried == (200, {"retried": 1})
    assert texts(broker, name) == ["late"] and not in_dlq()


def test_durable_subscriptions_listed_and_removed_when_offline(broker: BrokerProcess) -> None:
    name, client_id = fresh("news"), fresh("reader")
    with Client(broker.stomp_address, client_id=client_id) as client:
        client.subscribe(f"/topic/{name}", **{"activemq.subscriptionName": "daily"})
        client.sync()
        status, subs = api(broker, "/api/subscriptions")
        (sub,) = [s for s in subs if s["client_id"] == client_id]
        assert sub == {"client_id": client_id, "name": "daily", "topic": name, "selector": None,
                       "active": True, "pending": 0}  # fmt: skip
        status, error = api(broker, f"/api/subscriptions/{client_id}/daily", "DELETE")
        assert status == 409 and "in use" in error["error"]

    def offline() -> bool:
        subs = api(broker, "/api/subscriptions")[1]
        return not any(s["active"] for s in subs if s["client_id"] == client_id)

    wait_for(offline, "the subscription offline")
    assert api(broker, f"/api/subscriptions/{client_id}/daily", "DELETE")[0] == 200
    assert all(s["client_id"] != client_id for s in api(broker, "/api/subscriptions")[1])
    assert api(broker, f"/api/subscriptions/{client_id}/daily", "DELETE")[0] == 404


def test_consumers_producers_and_closing_a_connection(broker: BrokerProcess) -> None:
    name, client_id = fresh("watched"), fresh("closeme")
    client = Client(broker.stomp_address, client_id=client_id)
    try:
        client.subscribe(f"/queue/{name}")
        client.sync()
        _, connections = api(broker, "/api/connections")
        (mine,) = [c for c in connections if c["client_id"] == client_id]
        assert mine["protocol"] == "stomp" and mine["address"].startswith("127.0.0.1:")
        _, consumers = api(broker, "/api/consumers")
        assert any(c["destination"] == f"queue://{name}" for c in consumers)
        assert api(broker, "/api/producers")[0] == 200
        connection = quote(mine["connection_id"], safe="")
        assert api(broker, f"/api/connections/{connection}", "DELETE", user="bob")[0] == 403
        assert api(broker, f"/api/connections/{connection}", "DELETE") == (
            200, {"closed": mine["connection_id"]},
        )  # fmt: skip
        # Gone from the list by the answer (the console reloads the list at once).
        assert client_id not in [c["client_id"] for c in api(broker, "/api/connections")[1]]
        wait_for(lambda: not client.conn.is_connected(), "the client to see its socket closed")
        assert api(broker, f"/api/connections/{connection}", "DELETE")[0] == 404
    finally:
        if client.conn.is_connected():
            client.close()


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/queues/q/messages?priority=99", None, "priority"),
        ("/api/queues/q/messages?priority=abc", None, "priority"),
        ("/api/queues/q/messages?persistent=maybe", None, "persistent"),
        ("/api/queues/q/messages?delay=-5", None, "delay"),
        ("/api/queues/q/messages?properties=[1]", None, "properties"),
        ("/api/queues/bad.input/move", {"to": "x", "to_type": "things"}, "to_type"),
        ("/api/queues/bad.input/move", {"to": ""}, "to"),
        ("/api/queues/bad.input/copy", {"messages": "all", "to": "x"}, "messages"),
        ("/api/queues/bad.input/messages/remove", {}, "messages"),
        ("/api/topics/bad.input/retry", {}, "kind"),
        ("/api/queues/bad.input/messages?limit=0", None, "limit"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(
    broker: BrokerProcess, path: str, body: object, field: str
) -> None:
    send(broker, "bad.input", ["x"])
    method = "GET" if "limit" in path else "POST"
    status, error = api(broker, path, method, body, raw=b"x" if body is None else None)
    assert status == 400, error
    assert error["error"].startswith(f"{field}: "), error
    assert "Traceback" not in error["error"] and "int()" not in error["error"]


def test_a_reader_reads_and_is_refused_every_change(broker: BrokerProcess) -> None:
    send(broker, "read.only", ["x"])
    assert api(broker, "/api/subscriptions", user="bob")[0] == 200
    assert api(broker, "/api/rates", user="bob")[0] == 200
    for path, body in [
        ("/api/queues/read.only/move", {"to": "y"}),
        ("/api/queues/read.only/copy", {"to": "y"}),
        ("/api/queues/read.only/retry", {}),
        ("/api/queues/read.only/messages/remove", {"messages": []}),
    ]:
        status, error = api(broker, path, "POST", body, user="bob")
        assert status == 403 and "admins" in error["error"]
    assert api(broker, "/api/subscriptions/c/n", "DELETE", user="bob")[0] == 403
    # Without a login, the anonymous user (allow_anonymous) reads and changes nothing.
    assert api(broker, "/api/consumers", user=None)[0] == 200
    assert api(broker, "/api/queues/read.only/purge", "POST", {}, user=None)[0] == 403
    assert api(broker, "/api/consumers", headers={"Authorization": "Basic eDp5"})[0] == 401
    assert texts(broker, "read.only")[0] == "x"


def test_rates_follow_sends(broker: BrokerProcess) -> None:
    status, rates = api(broker, "/api/rates")
    assert status == 200 and rates["every_s"] == 5.0
    assert all({"ago", "enqueued", "dequeued"} <= set(s) for s in rates["samples"])


def test_the_openapi_description_names_every_route(broker: BrokerProcess) -> None:
    status, schema = api(broker, "/api/openapi.json")
    assert status == 200 and schema["openapi"].startswith("3.")
    documented = {(path, method.upper()) for path, ops in schema["paths"].items() for method in ops}
    # The app's routes, from an app made for an in-process broker.
    app = admin_app(Broker(BrokerSettings(), MemoryPersistenceAdapter()), ConsoleAccess())
    routes = [
        r for r in app.routes if isinstance(r, Route) and r.path.startswith(("/api", "/metrics"))
    ]
    assert len(routes) > 20
    for route in routes:
        for method in (route.methods or set()) - {"HEAD"}:
            assert (route.path, method) in documented, f"{method} {route.path} is undocumented"


def test_metrics_counters_have_total(broker: BrokerProcess) -> None:
    name = fresh("counted")
    send(broker, name, ["x"])
    status, text = api(broker, "/metrics")
    assert status == 200
    labels = f'{{destination="{name}",type="queue"}}'
    assert f"dovecote_destination_enqueued_total{labels} 1.0" in text
    assert f"dovecote_destination_expired_total{labels} 0.0" in text
    assert re.search(r"# TYPE dovecote_destination_enqueued(_total)? counter", text)
    assert f"dovecote_destination_size{labels} 1.0" in text
    assert "# TYPE dovecote_connection_consumers gauge" in text


def test_closing_an_openwire_connection_tells_its_exception_listener(
    broker: BrokerProcess,
) -> None:
    client_id = fresh("openwire")
    heard: list[JMSError] = []
    factory = ConnectionFactory(f"tcp://127.0.0.1:{broker.openwire_port}")
    with factory.create_connection(client_id=client_id) as connection:
        connection.set_exception_listener(heard.append)
        connection.start()
        _, connections = api(broker, "/api/connections")
        (mine,) = [c for c in connections if c["client_id"] == client_id]
        assert mine["protocol"] == "openwire"
        closed = api(broker, f"/api/connections/{quote(mine['connection_id'], safe='')}", "DELETE")
        assert closed[0] == 200
        wait_for(lambda: bool(heard), "the client's exception listener")


def test_moves_and_retries_outlive_a_restart(tmp_path: Path) -> None:
    source, target = "kept.source", "kept.target"
    with running_broker(CONSOLE_TOML, workdir=tmp_path) as first:
        ids = send(first, source, ["a", "b", "c"])
        body = {"messages": ids[:2], "to": target}
        assert api(first, f"/api/queues/{source}/move", "POST", body) == (200, {"moved": 2})
        assert api(first, f"/api/queues/{target}/retry", "POST", {"messages": ids[:1]}) == (
            200, {"retried": 1},
        )  # fmt: skip
    with running_broker(CONSOLE_TOML, workdir=tmp_path) as second:
        assert texts(second, source) == ["c", "a"] and texts(second, target) == ["b"]
