"""The admin API and /metrics behind the broker's users (compatibility O3), over real HTTP to a real
broker process, with curl and urllib: 401 without or with wrong credentials, reads for
readers, changes for admins only, and the browser attacks refused whoever asks: a change
from a page of another origin, a Host that is not the console's (DNS rebinding), a
cross-site form POST."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from brokers import BrokerProcess, running_broker
from dovecote.broker.security.users import hash_password
from tlscerts import make_test_pki, tls_config

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
SECURED = f"""
[broker]
scheduler_support = true

[security]
users = [
  {{ name = "alice", password = "{hash_password(PASSWORDS["alice"])}", groups = ["admins"] }},
  {{ name = "bob", password = "{hash_password(PASSWORDS["bob"])}", groups = ["readers"] }},
  {{ name = "carol", password = "{hash_password(PASSWORDS["carol"])}" }},
]

[console]
read_group = "readers"
allowed_hosts = ["broker.test"]
allowed_origins = ["https://console.test"]
"""
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(SECURED, workdir=tmp_path_factory.mktemp("secured")) as process:
        yield process


@pytest.fixture(scope="module")
def open_console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """No [security]: the console answers without credentials, as before (on loopback)."""
    with running_broker(workdir=tmp_path_factory.mktemp("open")) as process:
        yield process


def auth(user: str, password: str | None = None) -> dict[str, str]:
    secret = PASSWORDS[user] if password is None else password
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()}


def call(
    broker: BrokerProcess,
    path: str,
    method: str = "GET",
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON or text, headers by lowercase name) of one request over urllib."""
    url = f"http://127.0.0.1:{broker.console_port}{path}"
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, raw, answer_headers = response.status, response.read(), response.headers
    except urllib.error.HTTPError as exc:
        status, raw, answer_headers = exc.code, exc.read(), exc.headers
    kind = answer_headers.get("content-type", "")
    lowered = {k.lower(): v for k, v in answer_headers.items()}
    return status, json.loads(raw) if "json" in kind else raw.decode(), lowered


def curl(broker: BrokerProcess, path: str, *args: str) -> tuple[int, str, str]:
    """(status, header lines, body) of ``curl`` on the console."""
    url = f"http://127.0.0.1:{broker.console_port}{path}"
    done = subprocess.run(
        ["curl", "-s", "-S", "-i", "--max-time", "10", *args, url],
        capture_output=True, text=True, check=True, timeout=20,
    )  # fmt: skip
    head, _, body = done.stdout.replace("\r\n", "\n").partition("\n\n")
    return int(head.split()[1]), head, body


def logged(broker: BrokerProcess, text: str) -> list[str]:
    return [line for line in list(broker.log_lines) if text in line]


def queue_size(broker: BrokerProcess, name: str) -> int:
    status, row, _ = call(broker, f"/api/queues/{name}", headers=auth("alice"))
    return int(row["size"]) if status == 200 else 0


def fresh_queue(broker: BrokerProcess, messages: int = 1) -> str:
    name = f"sec.{uuid.uuid4().hex[:8]}"
    for i in range(messages):
        status, _, _ = call(broker, f"/api/queues/{name}/messages", "POST",
                            f'{{"n": {i}}}'.encode(), {**JSON, **auth("alice")})  # fmt: skip
        assert status == 201
    return name


