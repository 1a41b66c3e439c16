"""The admin API's routes for what the console does beyond the basics in admin.py: a message
in full, removing, copying, moving and retrying chosen messages, durable subscriptions,
consumers and producers, closing a connection, and the message rates of the last minutes.

    GET    /api/queues/{name}/messages/{id}       one message: headers, properties, body
    POST   /api/queues/{name}/messages/remove     {"messages": [ids]}
    POST   /api/queues/{name}/copy                {"messages": [ids] | absent for all,
    POST   /api/queues/{name}/move                 "to": name, "to_type": "queue"|"topic"}
    POST   /api/queues/{name}/retry               {"messages": [ids] | absent for all}
    GET    /api/subscriptions                     durable subscriptions, active and offline
    DELETE /api/subscriptions/{client_id}/{name}  remove an offline one
    GET    /api/consumers, /api/producers
    DELETE /api/connections/{id}                  close the connection
    GET    /api/rates                             enqueue/dequeue rates, a sample per 5 s
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections import deque
from itertools import pairwise
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from dovecote.broker.broker import Broker
from dovecote.core.destinations import Destination, queue
from dovecote.core.errors import BrokerError, UnknownSubscriptionError
from dovecote.core.message import BROKER_PATH_PROPERTY, BodyType, Message
from dovecote.web import inputs

RATE_SAMPLE_S = 5.0
RATE_SAMPLES = 120
"""Ten minutes of samples."""
MAX_FIND = 100_000
"""A message is looked for among this many of its queue's."""
CLOSE_WAIT_S = 2.0
"""How long closing a connection waits for the broker to have removed it before answering."""


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def destination_text(destination: Destination | None) -> str | None:
    if destination is None:
        return None
    return f"{'queue' if destination.is_queue else 'topic'}://{destination.name}"


def message_json(m: Message, full: bool = False) -> dict[str, object]:
    """A message's headers and properties, its body as text when it is a text message (and
    with ``full`` its bytes, base64, for the hex view)."""
    text = m.body.decode("utf-8", "replace") if m.body_type is BodyType.TEXT else None
    view: dict[str, object] = {
        "message_id": m.message_id,
        "persistent": m.persistent,
        "priority": m.priority,
        "timestamp": m.timestamp,
        "expiration": m.expiration,
        "redelivered": m.redelivery_counter > 0,
        "correlation_id": m.correlation_id,
        "type": m.type,
        "properties": {
            k: v if not isinstance(v, bytes) else v.hex()
            for k, v in m.properties.items()
            if k != BROKER_PATH_PROPERTY  # the broker's own, as no client sees it
        },
        "body_size": len(m.body),
        "text": text,
    }
    if full:
        view.update({
            "destination": destination_text(m.destination),
            "original_destination": destination_text(m.original_destination),
            "reply_to": destination_text(m.reply_to),
            "redelivery_counter": m.redelivery_counter,
            "group_id": m.group_id,
            "user_id": m.user_id,
            "producer_id": m.producer_id,
            "body_type": m.body_type.name.lower(),
            "body_base64": base64.b64encode(m.body).decode("ascii"),
        })  # fmt: skip
    return view


