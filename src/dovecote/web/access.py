"""Who may use the console port, and from which page (compatibility O3: the admin API behind the
broker's users). ``AccessGuard`` wraps the admin app; every request passes, in order:

1. Host: the Host header must name this console (an IP address, localhost, the name it is
   bound to, or one of ``[console] allowed_hosts``), else 421. A page on another site
   whose name the attacker re-points at this address (DNS rebinding) asks for its own name.
2. Origin: a state-changing request (any method but GET, HEAD and OPTIONS) that a page of
   another origin sent (its Origin header, or lacking one its Referer) is refused, 403.
3. Authentication, with [security] users: HTTP Basic against the broker's user store
   (scrypt in a thread; a login that verified before is remembered), else 401.
4. Authorization: reads for any user (or ``read_group``), changes for ``admin_group``, 403.
5. CSRF: a POST, the one state-changing request a page of another site can make a browser
   send without a CORS preflight (which this server never grants), needs a Content-Type an
   HTML form cannot send (application/json), or the CSRF token that ``GET /api/csrf``
   gives (X-CSRF-Token header, or csrf_token field of a urlencoded form), else 403.

This module loads with the broker (app.py builds the settings), so it does not import the
web framework: the guard is plain ASGI.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import ipaddress
import logging
import os
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from dovecote.broker.connection import Principal
from dovecote.broker.security.users import UserStore

log = logging.getLogger("dovecote.web")

Scope = MutableMapping[str, Any]
AsgiMessage = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[AsgiMessage]]
Send = Callable[[AsgiMessage], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PRINCIPAL_KEY = "dovecote.principal"
"""Where the guard leaves the request's Principal in the ASGI scope (None: no users)."""
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
CSRF_TOKEN_LIFETIME_S = 12 * 3600
MAX_FORM_BYTES = 64 * 1024
"""A urlencoded form is read for its csrf_token up to this size; a larger one is refused."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data", "text/plain"})
"""The Content-Types a page of another site can POST without a CORS preflight."""
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})
_REALM = b'Basic realm="dovecote", charset="UTF-8"'
# Every answer: no framing by another site (clickjacking the console's forms), no sniffing.
_HARDENING = [
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
]

Origin = tuple[str, str, int]
"""(scheme, host, port), as browsers compare origins."""


@dataclass(frozen=True, slots=True)
class ConsoleUsers:
    """With [security] users: who may read and who may change state over the console."""

    store: UserStore
    admin_group: str
    read_group: str | None
    """None: any authenticated user may read."""
    metrics_anonymous: bool

    def may(self, principal: Principal, changes_state: bool) -> bool:
        if self.admin_group in principal.groups:
            return True
        if changes_state:
            return False
        return self.read_group is None or self.read_group in principal.groups


@dataclass(frozen=True, slots=True)
class ConsoleAccess:
    """The console's access rules; the defaults are an open console on its own names."""

    users: ConsoleUsers | None = None
    """None: no authentication (the broker keeps such a console on loopback)."""
    allowed_hosts: frozenset[str] = frozenset()
    allowed_origins: frozenset[str] = frozenset()

    def serving(self, bound_host: str) -> ConsoleAccess:
        """These rules for a console bound to ``bound_host``: a name it is bound to is one
        of its own."""
        name = bound_host.strip("[]").rstrip(".").lower()
        if name in _WILDCARDS or _is_address(name):
            return self
        return dataclasses.replace(self, allowed_hosts=self.allowed_hosts | {name})

    def host_allowed(self, host: str) -> bool:
        """A Host naming an address cannot be a rebinding (the page's origin is that address);
        nor can localhost, which browsers resolve themselves."""
        return _is_address(host) or host == "localhost" or host in self._hosts()

    def _hosts(self) -> frozenset[str]:
        return frozenset(h.rstrip(".").lower() for h in self.allowed_hosts)

    def origin_allowed(self, origin: Origin | None, own: Origin) -> bool:
        if origin is None:  # "null" (a sandboxed frame, a file) or unreadable
            return False
        return origin == own or origin in {_origin(o) for o in self.allowed_origins}


