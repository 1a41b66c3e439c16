"""The broker's admin API (compatibility O1): JSON over HTTP on the console port (8161), and
Prometheus metrics. It runs inside the broker's event loop, so every handler reads the
broker's state directly and consistently; nothing here blocks.

    GET    /api/broker                          broker totals and usages
    GET    /api/destinations[?type=queue|topic]  per-destination counters
    GET    /api/{queues|topics}/{name}           one destination's counters
    GET    /api/queues/{name}/messages?limit=N   browse (headers and text bodies)
    POST   /api/{queues|topics}/{name}/messages  send the request body as a text message
    POST   /api/queues/{name}/purge              remove every waiting message
    DELETE /api/{queues|topics}/{name}           remove the destination
    GET    /api/connections                      open connections
    GET    /api/scheduler/jobs[?start=&end=]     scheduled messages (compatibility D5), by next time
    DELETE /api/scheduler/jobs/{id}              cancel one scheduled message
    DELETE /api/scheduler/jobs[?start=&end=]     cancel all (next time within the range)
    GET    /metrics                              Prometheus text format
    GET    /api/csrf                             a CSRF token for the console's own forms
    GET    /api/openapi.json                     the API described (web/openapi.py)
    GET    /api/health, /api/replication         role and replicas (web/replication.py)

The console's other actions are in web/admin_actions.py, its HTML pages in web/pages.py.
A send takes ?persistent=&priority=&delay=&timeToLive=&correlationId=&type=&replyTo= and
properties= (a JSON object); a wrong value is a 400 naming the field (web/inputs.py).

Every request passes web/access.py's AccessGuard first: the Host and Origin checks, and
with [security] users HTTP Basic, reads for readers and changes for the admin group
(docs/admin-api.md).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import Iterable
from itertools import count

import uvicorn
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from dovecote.broker.broker import Broker
from dovecote.broker.scheduler import DELAY, Scheduler
from dovecote.core.destinations import Destination, queue, topic
from dovecote.core.errors import DovecoteError, ResourceLimitError
from dovecote.core.message import BodyType, Message
from dovecote.network.connector import NetworkConnectors
from dovecote.web import inputs, openapi, pages
from dovecote.web.access import (
    CSRF_FIELD,
    CSRF_HEADER,
    PRINCIPAL_KEY,
    AccessGuard,
    ConsoleAccess,
    CsrfTokens,
)
from dovecote.web.admin_actions import RateHistory, action_routes, message_json
from dovecote.web.replication import StandbyGuard, replication_routes

MAX_BROWSE = 1000
_KINDS = {"queues": queue, "topics": topic}


def _destination(request: Request) -> Destination:
    kind = request.path_params["kind"]
    if kind not in _KINDS:
        raise LookupError(f"unknown destination kind {kind!r}: use queues or topics")
    return _KINDS[kind](request.path_params["name"])


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


_DESTINATION_METRICS = [
    ("size", GaugeMetricFamily, "size", "Messages held"),
    ("enqueued", CounterMetricFamily, "enqueued", "Messages sent since start"),
    ("dequeued", CounterMetricFamily, "dequeued", "Messages acknowledged since start"),
    ("dispatched", CounterMetricFamily, "dispatched", "Messages given to consumers"),
    ("expired", CounterMetricFamily, "expired", "Messages expired since start"),
    ("inflight", GaugeMetricFamily, "inflight", "Dispatched, not yet acknowledged"),
    ("consumers", GaugeMetricFamily, "consumers", "Attached consumers"),
    ("producers", GaugeMetricFamily, "producers", "Attached producers"),
    ("memory_usage", GaugeMetricFamily, "memory_usage_bytes", "Memory the messages take"),
]
"""Counters get _total (dovecote_destination_enqueued_total; gauges without it before the
console, docs/console.md)."""


class _BrokerCollector(Collector):
    """Reads the broker's counters at scrape time; nothing is updated on the hot path."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterable[Metric]:
        labels = ["destination", "type"]
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            field: kind(f"dovecote_destination_{name}", about, labels=labels)
            for field, kind, name, about in _DESTINATION_METRICS
        }
        all_stats = self.broker.query.destinations()
        for s in all_stats:
            row = s.as_json()
            for field, family in families.items():
                family.add_metric([str(row["name"]), str(row["type"])], float(row[field]))  # type: ignore[arg-type]
        yield from families.values()
        per_connection = ["connection", "client_id", "protocol"]
        connection_families = {
            field: GaugeMetricFamily(
                f"dovecote_connection_{field}", f"The connection's {field}", labels=per_connection
            )
            for field in ("sessions", "consumers", "producers")
        }
        for c in self.broker.query.connections():
            names = [c.connection_id, c.client_id, c.peer.protocol]
            for field, family in connection_families.items():
                family.add_metric(names, float(getattr(c, field)))
        yield from connection_families.values()
        totals = self.broker.query.broker(all_stats).as_map()
        for field in ("memoryUsage", "storeUsage", "tempUsage", "connectionCount"):
            name = "dovecote_" + "".join("_" + c.lower() if c.isupper() else c for c in field)
            yield GaugeMetricFamily(name, f"broker {field}", value=float(totals[field]))  # type: ignore[arg-type]
        degraded = self.broker.query.store_degraded() is not None
        yield GaugeMetricFamily(
            "dovecote_store_degraded", "1 while the store accepts no writes", value=float(degraded)
        )


