"""Networks of brokers as a broker plugin. Outbound, each configured
``[[network_connectors]]`` keeps a bridge (network/bridge.py) to each broker its ``static:``
URI lists, or to the first of a ``masterslave:`` list that answers, and connects again
after a failure with ActiveMQ's back-off (1, 2, 4, ... up to 30 s). Inbound (always on, as
ActiveMQ accepts bridges on any connector), a connection a remote bridge opens has its sends
checked against that broker's audit (network/audit.py). ``bridges()`` is the admin API's
read-only view.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ClassVar, cast

from dovecote.broker.connection import ConnectionState
from dovecote.broker.plugins import BrokerPlugin, PluginHost
from dovecote.core.destinations import Destination
from dovecote.core.errors import DovecoteError
from dovecote.network.audit import SendAudit, journal_name
from dovecote.network.records import BridgeCounts, LocalBroker
from dovecote.network.settings import NetworkConnectorSettings, RemoteAddress
from dovecote.network.wire import Channel, RemoteConnection, RemoteError
from dovecote.protocol.openwire import Structure

if TYPE_CHECKING:  # the bridge, with what only bridges use, loads with the first one
    from dovecote.network.bridge import Bridge

log = logging.getLogger("dovecote.network")

CONNECT_TIMEOUT_S = 10.0


class NetworkConnectors(BrokerPlugin):
    name: ClassVar[str] = "network"

    def __init__(self, connectors: Sequence[NetworkConnectorSettings]) -> None:
        self.connectors = tuple(connectors)
        self._tasks: list[asyncio.Task[None]] = []
        self._counts: list[tuple[NetworkConnectorSettings, BridgeCounts]] = []
        self._bridges: set[Bridge] = set()
        self._audits: dict[str, SendAudit] = {}

    async def start(self, broker: PluginHost) -> None:
        self.broker = cast(LocalBroker, broker)
        self.local_id = f"ID:{broker.settings.broker_name}"
        for settings in self.connectors:
            groups: list[tuple[RemoteAddress, ...]]
            if settings.uri.kind == "static":
                groups = [(address,) for address in settings.uri.addresses]
            else:
                groups = [settings.uri.addresses]
            for addresses in groups:
                counts = BridgeCounts(address=", ".join(str(a) for a in addresses))
                self._counts.append((settings, counts))
                self._tasks.append(asyncio.create_task(self._keep_bridged(settings, addresses,
                                                                          counts)))  # fmt: skip

    async def on_connect(self, state: ConnectionState) -> None:
        remote_id = state.info.network_broker_id
        if remote_id is None:
            return
        audit = self._audits.get(remote_id)
        if audit is None:
            # (Beside the temp store, under data_dir: kept across restarts.)
            directory = self.broker.settings.temp_directory.parent / "network"
            audit = self._audits[remote_id] = SendAudit(
                remote_id, self.broker.query, journal=directory / journal_name(remote_id)
            )
        state.send_audit = audit.duplicate
        state.send_stored = audit.stored
        log.info("network bridge from broker %s connected (%s)", remote_id, state.peer.address)

    def accept_duplex(
        self,
        remote_info: Structure,
        write: Callable[[Structure], None],
        close_transport: Callable[[], None],
        peer_address: str,
    ) -> Channel:
        """A remote duplex connector's connection to our listener: bridge back over it (the
        transport hands the channel what the remote answers, and fails it when it closes)."""
        from dovecote.network.bridge import Bridge
        from dovecote.network.properties import accepted_settings

        holder: list[Bridge] = []

        def on_command(structure: Structure) -> None:
            if holder:
                holder[0].on_remote_command(structure)

        channel = Channel(write, close_transport, on_command, remote_info, peer_address)
        # Configured from the remote connector's networkProperties, as ActiveMQ's is.
        settings = accepted_settings(remote_info["networkProperties"],
                                     f"duplex-{channel.remote_broker_name}")  # fmt: skip
        counts = BridgeCounts(address=peer_address, remote_broker=channel.remote_broker_name,
                              remote_broker_id=channel.remote_broker_id)  # fmt: skip
        bridge = Bridge(self.broker, settings, self.local_id, channel, counts,
                        self.local_consumers, self.forget, accepted_duplex=True)  # fmt: skip
        holder.append(bridge)
        self._counts.append((settings, counts))
        self._tasks.append(asyncio.create_task(self._duplex(bridge, settings, counts)))
        return channel

    async def _duplex(
        self, bridge: Bridge, settings: NetworkConnectorSettings, counts: BridgeCounts
    ) -> None:
        try:
            what = f"duplex bridge back to broker {counts.remote_broker}"
            problem = await self._run(bridge, counts, what)
            counts.state, counts.last_error = "closed", problem
            log.info("%s ended: %s", what, problem)
        finally:
            # A remote's duplex connector reconnects on a new connection: a new bridge.
            self._counts = [entry for entry in self._counts if entry[1] is not counts]

    async def _run(self, bridge: Bridge, counts: BridgeCounts, what: str) -> str:
        """Start a bridge and forward until it ends; why it ended."""
        self._bridges.add(bridge)
        try:
            try:
                await bridge.start()
            except (RemoteError, DovecoteError) as exc:
                await bridge.close()
                return f"refused: {exc}"
            counts.state = "connected"
            counts.last_error = None
            log.info("%s started", what)
            return await bridge.run()
        finally:
            self._bridges.discard(bridge)

    def durable_subscriptions_asked(self, broker_info: Structure) -> Structure | None:
        """The answer to a bridge's BrokerInfo that asks for this broker's durable
        subscriptions (syncDurableSubs, network/sync.py), or None."""
        from dovecote.network.sync import subscription_info, sync_asked

        included = sync_asked(broker_info)
        if included is None:
            return None
        return subscription_info(self.broker.query, self.broker.settings.broker_name, included)

    def forget(self, message_id: str) -> None:
        """A message leaves over a bridge: it may come back one day, and is new then."""
        for audit in self._audits.values():
            audit.forget(message_id)

    async def stop(self) -> None:
        for bridge in list(self._bridges):
            bridge.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for audit in self._audits.values():
            audit.close()

    def bridges(self) -> list[dict[str, object]]:
        """Every bridge: its connector, the remote broker, its state and what it forwarded."""
        return [
            {
                "name": settings.name,
                "uri": counts.address,
                "duplex": settings.duplex,
                "remote_broker": counts.remote_broker,
                "remote_broker_id": counts.remote_broker_id,
                "state": counts.state,
                "forwarded": counts.forwarded,
                "demands": counts.demands,
                "last_error": counts.last_error,
            }
            for settings, counts in self._counts
        ]

    def local_consumers(self, destination: Destination) -> int:
        """The consumers ``destination`` has here that no bridge of this broker owns."""
        views = self.broker.query.destinations(destination)
        total = sum(v.consumers for v in views if v.destination == destination)
        owned = sum(
            1
            for bridge in self._bridges
            for demand in bridge.by_local.values()
            if demand.destination == destination
        )
        return total - owned

    async def _keep_bridged(
        self,
        settings: NetworkConnectorSettings,
        addresses: tuple[RemoteAddress, ...],
        counts: BridgeCounts,
    ) -> None:
        delays = settings.backoff.delays()
        failures = 0
        last_problem: str | None = None
        while True:
            for address in addresses:
                counts.state = "connecting"
                problem = await self._bridge_once(settings, address, counts)
                if counts.state == "connected":
                    failures = 0  # it worked for a while: start the back-off again
                counts.state = "waiting"
                counts.last_error = problem
                if problem != last_problem:
                    log.warning("network connector %s to %s: %s", settings.name, address, problem)
                else:
                    log.debug("network connector %s to %s: %s", settings.name, address, problem)
                last_problem = problem
            delay = delays[min(failures, len(delays) - 1)]
            failures += 1
            await asyncio.sleep(delay)

    async def _bridge_once(
        self, settings: NetworkConnectorSettings, address: RemoteAddress, counts: BridgeCounts
    ) -> str:
        """Connect, bridge until it fails; why it ended."""
        from dovecote.network.bridge import Bridge

        holder: list[Bridge] = []

        def on_command(structure: Structure) -> None:
            if holder:
                holder[0].on_remote_command(structure)

        try:
            remote = await RemoteConnection.open(address.host, address.port, on_command,
                                                 CONNECT_TIMEOUT_S)  # fmt: skip
        except (OSError, TimeoutError, RemoteError) as exc:
            return f"cannot connect: {exc.strerror if isinstance(exc, OSError) else exc}"
        bridge = Bridge(self.broker, settings, self.local_id, remote, counts,
                        self.local_consumers, self.forget)  # fmt: skip
        holder.append(bridge)
        counts.remote_broker = remote.remote_broker_name
        counts.remote_broker_id = remote.remote_broker_id
        if remote.remote_broker_id == self.local_id:
            await remote.close("it is this broker")
            return "the remote broker is this broker (or has its name): not bridging"
        broker = counts.remote_broker
        what = f"network connector {settings.name}: bridge to broker {broker} at {address}"
        return await self._run(bridge, counts, what)
