"""The initiating side of a duplex bridge: with ``duplex = true`` the remote broker bridges
back over the connection our connector opened, and this broker serves that bridge on it, as
ActiveMQ's initiating side does.

What the remote's bridge sends us there: its ConnectionInfo, session and producer (taken
note of, answered when asked), a ConsumerInfo on our consumer advisory topics (demand: our
bridge subscribes to our advisories and forwards them to it as messages), a RemoveInfo of
that consumer, and the messages it forwards to our consumers, which go into this broker on a
local connection of their own (with the remote's send audit, as any bridge's sends) and are
answered once stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from dovecote.broker.connection import Peer
from dovecote.core.commands import ConnectionInfo, MessageDispatch, SendMessage, SessionInfo
from dovecote.core.errors import DovecoteError
from dovecote.core.ids import SessionId
from dovecote.network.wire import Channel
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.converter import OpenWireConverter

log = logging.getLogger("dovecote.network")


class DuplexInbound:
    """Serves the remote's bridge back on our connection to it."""

    def __init__(
        self,
        broker: Any,
        remote: Channel,
        client_id: str,
        credentials: tuple[str | None, str | None],
        on_demand: Callable[[Structure], Awaitable[None]],
        on_demand_removed: Callable[[Structure], Awaitable[None]],
    ) -> None:
        self.broker = broker
        self.remote = remote
        self.client_id = client_id
        self.credentials = credentials
        self.on_demand = on_demand
        self.on_demand_removed = on_demand_removed
        self.connection_id = broker.ids.next_connection_id()
        self.converter = OpenWireConverter(self.connection_id, broker.settings.broker_name)
        self.commands: asyncio.Queue[Structure | None] = asyncio.Queue()
        self.received = 0

    async def open(self) -> None:
        user, password = self.credentials
        info = ConnectionInfo(self.connection_id, self.client_id, user, password,
                              network_broker_id=self.remote.remote_broker_id)  # fmt: skip
        await self.broker.add_connection(info, _no_dispatch, Peer(self.remote.peer_address,
                                                                   "network"))  # fmt: skip
        await self.broker.process(self.connection_id, SessionInfo(SessionId(self.connection_id, 1)))

    async def close(self) -> None:
        await self.broker.remove_connection(self.connection_id)

    def take(self, s: Structure) -> bool:
        """Whether ``s`` is a command of the remote's bridge (queued for ``serve``)."""
        if s.type in t.MESSAGE_TYPES or s.type in _BRIDGE_COMMANDS:
            self.commands.put_nowait(s)
            return True
        return False

    async def serve(self) -> None:
        while (s := await self.commands.get()) is not None:
            try:
                if s.type in t.MESSAGE_TYPES:
                    message = self.converter.to_message(s)
                    send = SendMessage(message, sync=bool(s["responseRequired"]))
                    await self.broker.process(self.connection_id, send)
                    self.received += 1
                elif s.type == t.CONSUMER_INFO:
                    await self.on_demand(s)
                elif s.type == t.REMOVE_INFO and _names_consumer(s["objectId"]):
                    await self.on_demand_removed(s["objectId"])
            except DovecoteError as exc:
                if s["responseRequired"]:
                    self.remote.send(self.converter.error_response(exc, s))
                else:
                    log.debug("duplex command refused: %s", exc)
                continue
            if s["responseRequired"]:
                self.remote.send(Structure(t.RESPONSE, {"correlationId": s["commandId"]}))


_BRIDGE_COMMANDS = frozenset((
    t.CONNECTION_INFO, t.SESSION_INFO, t.PRODUCER_INFO, t.CONSUMER_INFO, t.REMOVE_INFO,
    t.MESSAGE_ACK,
))  # fmt: skip


def _names_consumer(object_id: Structure | None) -> bool:
    return object_id is not None and object_id.type == t.CONSUMER_ID


def _no_dispatch(dispatch: MessageDispatch) -> None:
    return None  # (the connection only sends)
