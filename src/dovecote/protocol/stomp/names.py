"""STOMP destination names and core destinations, both ways, for one connection.

``/queue/x`` and ``/topic/x`` name queues and topics; a name without a prefix is a queue, as
ActiveMQ's STOMP takes it; ``a,b`` is a composite destination. ``/temp-queue/x`` names a
temporary queue private to the connection (created the first time it is named: the
DestinationInfo that creates it comes back with it); other connections see it, in
``reply-to``, as ``/remote-temp-queue/<its name>``.
"""

from __future__ import annotations

from typing import Final

from dovecote.core.commands import Command, DestinationInfo
from dovecote.core.destinations import Destination, DestinationType
from dovecote.core.errors import RemoteProtocolError
from dovecote.core.ids import ConnectionId

_PREFIXES: Final = {
    "/queue/": DestinationType.QUEUE,
    "/topic/": DestinationType.TOPIC,
    "/temp-queue/": DestinationType.TEMP_QUEUE,
    "/temp-topic/": DestinationType.TEMP_TOPIC,
    "/remote-temp-queue/": DestinationType.TEMP_QUEUE,
    "/remote-temp-topic/": DestinationType.TEMP_TOPIC,
}
_STOMP_PREFIX: Final = {
    DestinationType.QUEUE: "/queue/",
    DestinationType.TOPIC: "/topic/",
    DestinationType.TEMP_QUEUE: "/remote-temp-queue/",
    DestinationType.TEMP_TOPIC: "/remote-temp-topic/",
}
_RESOLVED_MAX: Final = 1024


class StompNames:
    def __init__(self, connection_id: ConnectionId) -> None:
        self.connection_id = connection_id
        self._temp_names: dict[str, Destination] = {}
        self._resolved: dict[str, Destination] = {}
        self._temp_reverse: dict[Destination, str] = {}

    def destination(self, text: str) -> tuple[Destination, list[Command]]:
        """The destination a header names, with the commands creating the temporary ones
        it names for the first time."""
        known = self._resolved.get(text)
        if known is not None:
            return known, []
        destination, commands = self._resolve(text)
        if not commands:
            # Producers name the same few destinations on every SEND; a client naming
            # endless new ones gets a fresh table now and then instead of a growing one.
            if len(self._resolved) >= _RESOLVED_MAX:
                self._resolved.clear()
            self._resolved[text] = destination
        return destination, commands

    def _resolve(self, text: str) -> tuple[Destination, list[Command]]:
        commands: list[Command] = []
        parts = [p.strip() for p in text.split(",")]
        resolved = [self._one_destination(p, commands) for p in parts]
        if len(resolved) == 1:
            return resolved[0], commands
        kind = resolved[0].type
        if all(d.type == kind for d in resolved):
            return Destination(kind, ",".join(d.name for d in resolved)), commands
        return Destination(kind, ",".join(str(d) for d in resolved)), commands

    def _one_destination(self, text: str, commands: list[Command]) -> Destination:
        for prefix, kind in _PREFIXES.items():
            if text.startswith(prefix):
                name = text[len(prefix) :]
                if not name:
                    raise RemoteProtocolError(f"destination {text!r} has no name")
                if prefix in ("/temp-queue/", "/temp-topic/"):
                    return self._temp_destination(prefix, name, kind, commands)
                return Destination(kind, name)
        if not text:
            raise RemoteProtocolError(
                "empty destination: STOMP destinations begin with one of "
                "/queue/ /topic/ /temp-queue/ /temp-topic/"
            )
        # A name with none of those: a queue of that name, as ActiveMQ's STOMP takes it.
        return Destination(DestinationType.QUEUE, text)

    def _temp_destination(
        self, prefix: str, name: str, kind: DestinationType, commands: list[Command]
    ) -> Destination:
        key = prefix + name
        destination = self._temp_names.get(key)
        if destination is None:
            destination = Destination(kind, f"{self.connection_id}:{len(self._temp_names) + 1}")
            self._temp_names[key] = destination
            self._temp_reverse[destination] = key
            commands.append(DestinationInfo(self.connection_id, destination))
        return destination

    def stomp_name(self, destination: Destination) -> str:
        own = self._temp_reverse.get(destination)
        if own is not None:
            return own
        if destination.is_composite:
            return ",".join(self.stomp_name(d) for d in destination.components())
        return _STOMP_PREFIX[destination.type] + destination.name