class CsrfTokens:
    """Tokens tied to the user (the session, for HTTP Basic) under a key of this process:
    a page of another site can neither read one (no CORS) nor make one; an hour's token
    of one user is no use to another. A restart invalidates them (a page fetches anew)."""

    def __init__(self, lifetime_s: int = CSRF_TOKEN_LIFETIME_S) -> None:
        self._key = os.urandom(32)
        self._lifetime_s = lifetime_s

    def issue(self, user: str) -> str:
        issued = int(time.time())
        return f"{issued}.{self._mac(user, issued)}"

    def valid(self, user: str, token: str | None) -> bool:
        if token is None:
            return False
        issued_text, _, mac = token.partition(".")
        if not issued_text.isdigit():
            return False
        issued = int(issued_text)
        if not 0 <= time.time() - issued <= self._lifetime_s:
            return False
        import hmac  # (at a console request: not carried by an idle broker)

        return hmac.compare_digest(mac, self._mac(user, issued))

    def _mac(self, user: str, issued: int) -> str:
        import hashlib
        import hmac

        digest = hmac.new(self._key, f"{issued}:{user}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False
    return True


def _origin(url: str, scheme: str | None = None) -> Origin | None:
    """The origin of a URL (or of an authority ``host[:port]`` when ``scheme`` is given)."""
    parts = urlsplit(url if scheme is None else f"//{url}", scheme=scheme or "")
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.rstrip("."), port or _DEFAULT_PORTS[parts.scheme]


def basic_credentials(header: str) -> tuple[str, str] | None:
    """User and password from an ``Authorization: Basic ...`` header; None if it is not one."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None


def _media_type(content_type: str | None) -> str | None:
    if content_type is None:
        return None
    return content_type.partition(";")[0].strip().lower()


class _Refusal(Exception):
    """A request the guard answers itself: status, message, and whether to ask for a login."""

    def __init__(self, status: int, message: str, challenge: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.challenge = challenge


class AccessGuard:
    """The checks above, as ASGI middleware in front of the admin app."""

    def __init__(self, app: AsgiApp, access: ConsoleAccess, tokens: CsrfTokens) -> None:
        self.app = app
        self.access = access
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            # No WebSocket routes yet: whoever adds one adds these checks for it first.
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            scope[PRINCIPAL_KEY], receive = await self._admit(scope, headers, receive)
        except _Refusal as refusal:
            client = scope.get("client") or ("?", 0)
            level = (
                logging.WARNING
                if refusal.challenge and "authorization" in headers
                else logging.INFO
            )
            log.log(level, "console: %s %s from %s refused: %s", scope["method"], scope["path"],
                    client[0], refusal.message)  # fmt: skip
            await _answer(send, refusal)
            return

        async def hardened(message: AsgiMessage) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *_HARDENING]
            await send(message)

        await self.app(scope, receive, hardened)

    async def _admit(
        self, scope: Scope, headers: dict[str, str], receive: Receive
    ) -> tuple[Principal | None, Receive]:
        method: str = scope["method"]
        changes_state = method not in SAFE_METHODS
        own = self._own_origin(scope, headers)
        if changes_state:
            self._check_origin(headers, own)
        principal = await self._principal(scope, headers)
        users = self.access.users
        if users is not None and principal is not None and not users.may(principal, changes_state):
            need = users.admin_group if changes_state else users.read_group
            raise _Refusal(403, f"user {principal.user!r} is not in the group {need!r}")
        if method == "POST":
            receive = await self._check_csrf(headers, principal, receive)
        return principal, receive

    def _own_origin(self, scope: Scope, headers: dict[str, str]) -> Origin:
        scheme: str = scope.get("scheme", "http")
        host = headers.get("host")
        if host is None:  # HTTP/1.0 without Host: no browser; the address it came to
            server = scope.get("server") or ("localhost", _DEFAULT_PORTS[scheme])
            return scheme, str(server[0]), int(server[1])
        own = _origin(host, scheme)
        if own is None or not self.access.host_allowed(own[1]):
            raise _Refusal(
                421, f"this console does not answer to Host {host!r} (add the name to "
                "[console] allowed_hosts)",
            )  # fmt: skip
        return own

    def _check_origin(self, headers: dict[str, str], own: Origin) -> None:
        origin_text = headers.get("origin")
        if origin_text is None:
            referer = headers.get("referer")
            if referer is None:
                return  # not sent by a page: curl, a script (a form POST passes step 5)
            origin_text = referer
        if not self.access.origin_allowed(_origin(origin_text), own):
            raise _Refusal(
                403, f"a change from another origin ({origin_text[:100]!r}) is refused "
                "(add it to [console] allowed_origins if it is yours)",
            )  # fmt: skip

    async def _principal(self, scope: Scope, headers: dict[str, str]) -> Principal | None:
        users = self.access.users
        if users is None:
            return None
        if users.metrics_anonymous and scope["path"] == "/metrics":
            return None
        authorization = headers.get("authorization")
        if authorization is None:
            anonymous = users.store.cached(None, None)
            if anonymous is None:
                raise _Refusal(401, "authentication required", challenge=True)
            return anonymous
        credentials = basic_credentials(authorization)
        if credentials is None:
            raise _Refusal(401, "only HTTP Basic authentication is understood", challenge=True)
        user, password = credentials
        principal = users.store.cached(user, password)
        if principal is None:
            principal = await asyncio.to_thread(users.store.authenticate, user, password)
        if principal is None:
            raise _Refusal(401, f"wrong user or password (user {user[:100]!r})", challenge=True)
        return principal

    async def _check_csrf(
        self, headers: dict[str, str], principal: Principal | None, receive: Receive
    ) -> Receive:
        media_type = _media_type(headers.get("content-type"))
        if media_type is not None and media_type not in FORM_TYPES:
            return receive  # a page of another site cannot send this type without a preflight
        token = headers.get(CSRF_HEADER.lower())
        if token is None and media_type == "application/x-www-form-urlencoded":
            body = await _read_body(receive)
            fields = parse_qs(body.decode("latin-1"), max_num_fields=100)
            token = fields.get(CSRF_FIELD, [None])[0]
            receive = _replay(body, receive)
        user = "" if principal is None else principal.user
        if not self.tokens.valid(user, token):
            raise _Refusal(
                403, "a POST needs Content-Type: application/json, or the CSRF token from "
                f"GET /api/csrf (header {CSRF_HEADER} or form field {CSRF_FIELD})",
            )  # fmt: skip
        return receive


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _Refusal(400, "the client went away")
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise _Refusal(413, f"a form is read up to {MAX_FORM_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` for the app after the guard read the body: the body once, then the rest."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> AsgiMessage:
        return pending.pop() if pending else await receive()

    return replayed


async def _answer(send: Send, refusal: _Refusal) -> None:
    import json  # with the first refusal: an idle broker does without it

    body = json.dumps({"error": refusal.message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *_HARDENING,
    ]
    if refusal.challenge:
        headers.append((b"www-authenticate", _REALM))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