def admin_app(
    broker: Broker, access: ConsoleAccess, history: RateHistory | None = None
) -> Starlette:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_BrokerCollector(broker))
    message_seq = count(1)
    producer = f"{broker.ids.next_name()}:0:0"

    async def broker_view(request: Request) -> Response:
        view = broker.query.broker().as_map()
        view["storeDegraded"] = broker.query.store_degraded()
        return JSONResponse(view)

    async def destinations(request: Request) -> Response:
        wanted = request.query_params.get("type")
        rows = [s.as_json() for s in broker.query.destinations()]
        return JSONResponse([r for r in rows if wanted is None or r["type"] == wanted])

    async def destination_view(request: Request) -> Response:
        destination = _destination(request)
        found = broker.query.destinations(destination)
        if not found:
            return _error(404, f"no such destination: {destination}")
        return JSONResponse(found[0].as_json())

    async def browse(request: Request) -> Response:
        destination = _destination(request)
        if not destination.is_queue or not broker.query.destination_exists(destination):
            return _error(404, f"no such queue: {destination}")
        params = request.query_params
        limit = inputs.whole_number("limit", params.get("limit"), 100, 1, MAX_BROWSE)
        offset = inputs.whole_number("offset", params.get("offset"), 0, 0, 10_000_000)
        browsed = broker.query.browse(destination, offset + limit)[offset:]
        return JSONResponse([message_json(m) for m in browsed])

    async def send(request: Request) -> Response:
        destination = _destination(request)
        options = inputs.send_options(request.query_params)
        body = await request.body()
        now = int(time.time() * 1000)
        properties = dict(options.properties or {})
        if options.delay_ms:
            properties[DELAY] = options.delay_ms
        message = Message(
            message_id=f"{producer}:{next(message_seq)}",
            destination=destination,
            body=body,
            body_type=BodyType.TEXT,
            persistent=options.persistent,
            priority=options.priority,
            timestamp=now,
            expiration=now + options.time_to_live_ms if options.time_to_live_ms else 0,
            correlation_id=options.correlation_id,
            type=options.type,
            reply_to=options.reply_to,
            properties=properties,
        )
        try:
            if options.delay_ms:
                # The scheduler takes sends from connections; the console's goes to it.
                try:
                    await scheduler().schedule([message])
                except LookupError as exc:
                    raise inputs.BadInput("delay", str(exc)) from None
            else:
                await asyncio.wait_for(broker.publish(message), timeout=30)
        except (TimeoutError, ResourceLimitError) as exc:
            return _error(503, f"broker is full: {exc}")
        return JSONResponse({"message_id": message.message_id}, status_code=201)

    async def purge(request: Request) -> Response:
        destination = _destination(request)
        if not destination.is_queue:
            return _error(400, "only queues can be purged")
        if not broker.query.destination_exists(destination):
            return _error(404, f"no such queue: {destination}")
        return JSONResponse({"purged": await broker.contents.purge(destination)})

    async def delete(request: Request) -> Response:
        destination = _destination(request)
        if not await broker.delete_destination(destination):
            return _error(404, f"no such destination: {destination}")
        return JSONResponse({"deleted": str(destination)})

    async def connections(request: Request) -> Response:
        return JSONResponse([
            {
                "connection_id": c.connection_id,
                "client_id": c.client_id,
                "address": c.peer.address,
                "protocol": c.peer.protocol,
                "tls": c.peer.tls,
                "user": c.user,
                "consumers": c.consumers,
                "producers": c.producers,
                "sessions": c.sessions,
            }
            for c in broker.query.connections()
        ])  # fmt: skip

    async def network_bridges(request: Request) -> Response:
        network = broker.plugins.find(NetworkConnectors)
        return JSONResponse(network.bridges() if network is not None else [])

    def scheduler() -> Scheduler:
        found = broker.plugins.find(Scheduler)
        if found is None:
            raise LookupError("scheduler support is off ([broker] scheduler_support)")
        return found

    def time_range(request: Request) -> tuple[int | None, int | None]:
        params = request.query_params
        start, end = params.get("start"), params.get("end")
        if (start is None) != (end is None):
            raise ValueError("give both start and end (ms since the epoch), or neither")
        return (None, None) if start is None or end is None else (int(start), int(end))

    async def scheduled_jobs(request: Request) -> Response:
        views = scheduler().views(*time_range(request))
        return JSONResponse([view.as_json() for view in views])

    async def cancel_job(request: Request) -> Response:
        job_id = request.path_params["job_id"]
        if not await scheduler().remove(job_id):
            return _error(404, f"no scheduled job {job_id}")
        return JSONResponse({"removed": job_id})

    async def cancel_jobs(request: Request) -> Response:
        return JSONResponse({"removed": await scheduler().remove_all(*time_range(request))})

    tokens = CsrfTokens()

    async def csrf_token(request: Request) -> Response:
        principal = request.scope[PRINCIPAL_KEY]
        token = tokens.issue("" if principal is None else principal.user)
        return JSONResponse(
            {"token": token, "header": CSRF_HEADER, "field": CSRF_FIELD},
            headers={"Cache-Control": "no-store"},
        )

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), media_type="text/plain; version=0.0.4")

    async def bad_request(request: Request, exc: Exception) -> Response:
        return _error(400, str(exc))

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(404, str(exc))

    async def openapi_schema(request: Request) -> Response:
        return JSONResponse(openapi.SCHEMA)

    return Starlette(
        routes=[
            # Before /api/{kind}/{name}, which would take /api/connections/{id}.
            *action_routes(broker, history or RateHistory(broker)),
            Route("/api/openapi.json", openapi_schema),
            *replication_routes(broker),
            # Before /api/{kind}/{name}, which would take /api/scheduler/jobs.
            Route("/api/scheduler/jobs", scheduled_jobs),
            Route("/api/scheduler/jobs", cancel_jobs, methods=["DELETE"]),
            Route("/api/scheduler/jobs/{job_id}", cancel_job, methods=["DELETE"]),
            Route("/api/broker", broker_view),
            Route("/api/network/bridges", network_bridges),
            Route("/api/destinations", destinations),
            Route("/api/{kind}/{name}", destination_view),
            Route("/api/{kind}/{name}", delete, methods=["DELETE"]),
            Route("/api/{kind}/{name}/messages", browse),
            Route("/api/{kind}/{name}/messages", send, methods=["POST"]),
            Route("/api/{kind}/{name}/purge", purge, methods=["POST"]),
            Route("/api/connections", connections),
            Route("/metrics", metrics),
            Route("/api/csrf", csrf_token),
            *pages.page_routes(broker, access, tokens),
        ],
        middleware=[
            Middleware(AccessGuard, access=access, tokens=tokens),
            Middleware(StandbyGuard, broker=broker),  # a replicated store's slave
        ],
        exception_handlers={
            ValueError: bad_request,
            DovecoteError: bad_request,
            LookupError: not_found,
        },
    )


