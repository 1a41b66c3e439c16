"""The admin API's view of the store's replication (issue 35, docs/replication.md):

    GET /api/health        whether this broker serves clients, its role, the store's state
    GET /api/replication   role, position and the replicas this broker sees

A broker of a replicated group that is not master (a slave, or waiting for an election) has
not started its broker: its admin API answers these two (the console's other pages and
requests answer 503 saying so), so an operator or a load balancer can ask any broker of the
group which one is master.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dovecote.broker.broker import Broker

ANSWERED_BY_SLAVES = frozenset({"/api/health", "/api/replication"})


@runtime_checkable
class Replicating(Protocol):
    """A store that replicates (store/replicated/adapter.py), without importing it here:
    its modules need the replicated extra."""

    def replication_status(self) -> Any: ...


def replication(broker: Broker) -> dict[str, Any] | None:
    """The store's replication status as JSON (None: the store does not replicate)."""
    store = broker.store
    if not isinstance(store, Replicating):
        return None
    status: dict[str, Any] = dataclasses.asdict(store.replication_status())
    return status


def standing_by(broker: Broker) -> str | None:
    """The role of a replicated store that is not master (it serves nothing), else None."""
    status = replication(broker)
    if status is None or status["role"] == "master":
        return None
    return str(status["role"])


def health(broker: Broker) -> dict[str, Any]:
    status = replication(broker)
    degraded = broker.query.store_degraded()
    role = "standalone" if status is None else status["role"]
    if role not in ("standalone", "master"):
        state = "standby"
    else:
        state = "ok" if degraded is None else "degraded"
    return {
        "status": state,
        "serving": state != "standby",
        "role": role,
        "broker": broker.settings.broker_name,
        "store_degraded": degraded if status is None else status["degraded"],
    }


def replication_routes(broker: Broker) -> list[Route]:
    async def health_view(request: Request) -> Response:
        return JSONResponse(health(broker))

    async def replication_view(request: Request) -> Response:
        status = replication(broker)
        if status is None:
            return JSONResponse(
                {"error": 'the store does not replicate (store.kind = "replicated-leveldb")'},
                status_code=404,
            )
        return JSONResponse(status)

    return [Route("/api/health", health_view), Route("/api/replication", replication_view)]


class StandbyGuard:
    """While the store is not master, only ANSWERED_BY_SLAVES are served: the rest of the
    console would show an empty broker that is not running."""

    def __init__(self, app: ASGIApp, broker: Broker) -> None:
        self.app = app
        self.broker = broker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in ANSWERED_BY_SLAVES:
            role = standing_by(self.broker)
            if role is not None:
                message = (
                    f"this broker is not master (role: {role}): it serves no clients and no "
                    "admin requests but /api/health and /api/replication"
                )
                await JSONResponse({"error": message}, status_code=503)(scope, receive, send)
                return
        await self.app(scope, receive, send)
