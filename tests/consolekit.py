"""A broker with the console behind users, for the console's API and browser tests: alice
administers, bob only reads; expired messages reach the DLQ within a fraction of a second."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

from brokers import BrokerProcess
from dovecote.broker.security.users import hash_password

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret"}
CONSOLE_TOML = f"""
[broker]
scheduler_support = true

[policy]
expire_messages_period_ms = 100

[security]
allow_anonymous = true
users = [
  {{ name = "alice", password = "{hash_password(PASSWORDS["alice"])}", groups = ["admins"] }},
  {{ name = "bob", password = "{hash_password(PASSWORDS["bob"])}", groups = ["readers"] }},
]

[console]
admin_group = "admins"
"""


def basic(user: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{PASSWORDS[user]}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def api(
    broker: BrokerProcess,
    path: str,
    method: str = "GET",
    body: object = None,
    user: str | None = "alice",
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    """(status, JSON answer) of one call as ``user`` (or with ``headers``); ``body`` is
    sent as JSON."""
    headers = dict(headers) if headers is not None else basic(user) if user is not None else {}
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
    if method == "POST":
        headers["Content-Type"] = "application/json"
    url = f"http://127.0.0.1:{broker.console_port}{path}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, answer = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, answer = exc.code, exc.read()
    try:
        return status, json.loads(answer)
    except ValueError:
        return status, answer.decode("utf-8", "replace")