def test_no_or_wrong_credentials_get_401_with_a_basic_challenge(secured: BrokerProcess) -> None:
    for path in ("/api/broker", "/api/destinations", "/metrics", "/api/scheduler/jobs"):
        status, head, body = curl(secured, path)
        assert status == 401, (path, body)
        assert 'www-authenticate: basic realm="dovecote"' in head.lower()
        assert "authentication required" in json.loads(body)["error"]
    for user, password in (("alice", "wrong"), ("nobody", "alice-secret"), ("alice", "")):
        status, _, body = curl(secured, "/api/broker", "-u", f"{user}:{password}")
        assert status == 401 and "wrong user or password" in body
    status, _, _ = curl(secured, "/api/broker", "-H", "Authorization: Bearer abc")
    assert status == 401
    # A wrong login is one WARNING line naming the user, never the password, no traceback.
    deadline = time.monotonic() + 10
    while len(lines := logged(secured, "wrong user or password (user 'nobody')")) < 1:
        assert time.monotonic() < deadline, secured.log_text()
        time.sleep(0.05)
    assert len(lines) == 1 and "WARNING" in lines[0]
    assert "alice-secret" not in secured.log_text() and "Traceback" not in secured.log_text()
    # Nothing changes without credentials either.
    name = fresh_queue(secured, 2)
    status, _, _ = curl(secured, f"/api/queues/{name}/purge", "-X", "POST", "-H",
                        "Content-Type: application/json")  # fmt: skip
    assert status == 401 and queue_size(secured, name) == 2


def test_readers_read_and_only_admins_change_state(secured: BrokerProcess) -> None:
    name = fresh_queue(secured, 3)
    bob = auth("bob")
    for path in ("/api/broker", "/api/destinations", f"/api/queues/{name}",
                 f"/api/queues/{name}/messages", "/api/connections", "/api/scheduler/jobs",
                 "/metrics"):  # fmt: skip
        assert call(secured, path, headers=bob)[0] == 200, path
    for method, path in (
        ("POST", f"/api/queues/{name}/messages"),
        ("POST", f"/api/queues/{name}/purge"),
        ("DELETE", f"/api/queues/{name}"),
        ("DELETE", "/api/scheduler/jobs"),
        ("DELETE", "/api/scheduler/jobs/ID:x:1:1:1"),
    ):
        status, answer, _ = call(secured, path, method, b"{}", {**JSON, **bob})
        assert status == 403, (method, path, answer)
        assert answer["error"] == "user 'bob' is not in the group 'admins'"
    assert queue_size(secured, name) == 3
    # carol is in no group: read_group = "readers" keeps her out of reads as well.
    status, answer, _ = call(secured, "/api/broker", headers=auth("carol"))
    assert (status, answer["error"]) == (403, "user 'carol' is not in the group 'readers'")
    # alice is in admins: with curl, she sends, purges and deletes.
    name = f"sec.{uuid.uuid4().hex[:8]}"
    alice = ("-u", "alice:alice-secret", "-H", "Content-Type: application/json")
    status, _, body = curl(secured, f"/api/queues/{name}/messages", *alice,
                           "--data", '{"order": 1}')  # fmt: skip
    assert status == 201 and json.loads(body)["message_id"]
    status, _, body = curl(secured, f"/api/queues/{name}/messages", "-u", "bob:bob-secret")
    assert status == 200 and [m["text"] for m in json.loads(body)] == ['{"order": 1}']
    status, _, body = curl(secured, f"/api/queues/{name}/purge", *alice, "-X", "POST")
    assert (status, json.loads(body)) == (200, {"purged": 1})
    status, _, body = curl(secured, f"/api/queues/{name}", "-u", "alice:alice-secret",
                           "-X", "DELETE")  # fmt: skip
    assert status == 200
    assert call(secured, f"/api/queues/{name}", headers=auth("alice"))[0] == 404


def test_a_change_from_another_origin_is_refused_even_for_an_admin(
    secured: BrokerProcess,
) -> None:
    name = fresh_queue(secured, 2)
    own = f"http://127.0.0.1:{secured.console_port}"
    alice = {**JSON, **auth("alice")}
    for foreign in (
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": f"http://localhost:{secured.console_port}"},  # another origin, same host
        {"Origin": f"https://127.0.0.1:{secured.console_port}"},
        {"Referer": "http://evil.example/page.html"},  # no Origin: the Referer says
    ):
        for method, path in (("POST", f"/api/queues/{name}/purge"),
                             ("POST", f"/api/queues/{name}/messages"),
                             ("DELETE", f"/api/queues/{name}")):  # fmt: skip
            status, answer, _ = call(secured, path, method, b"{}", {**alice, **foreign})
            assert status == 403 and "another origin" in answer["error"], (foreign, answer)
    assert queue_size(secured, name) == 2
    status, answer, _ = call(secured, f"/api/queues/{name}/purge", "POST", b"",
                             {**alice, "Origin": own})  # fmt: skip
    assert (status, answer) == (200, {"purged": 2})
    status, _, _ = call(secured, f"/api/queues/{name}/purge", "POST", b"",
                        {**alice, "Origin": "https://console.test"})  # allowed_origins  # fmt: skip
    assert status == 200
    status, _, _ = call(secured, f"/api/queues/{name}", "DELETE", None,
                        {**alice, "Referer": own + "/console/queues"})  # fmt: skip
    assert status == 200