class RateHistory:
    """The broker's enqueue and dequeue totals every few seconds, for the dashboard's chart
    (kept only while the console runs: it loads on first use)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.samples: deque[tuple[float, int, int]] = deque(maxlen=RATE_SAMPLES)
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        totals = self.broker.query.broker().as_map()
        now = asyncio.get_running_loop().time()
        self.samples.append((now, int(totals["enqueueCount"]), int(totals["dequeueCount"])))  # type: ignore[call-overload]

    def rates(self) -> list[dict[str, float]]:
        """Messages per second between consecutive samples; ``ago`` in seconds."""
        self.sample()
        points = list(self.samples)
        self.samples.pop()  # the sample for this answer is not kept: samples stay 5 s apart
        now = points[-1][0]
        return [
            {
                "ago": round(now - t1, 1),
                "enqueued": max(0.0, (e1 - e0) / (t1 - t0)),
                "dequeued": max(0.0, (d1 - d0) / (t1 - t0)),
            }
            for (t0, e0, d0), (t1, e1, d1) in pairwise(points)
            if t1 > t0
        ]

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(RATE_SAMPLE_S)


def action_routes(broker: Broker, history: RateHistory) -> list[Route]:
    def existing_queue(request: Request) -> Destination:
        if request.path_params["kind"] != "queues":
            raise inputs.BadInput("kind", "only a queue's messages can be chosen")
        destination = queue(request.path_params["name"])
        if not broker.query.destination_exists(destination):
            raise LookupError(f"no such queue: {destination.name}")
        return destination

    async def body_of(request: Request) -> dict[str, Any]:
        return inputs.json_object(await request.body())

    async def message_view(request: Request) -> Response:
        destination = existing_queue(request)
        wanted = request.path_params["message_id"]
        for m in broker.query.browse(destination, MAX_FIND):
            if m.message_id == wanted:
                return JSONResponse(message_json(m, full=True))
        return error(404, f"no message {wanted} on queue {destination.name}")

    async def remove_messages(request: Request) -> Response:
        destination = existing_queue(request)
        chosen = inputs.message_ids(await body_of(request), required=True)
        assert chosen is not None
        return JSONResponse({"removed": await broker.contents.remove(destination, chosen)})

    async def copy_or_move(request: Request) -> Response:
        destination = existing_queue(request)
        body = await body_of(request)
        chosen = inputs.message_ids(body, required=False)
        target = inputs.destination("to", body.get("to_type", "queue"), body.get("to"))
        if target == destination:
            raise inputs.BadInput("to", "the messages are on that queue already")
        if request.url.path.endswith("/copy"):
            return JSONResponse({"copied": await broker.contents.copy(destination, chosen, target)})
        return JSONResponse({"moved": await broker.contents.move(destination, chosen, target)})

    async def retry(request: Request) -> Response:
        destination = existing_queue(request)
        chosen = inputs.message_ids(await body_of(request), required=False)
        return JSONResponse({"retried": await broker.contents.move(destination, chosen, None)})

    async def subscriptions(request: Request) -> Response:
        return JSONResponse([
            {
                "client_id": d.client_id, "name": d.name, "topic": d.destination.name,
                "selector": d.selector, "active": d.active, "pending": d.pending,
            }
            for d in broker.query.durable_subscriptions()
        ])  # fmt: skip

    async def remove_subscription(request: Request) -> Response:
        client_id, name = request.path_params["client_id"], request.path_params["name"]
        try:
            await broker.contents.remove_subscription(client_id, name)
        except UnknownSubscriptionError as exc:
            return error(404, str(exc))
        except BrokerError as exc:
            return error(409, f"{exc}: close its consumer first")
        return JSONResponse({"removed": {"client_id": client_id, "name": name}})

    async def consumers(request: Request) -> Response:
        return JSONResponse([
            {
                "consumer_id": c.consumer_id, "connection_id": c.connection_id,
                "destination": destination_text(c.destination), "selector": c.selector,
                "subscription_name": c.subscription_name, "browser": c.browser,
                "prefetch": c.prefetch, "inflight": c.inflight,
            }
            for c in broker.query.consumers()
        ])  # fmt: skip

    async def producers(request: Request) -> Response:
        return JSONResponse([
            {
                "producer_id": p.producer_id, "connection_id": p.connection_id,
                "destination": destination_text(p.destination),
            }
            for p in broker.query.producers()
        ])  # fmt: skip

    async def close_connection(request: Request) -> Response:
        connection_id = request.path_params["connection_id"]
        if not broker.close_connection(connection_id):
            return error(404, f"no open connection {connection_id}")
        # Its transport removes it a few turns after the socket closes: answered once it has
        # (the console lists the connections again at the answer), or after CLOSE_WAIT_S.
        for _ in range(int(CLOSE_WAIT_S / 0.01)):
            if all(c.connection_id != connection_id for c in broker.query.connections()):
                break
            await asyncio.sleep(0.01)
        return JSONResponse({"closed": connection_id})

    async def rates(request: Request) -> Response:
        return JSONResponse({"every_s": RATE_SAMPLE_S, "samples": history.rates()})

    return [
        Route("/api/subscriptions", subscriptions),
        Route("/api/subscriptions/{client_id}/{name}", remove_subscription, methods=["DELETE"]),
        Route("/api/consumers", consumers),
        Route("/api/producers", producers),
        Route("/api/connections/{connection_id}", close_connection, methods=["DELETE"]),
        Route("/api/rates", rates),
        Route("/api/{kind}/{name}/messages/remove", remove_messages, methods=["POST"]),
        Route("/api/{kind}/{name}/messages/{message_id}", message_view),
        Route("/api/{kind}/{name}/copy", copy_or_move, methods=["POST"]),
        Route("/api/{kind}/{name}/move", copy_or_move, methods=["POST"]),
        Route("/api/{kind}/{name}/retry", retry, methods=["POST"]),
    ]
