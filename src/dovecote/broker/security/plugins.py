"""The security plugins on the broker's seam, as ActiveMQ's authentication and
authorization brokers: who a connection is (checked once, as it connects) and what it may
read, write and create (checked as consumers, producers and destinations are added, and
for every send, from a per-connection cache after the first).

ActiveMQ's words are kept, since clients and operators match on them: "User name [x] or
password is invalid." and "User x is not authorized to write to: queue://Q".
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dovecote.broker.connection import ConnectionState, Peer, Principal
from dovecote.broker.plugins import BrokerPlugin, PluginHost
from dovecote.broker.security.authorization import AuthorizationMap, Right, refusal_text
from dovecote.broker.security.users import UserStore
from dovecote.core.commands import ConsumerInfo, ProducerInfo
from dovecote.core.destinations import Destination
from dovecote.core.errors import SecurityError
from dovecote.core.ids import ConnectionId
from dovecote.core.message import Message

if TYPE_CHECKING:
    from dovecote.broker.query import BrokerQuery


def _attributes(subject: str) -> list[str]:
    """A subject's attributes, split at the commas that are not escaped (RFC 4514:
    ``CN=Smith\\, John,O=example`` has two)."""
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for char in subject:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            current.append(char)
            escaped = True
        elif char == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def normal_subject(subject: str) -> str:
    """A certificate subject as compared: no spaces around its separators, attribute names
    in capitals (``cn=alice, o=example`` is ``CN=alice,O=example``)."""
    parts = []
    for part in _attributes(subject):
        name, sep, value = part.partition("=")
        parts.append(f"{name.strip().upper()}{sep}{value.strip()}")
    return ",".join(parts)


def common_name(subject: str) -> str | None:
    """The CN's value, unescaped (``Smith\\, John`` is ``Smith, John``)."""
    for part in _attributes(normal_subject(subject)):
        if part.startswith("CN="):
            return re.sub(r"\\(.)", r"\1", part[3:])
    return None


@dataclass(frozen=True, slots=True)
class CertificateUsers:
    """Which user a verified client certificate names: by its whole subject, or (when
    ``from_common_name``) by its CN when that is a configured user."""

    by_subject: dict[str, str] = field(default_factory=dict)
    """Normal subject (``normal_subject``) -> user."""
    from_common_name: bool = False

    def user_of(self, peer: Peer, users: UserStore) -> str | None:
        subject = peer.certificate_subject
        if subject is None:
            return None
        user = self.by_subject.get(normal_subject(subject))
        if user is None and self.from_common_name:
            name = common_name(subject)
            if name is not None and name in users:
                user = name
        return user


@dataclass(frozen=True, slots=True)
class SecuritySettings:
    """The [security] section, parsed: what the plugins and the admin API check against."""

    users: UserStore | None = None
    """None: no authentication (credentials are not looked at)."""
    certificates: CertificateUsers = field(default_factory=CertificateUsers)
    authorization: AuthorizationMap | None = None
    """None: an authenticated connection may do anything."""
    allow_anonymous: bool = False

    def plugins(self) -> list[BrokerPlugin]:
        plugins: list[BrokerPlugin] = []
        if self.users is not None:
            plugins.append(AuthenticationPlugin(self.users, self.certificates))
        if self.authorization is not None:
            plugins.append(AuthorizationPlugin(self.authorization))
        return plugins


class AuthenticationPlugin(BrokerPlugin):
    """Refuses a connection whose credentials (or client certificate) name no user."""

    name = "authentication"

    def __init__(self, users: UserStore, certificates: CertificateUsers) -> None:
        self.users = users
        self.certificates = certificates

    async def on_connect(self, state: ConnectionState) -> None:
        user = self.certificates.user_of(state.peer, self.users)
        if user is not None:
            state.principal = self.users.principal(user)
            return
        info = state.info
        principal = self.users.cached(info.user_name, info.password)
        if principal is None:
            # scrypt takes tens of milliseconds: not on the event loop.
            principal = await asyncio.to_thread(
                self.users.authenticate, info.user_name, info.password
            )
        if principal is None:
            name = "null" if info.user_name is None else info.user_name
            raise SecurityError(f"User name [{name}] or password is invalid.")
        state.principal = principal


class AuthorizationPlugin(BrokerPlugin):
    """Read to consume or browse, write to send, admin to create a destination that does
    not exist yet (temporary ones by the map's temporary entry)."""

    name = "authorization"

    def __init__(self, authorization: AuthorizationMap) -> None:
        self.authorization = authorization
        self._query: BrokerQuery | None = None
        self._writable: dict[ConnectionId, set[Destination]] = {}
        """The destinations each connection was found able to send to (ActiveMQ's
        authorizedWriteDests): a send checks this set first."""

    async def start(self, broker: PluginHost) -> None:
        self._query = broker.query

    async def on_disconnect(self, state: ConnectionState) -> None:
        self._writable.pop(state.info.connection_id, None)

    async def on_add_consumer(self, state: ConnectionState, info: ConsumerInfo) -> None:
        self._require(state, Right.READ, info.destination)
        self._require_to_create(state, info.destination)

    async def on_add_producer(self, state: ConnectionState, info: ProducerInfo) -> None:
        if info.destination is not None:
            self._allow_writes(state, info.destination)

    async def on_add_destination(self, state: ConnectionState, destination: Destination) -> None:
        self._require_to_create(state, destination)

    async def on_remove_destination(self, state: ConnectionState, destination: Destination) -> None:
        # As ActiveMQ: the admin right is asked only of a destination that does not exist.
        self._require_to_create(state, destination)
        writable = self._writable.get(state.info.connection_id)
        if writable is not None:
            writable.discard(destination)

    def check_send(self, state: ConnectionState, message: Message) -> None:
        writable = self._writable.get(state.info.connection_id)
        if writable is None or message.destination not in writable:
            self._allow_writes(state, message.destination)

    def _allow_writes(self, state: ConnectionState, destination: Destination) -> None:
        self._require(state, Right.WRITE, destination)
        self._require_to_create(state, destination)
        self._writable.setdefault(state.info.connection_id, set()).add(destination)

    def _require(self, state: ConnectionState, right: Right, destination: Destination) -> None:
        # Every part of a composite must be allowed (ActiveMQ unites the parts' groups, so
        # a right on one part opens them all: a difference on purpose); the refusal names
        # the whole, as ActiveMQ's does.
        principal = _principal(state)
        for part in destination.components():
            if not self.authorization.allows(principal, right, part):
                raise SecurityError(refusal_text(principal, right, destination))

    def _require_to_create(self, state: ConnectionState, destination: Destination) -> None:
        """The admin right, for the parts of ``destination`` that do not exist yet (a
        wildcard subscription creates nothing)."""
        query = self._query
        assert query is not None  # started
        principal = _principal(state)
        for part in destination.components():
            if part.is_wildcard or query.destination_exists(part):
                continue
            if not self.authorization.allows(principal, Right.ADMIN, part):
                raise SecurityError(refusal_text(principal, Right.ADMIN, part))


def _principal(state: ConnectionState) -> Principal:
    if state.principal is None:
        raise SecurityError("User is not authenticated.")
    return state.principal