def test_a_host_the_console_does_not_answer_to_is_refused(secured: BrokerProcess) -> None:
    """DNS rebinding: a page of evil.example re-points its name at this address; the
    browser then sends Host: evil.example, with the user's cached credentials."""
    port = secured.console_port
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}"):
        status, _, body = curl(secured, "/api/broker", "-u", "alice:alice-secret",
                               "-H", f"Host: {host}")  # fmt: skip
        assert status == 421 and "does not answer to Host" in body, (host, body)
        status, _, _ = curl(secured, "/metrics", "-H", f"Host: {host}")
        assert status == 421
    name = fresh_queue(secured, 1)
    status, _, _ = curl(secured, f"/api/queues/{name}/purge", "-u", "alice:alice-secret",
                        "-X", "POST", "-H", "Content-Type: application/json",
                        "-H", f"Host: evil.example:{port}")  # fmt: skip
    assert status == 421 and queue_size(secured, name) == 1
    for host in (f"localhost:{port}", f"broker.test:{port}", f"[::1]:{port}", "127.0.0.1"):
        status, _, _ = curl(secured, "/api/broker", "-u", "alice:alice-secret",
                            "-H", f"Host: {host}")  # fmt: skip
        assert status == 200, host


def test_a_cross_site_form_post_is_refused_and_the_consoles_own_form_passes(
    secured: BrokerProcess,
) -> None:
    """What a page of another site can make a browser POST without a preflight: a form
    (urlencoded, multipart, text/plain) or a body-less request, here as an older browser
    sends it with neither Origin nor Referer, carrying the user's cached credentials."""
    name = fresh_queue(secured, 2)
    alice = auth("alice")
    for kind in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                 "text/plain;charset=UTF-8"):  # fmt: skip
        status, answer, _ = call(secured, f"/api/queues/{name}/purge", "POST", b"a=b",
                                 {**alice, "Content-Type": kind})  # fmt: skip
        assert status == 403 and "CSRF token" in answer["error"], (kind, answer)
    status, _, body = curl(secured, f"/api/queues/{name}/purge", "-u", "alice:alice-secret",
                           "-X", "POST")  # fmt: skip
    assert status == 403 and "application/json" in body
    status, _, _ = curl(secured, f"/api/queues/{name}/messages", "-u", "alice:alice-secret",
                        "--data", "hello")  # curl's default: a form  # fmt: skip
    assert status == 403
    assert queue_size(secured, name) == 2
    # The console's own form carries the token GET /api/csrf gave its user.
    status, issued, headers = call(secured, "/api/csrf", headers=alice)
    assert status == 200 and issued["field"] == "csrf_token"
    assert headers["cache-control"] == "no-store"
    form = f"csrf_token={issued['token']}".encode()
    status, answer, _ = call(secured, f"/api/queues/{name}/purge", "POST", form,
                             {**alice, **FORM})  # fmt: skip
    assert (status, answer) == (200, {"purged": 2})
    # A token is its user's: bob's (an admin's page would not have it) is no use to alice.
    bobs = call(secured, "/api/csrf", headers=auth("bob"))[1]["token"]
    status, _, _ = call(secured, f"/api/queues/{name}/purge", "POST", b"",
                        {**alice, **FORM, "X-CSRF-Token": bobs})  # fmt: skip
    assert status == 403
    status, _, _ = call(secured, f"/api/queues/{name}/purge", "POST", b"",
                        {**alice, **FORM, "X-CSRF-Token": issued["token"]})  # fmt: skip
    assert status == 200


