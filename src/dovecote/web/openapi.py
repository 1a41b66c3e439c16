"""The admin API described as OpenAPI 3.1, served at /api/openapi.json. Written by hand from
the routes in admin.py and admin_actions.py; tests/integration/test_admin_api_actions.py
checks that every route is in it."""

from __future__ import annotations

from typing import Any

_ERROR = {
    "description": "refused: 400 names the wrong field, 401 asks for a login, 403 a change "
    "without the admin group or from another origin, 404 nothing by that name",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}


def _param(name: str, where: str = "path", kind: str = "string", about: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "schema": {"type": kind},
        "description": about,
    }


def _op(
    summary: str,
    params: list[dict[str, Any]] | None = None,
    body: str | None = None,
    admin: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary + (" (admin group)" if admin else ""),
        "parameters": params or [],
        "responses": {"200": {"description": "done, as JSON"}, "4XX": _ERROR},
    }
    if body is not None:
        op["requestBody"] = {
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}}
        }
    return op


_KIND = _param("kind", about="queues or topics")
_NAME = _param("name", about="the destination's name")
_SEND_PARAMS = [
    _param("persistent", "query", "boolean", "default true"),
    _param("priority", "query", "integer", "0 to 9, default 4"),
    _param("delay", "query", "integer", "ms before delivery (the scheduler)"),
    _param("timeToLive", "query", "integer", "ms until it expires; 0 never"),
    _param("correlationId", "query"),
    _param("type", "query"),
    _param("replyTo", "query", about="a queue's name"),
    _param("properties", "query", about='a JSON object, {"region": "eu"}'),
]

SCHEMA: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "dovecote admin API", "version": "1"},
    "components": {
        "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
        "schemas": {
            "Error": {"type": "object", "properties": {"error": {"type": "string"}}},
            "Chosen": {
                "type": "object",
                "properties": {"messages": {"type": "array", "items": {"type": "string"}}},
            },
            "Transfer": {
                "type": "object",
                "required": ["to"],
                "properties": {
                    "messages": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "absent: every message",
                    },
                    "to": {"type": "string"},
                    "to_type": {"enum": ["queue", "topic"], "default": "queue"},
                },
            },
        },
    },
    "security": [{"basic": []}],
    "paths": {
        "/api/broker": {"get": _op("broker totals and usages")},
        "/api/destinations": {
            "get": _op("every destination's counters", [_param("type", "query")])
        },
        "/api/{kind}/{name}": {
            "get": _op("one destination's counters", [_KIND, _NAME]),
            "delete": _op("remove the destination", [_KIND, _NAME], admin=True),
        },
        "/api/{kind}/{name}/messages": {
            "get": _op(
                "browse a queue",
                [
                    _KIND,
                    _NAME,
                    _param("limit", "query", "integer"),
                    _param("offset", "query", "integer"),
                ],
            ),
            "post": _op(
                "send the body as a text message", [_KIND, _NAME, *_SEND_PARAMS], admin=True
            ),
        },
        "/api/{kind}/{name}/messages/{message_id}": {
            "get": _op(
                "one message: headers, properties, body", [_KIND, _NAME, _param("message_id")]
            ),
        },
        "/api/{kind}/{name}/messages/remove": {
            "post": _op("remove chosen messages", [_KIND, _NAME], "Chosen", admin=True)
        },
        "/api/{kind}/{name}/purge": {
            "post": _op("remove every waiting message", [_KIND, _NAME], admin=True)
        },
        "/api/{kind}/{name}/copy": {
            "post": _op(
                "copy messages to another destination", [_KIND, _NAME], "Transfer", admin=True
            ),
        },
        "/api/{kind}/{name}/move": {
            "post": _op(
                "move waiting messages to another destination",
                [_KIND, _NAME],
                "Transfer",
                admin=True,
            ),
        },
        "/api/{kind}/{name}/retry": {
            "post": _op(
                "send a DLQ's messages back to their original destination",
                [_KIND, _NAME],
                "Chosen",
                admin=True,
            ),
        },
        "/api/connections": {"get": _op("open connections")},
        "/api/network/bridges": {
            "get": _op("network bridges: connector, remote broker, state, forwarded count")
        },
        "/api/connections/{connection_id}": {
            "delete": _op("close the connection", [_param("connection_id")], admin=True)
        },
        "/api/consumers": {"get": _op("consumers")},
        "/api/producers": {"get": _op("producers")},
        "/api/subscriptions": {"get": _op("durable subscriptions, active and offline")},
        "/api/subscriptions/{client_id}/{name}": {
            "delete": _op(
                "remove an offline durable subscription",
                [_param("client_id"), _param("name")],
                admin=True,
            ),
        },
        "/api/rates": {"get": _op("enqueue and dequeue rates of the last minutes")},
        "/api/scheduler/jobs": {
            "get": _op(
                "scheduled messages",
                [_param("start", "query", "integer"), _param("end", "query", "integer")],
            ),
            "delete": _op(
                "cancel scheduled messages",
                [_param("start", "query", "integer"), _param("end", "query", "integer")],
                admin=True,
            ),
        },
        "/api/scheduler/jobs/{job_id}": {
            "delete": _op("cancel one scheduled message", [_param("job_id")], admin=True)
        },
        "/api/csrf": {"get": _op("a CSRF token for HTML forms")},
        "/api/openapi.json": {"get": _op("this description")},
        "/api/health": {"get": _op("serving or standing by: the role, the store's state")},
        "/api/replication": {
            "get": _op("a replicated store: role, position and the replicas seen (else 404)")
        },
        "/metrics": {"get": _op("Prometheus metrics (text format)")},
    },
}
