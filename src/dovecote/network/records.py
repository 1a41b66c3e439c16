"""What a bridge keeps and needs, apart from its working (network/bridge.py and
network/forwarding.py both use them): the broker it runs on, its counts for the admin API,
and the demand it forwards for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from dovecote.broker.connection import ConnectionState, Peer
from dovecote.broker.consumer import DispatchSink
from dovecote.broker.plugins import PluginHost
from dovecote.core.commands import Command, ConnectionInfo
from dovecote.core.destinations import Destination
from dovecote.core.ids import ConnectionId, ConsumerId


class LocalBroker(PluginHost, Protocol):
    """What a bridge uses of the broker beyond a plugin's view: a connection of its own."""

    async def add_connection(
        self, info: ConnectionInfo, sink: DispatchSink, peer: Peer = ...
    ) -> ConnectionState: ...

    async def process(self, connection_id: ConnectionId, command: Command) -> None: ...

    async def remove_connection(
        self, connection_id: ConnectionId, last_delivered: int = ...
    ) -> None: ...


@dataclass
class BridgeCounts:
    """What a bridge has done, for the admin API."""

    forwarded: int = 0
    demands: int = 0
    remote_broker: str = ""
    remote_broker_id: str = ""
    state: str = "connecting"
    """connecting, connected, or waiting (to reconnect, after ``last_error``)."""
    last_error: str | None = None
    address: str = ""


@dataclass
class Demand:
    """One local consumer the bridge forwards for, and the remote consumers it serves."""

    consumer_id: ConsumerId
    destination: Destination
    remote: set[tuple[Any, ...]] = field(default_factory=set)
    static: bool = False