def test_metrics_answer_anonymously_only_when_configured(tmp_path_factory: pytest.TempPathFactory
                                                        ) -> None:  # fmt: skip
    config = SECURED.replace('read_group = "readers"', "metrics_anonymous = true")
    with running_broker(config, workdir=tmp_path_factory.mktemp("metrics")) as broker:
        status, text, _ = call(broker, "/metrics")
        assert status == 200 and "dovecote_connection_count" in text
        assert call(broker, "/api/broker")[0] == 401


def test_without_users_the_console_is_open_but_not_to_other_sites(
    open_console: BrokerProcess,
) -> None:
    broker = open_console
    assert call(broker, "/api/broker")[0] == 200
    assert call(broker, "/metrics")[0] == 200
    name = "open." + uuid.uuid4().hex[:8]
    status, _, _ = call(broker, f"/api/queues/{name}/messages", "POST", b"hi", JSON)
    assert status == 201
    status, _, _ = call(broker, f"/api/queues/{name}/purge", "POST", b"", {**JSON,
                        "Origin": "http://evil.example"})  # fmt: skip
    assert status == 403
    status, _, _ = call(broker, f"/api/queues/{name}/purge", "POST", b"a=b", FORM)
    assert status == 403
    status, _, _ = curl(broker, "/api/broker", "-H", "Host: evil.example")
    assert status == 421
    assert call(broker, f"/api/queues/{name}")[1]["size"] == 1
    status, _, headers = call(broker, f"/api/queues/{name}", "DELETE")
    assert status == 200 and headers["x-frame-options"] == "DENY"


def test_the_purge_tool_logs_in_with_the_user_in_the_admin_url(secured: BrokerProcess) -> None:
    name = fresh_queue(secured, 2)
    url = f"tcp://127.0.0.1:{secured.openwire_port}"

    def purge(login: str) -> subprocess.CompletedProcess[str]:
        admin = f"http://{login}@127.0.0.1:{secured.console_port}"
        return subprocess.run(
            [sys.executable, "-m", "dovecote", "purge", f"queue://{name}", "--url", url,
             "--admin", admin], capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip

    refused = purge("bob:bob-secret")
    assert refused.returncode != 0 and "not in the group 'admins'" in refused.stderr
    assert "bob-secret" not in refused.stderr + refused.stdout
    assert queue_size(secured, name) == 2
    assert "Purged: 2 messages" in purge("alice:alice-secret").stdout


def test_over_https_the_login_and_the_own_origin_check_hold(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """[console] tls = true: the credentials travel encrypted, and the console's own origin
    is https://...: a page of the same host over plain http is another origin."""
    pki = make_test_pki(tmp_path_factory.mktemp("pki"))
    config = tls_config(pki, "none", SECURED.replace("[console]\n", "[console]\ntls = true\n"))
    with running_broker(config, workdir=tmp_path_factory.mktemp("https")) as broker:
        base = f"https://localhost:{broker.console_port}"

        def https(path: str, *args: str) -> tuple[int, str]:
            done = subprocess.run(
                ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert",
                 str(pki.ca), *args, base + path],
                capture_output=True, text=True, timeout=30, check=True,
            )  # fmt: skip
            return int(done.stdout), done.stderr

        assert https("/api/broker")[0] == 401
        assert https("/api/broker", "-u", "bob:bob-secret")[0] == 200
        name = f"tls.{uuid.uuid4().hex[:8]}"
        send = ("-u", "alice:alice-secret", "-H", "Content-Type: application/json", "--data",
                "{}")  # fmt: skip
        plain_page = f"http://localhost:{broker.console_port}"
        assert https(f"/api/queues/{name}/messages", *send, "-H", f"Origin: {plain_page}")[0] == 403
        assert https(f"/api/queues/{name}/messages", *send, "-H", f"Origin: {base}")[0] == 201
