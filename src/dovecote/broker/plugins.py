"""Broker plugins: behaviour that sits in front of the broker's routing, as ActiveMQ's
BrokerFilter chain does (its SchedulerBroker, security and advisory brokers each wrap the
next one).

A plugin subclasses ``BrokerPlugin`` and overrides the hooks it needs; the broker owns a
``PluginChain`` and calls it at a few seams:

- ``start(broker)`` once the store is recovered, ``stop()`` first thing when the broker
  stops (in reverse order);
- ``on_send(state, command)`` before a send is routed: True means the plugin took the
  message over (the broker routes nothing for it). ``state`` is None for a send routed
  without one (a batch of sends nobody waits for: never transacted);
- ``after_commit(state, tx)`` once a local transaction's sends and acks are committed (how
  ActiveMQ's afterCommit synchronizations run).

Only plugins that set ``intercepts_sends`` are asked about sends, and the broker asks the
chain only when one of them does: with none, a send costs the broker one attribute test.
Security (a send, consume or create check) and advisories (an event after each change)
are meant to come as further hooks of the same kind.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, TypeVar

from dovecote.core.commands import SendMessage
from dovecote.core.errors import DovecoteError

if TYPE_CHECKING:
    from dovecote.broker.broker import Broker
    from dovecote.broker.connection import ConnectionState, LocalTransaction

log = logging.getLogger("dovecote.broker")

P = TypeVar("P", bound="BrokerPlugin")


class BrokerPlugin:
    """A hook set; every hook does nothing unless overridden."""

    name: ClassVar[str] = "plugin"
    intercepts_sends: ClassVar[bool] = False
    """True: ``on_send`` is called for every send (so override it)."""

    async def start(self, broker: Broker) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def on_send(self, state: ConnectionState | None, command: SendMessage) -> bool:
        return False

    async def after_commit(self, state: ConnectionState, tx: LocalTransaction) -> None:
        return None


class PluginChain:
    """The broker's plugins, in the order they were given: the first sees a send first."""

    def __init__(self, plugins: Sequence[BrokerPlugin] = ()) -> None:
        self.plugins = tuple(plugins)
        self._send_hooks = tuple(p for p in self.plugins if p.intercepts_sends)
        self.intercepts_sends = bool(self._send_hooks)
        """Read by the broker before it calls ``on_send``: False keeps sends hook-free."""
        self._started: list[BrokerPlugin] = []

    async def start(self, broker: Broker) -> None:
        for plugin in self.plugins:
            await plugin.start(broker)
            self._started.append(plugin)

    async def stop(self) -> None:
        while self._started:
            plugin = self._started.pop()
            try:
                await plugin.stop()
            except Exception:  # the others must stop too; the trace says what failed
                log.exception("plugin %s failed to stop", plugin.name)

    async def on_send(self, state: ConnectionState | None, command: SendMessage) -> bool:
        for plugin in self._send_hooks:
            if await plugin.on_send(state, command):
                return True
        return False

    async def untaken(
        self, commands: Sequence[SendMessage]
    ) -> tuple[list[SendMessage], DovecoteError | None]:
        """The sends of a batch that no plugin takes over, in order, up to the first a
        plugin refuses (with that error): as if the batch's sends had come one at a
        time, the sends before a failed one go on, and the connection hears of it."""
        kept: list[SendMessage] = []
        for command in commands:
            try:
                if not await self.on_send(None, command):
                    kept.append(command)
            except DovecoteError as exc:
                return kept, exc
        return kept, None

    async def after_commit(self, state: ConnectionState, tx: LocalTransaction) -> None:
        for plugin in self.plugins:
            await plugin.after_commit(state, tx)

    def find(self, kind: type[P]) -> P | None:
        """The installed plugin of this class, if any (for admin views)."""
        for plugin in self.plugins:
            if isinstance(plugin, kind):
                return plugin
        return None
