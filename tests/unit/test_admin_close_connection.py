"""Closing a connection through the admin API answers once the broker has removed it: the
console lists the connections again at the answer (a browser test saw it still listed)."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any, cast

from starlette.requests import Request
from starlette.routing import Route

from dovecote.web.admin_actions import RateHistory, action_routes


class ClosingLater:
    """A broker whose transport removes a closed connection a few turns later (the stub)."""

    def __init__(self) -> None:
        self.listed = ["ID:c-1"]
        self.query = SimpleNamespace(
            connections=lambda: [SimpleNamespace(connection_id=c) for c in self.listed]
        )

    def close_connection(self, connection_id: str) -> bool:
        if connection_id not in self.listed:
            return False
        asyncio.get_running_loop().call_later(0.05, self.listed.remove, connection_id)
        return True


async def test_the_answer_comes_once_the_connection_is_gone() -> None:
    broker = ClosingLater()
    routes = action_routes(cast(Any, broker), cast(RateHistory, None))
    (close,) = [
        r for r in routes
        if isinstance(r, Route) and r.path == "/api/connections/{connection_id}"
    ]  # fmt: skip
    scope = {"type": "http", "method": "DELETE", "headers": [], "query_string": b"",
             "path": "/api/connections/ID:c-1",
             "path_params": {"connection_id": "ID:c-1"}}  # fmt: skip
    answer = await close.endpoint(Request(scope))
    assert (answer.status_code, json.loads(answer.body)) == (200, {"closed": "ID:c-1"})
    assert broker.listed == []
    scope["path_params"] = {"connection_id": "ID:c-2"}
    assert (await close.endpoint(Request(scope))).status_code == 404
