"""The console's HTML pages (issue 31), rendered on the server from the query API with
Jinja2; web/static/console.js sorts and filters tables, draws the rate chart, and makes
every change through the JSON API after a confirmation (so the API's access rules are the
only ones). The login is the API's: HTTP Basic, which the browser asks for; a page carries
the user's CSRF token for the script's requests. Read-only users get no change buttons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from dovecote.broker.broker import Broker
from dovecote.broker.scheduler import Scheduler
from dovecote.core.destinations import Destination, queue, topic
from dovecote.core.message import BodyType, Message
from dovecote.network.connector import NetworkConnectors
from dovecote.web import inputs
from dovecote.web.access import PRINCIPAL_KEY, ConsoleAccess, CsrfTokens
from dovecote.web.admin_actions import MAX_FIND, message_json

HERE = Path(__file__).parent
PAGE_SIZE = 50
HEX_LIMIT = 64 * 1024
"""The hex view shows a body up to this many bytes."""
# The pages load nothing but their own script and style: no inline script, no other site.
_PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _percent(used: int, limit: int) -> float:
    return 0.0 if limit <= 0 else min(100.0, round(100 * used / limit, 1))


def _hex_dump(body: bytes) -> str:
    lines = []
    for offset in range(0, min(len(body), HEX_LIMIT), 16):
        chunk = body[offset : offset + 16]
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{offset:08x}  {chunk.hex(' '):<47}  {text}")
    if len(body) > HEX_LIMIT:
        lines.append(f"... {len(body) - HEX_LIMIT} more bytes")
    return "\n".join(lines)


def _pretty_json(message: Message) -> str | None:
    if message.body_type is not BodyType.TEXT:
        return None
    try:
        return json.dumps(json.loads(message.body), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def page_routes(broker: Broker, access: ConsoleAccess, tokens: CsrfTokens) -> list[Route | Mount]:
    templates = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters["size"] = _size
    templates.filters["url"] = lambda text: quote(str(text), safe="")
    templates.globals["percent"] = _percent

    def render(request: Request, template: str, status: int = 200, **context: Any) -> Response:
        principal = request.scope.get(PRINCIPAL_KEY)
        users = access.users
        may_change = users is None or (principal is not None and users.may(principal, True))
        html = templates.get_template(template).render(
            user=None if principal is None else principal.user,
            may_change=may_change,
            csrf_token=tokens.issue("" if principal is None else principal.user),
            broker_name=broker.settings.broker_name,
            path=request.url.path,
            logged_in=users is None or "authorization" in request.headers,
            **context,
        )
        return HTMLResponse(html, status_code=status, headers={
            "Content-Security-Policy": _PAGE_CSP, "Cache-Control": "no-store",
        })  # fmt: skip

    def not_found(request: Request, what: str) -> Response:
        return render(request, "not_found.html", status=404, what=what)

    async def dashboard(request: Request) -> Response:
        view = broker.query.broker()
        return render(
            request, "dashboard.html", totals=view.as_map(), usage=view.usage,
            degraded=broker.query.store_degraded(),
        )  # fmt: skip

    async def destinations(request: Request) -> Response:
        kind = request.url.path.strip("/")
        wanted_queue = kind == "queues"
        rows = [d for d in broker.query.destinations() if d.destination.is_queue == wanted_queue]
        return render(request, "destinations.html", kind=kind, rows=rows)

    def existing(kind: str, name: str) -> Destination | None:
        destination = queue(name) if kind == "queues" else topic(name)
        found = broker.query.destinations(destination)
        return destination if found else None

    async def destination_page(request: Request) -> Response:
        kind, name = request.url.path.split("/")[1], request.path_params["name"]
        destination = existing(kind, name)
        if destination is None:
            return not_found(request, f"no {kind[:-1]} named {name}")
        view = broker.query.destinations(destination)[0]
        params = request.query_params
        offset = inputs.whole_number("offset", params.get("offset"), 0, 0, 10_000_000)
        messages = (
            broker.query.browse(destination, offset + PAGE_SIZE)[offset:]
            if destination.is_queue
            else []
        )
        return render(
            request, "destination.html", kind=kind, name=name, view=view,
            messages=[message_json(m) for m in messages], offset=offset, page_size=PAGE_SIZE,
            is_dlq="DLQ" in name.upper().split("."),
            others=[d.destination.name for d in broker.query.destinations()
                    if d.destination.is_queue and d.destination != destination],
        )  # fmt: skip

    async def message_page(request: Request) -> Response:
        name, wanted = request.path_params["name"], request.path_params["message_id"]
        destination = existing("queues", name)
        if destination is None:
            return not_found(request, f"no queue named {name}")
        for m in broker.query.browse(destination, MAX_FIND):
            if m.message_id == wanted:
                return render(
                    request, "message.html", name=name, message=message_json(m, full=True),
                    pretty=_pretty_json(m), hex_dump=_hex_dump(m.body),
                )  # fmt: skip
        return not_found(request, f"no message {wanted} on queue {name}")

    async def send_page(request: Request) -> Response:
        return render(request, "send.html", kind=request.query_params.get("kind", "queues"),
                      name=request.query_params.get("name", ""))  # fmt: skip

    async def login(request: Request) -> Response:
        """Makes the browser ask for a user and password: with anonymous access allowed
        no page would (a request without credentials is the anonymous user's)."""
        if access.users is not None and "authorization" not in request.headers:
            return Response(
                "Log in with a user of the broker.", status_code=401, media_type="text/plain",
                headers={"WWW-Authenticate": 'Basic realm="dovecote", charset="UTF-8"'},
            )  # fmt: skip
        return RedirectResponse("/", status_code=303)

    async def connections(request: Request) -> Response:
        return render(request, "connections.html", rows=broker.query.connections())

    async def subscriptions(request: Request) -> Response:
        return render(request, "subscriptions.html", rows=broker.query.durable_subscriptions())

    async def network(request: Request) -> Response:
        connectors = broker.plugins.find(NetworkConnectors)
        bridges = [] if connectors is None else connectors.bridges()
        return render(request, "network.html", bridges=bridges, enabled=connectors is not None)

    async def scheduled(request: Request) -> Response:
        found = broker.plugins.find(Scheduler)
        jobs = [] if found is None else [v.as_json() for v in found.views()]
        return render(request, "scheduled.html", jobs=jobs, enabled=found is not None)

    return [
        Route("/", dashboard),
        Route("/send", send_page),
        Route("/login", login),
        Route("/connections", connections),
        Route("/subscriptions", subscriptions),
        Route("/scheduled", scheduled),
        Route("/network", network),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        Route("/queues/{name}/messages/{message_id}", message_page),
        Route("/queues", destinations),
        Route("/topics", destinations),
        Route("/queues/{name}", destination_page),
        Route("/topics/{name}", destination_page),
    ]