class AdminServer:
    """uvicorn serving the admin app in the broker's own loop, on the console's listening
    socket (web/console.py binds it). uvicorn's ``serve()`` would install its own
    SIGINT/SIGTERM handlers over the CLI's, so this drives its startup, main loop and
    shutdown steps itself."""

    def __init__(
        self,
        broker: Broker,
        sock: socket.socket,
        tls: ssl.SSLContext | None = None,
        access: ConsoleAccess | None = None,
    ) -> None:
        self.history = RateHistory(broker)
        app = admin_app(broker, access or ConsoleAccess(), self.history)
        self._config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off",
            # No logging setup of uvicorn's own: its lines go where [logging] says.
            log_config=None,
            # HTTPS with the broker's own context ([tls], made by the app).
            ssl_context_factory=(lambda _config, _default: tls) if tls is not None else None,
        )  # fmt: skip
        self._server = uvicorn.Server(self._config)
        self._sockets = [sock]
        self._loop_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._config.load()
        self._server.lifespan = self._config.lifespan_class(self._config)
        await self._server.startup(sockets=self._sockets)
        self._loop_task = asyncio.create_task(self._server.main_loop())
        self.history.start()

    async def stop(self) -> None:
        """Stops serving; the socket stays the console's to close."""
        if self._loop_task is None:
            return
        await self.history.stop()
        self._server.should_exit = True
        await self._loop_task
        await self._server.shutdown(sockets=self._sockets)
