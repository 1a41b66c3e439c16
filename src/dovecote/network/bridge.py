"""Demand forwarding, as ActiveMQ's DemandForwardingBridge: one bridge moves messages from
this broker to one remote broker, and only where the remote has consumers.

The bridge has two connections: a local one inside this broker (as ActiveMQ's vm://) and an
OpenWire one to the remote, opened as ActiveMQ's bridge opens it (BrokerInfo with
networkConnection, ConnectionInfo ``<name>_<broker>_outbound``, a session, a producer and a
consumer of the remote's consumer advisories). For each remote consumer advisory that the
connector's filters and TTLs let through, and whose brokerPath does not hold this broker,
it subscribes locally on that destination (one conduit consumer per destination when
conduit_subscriptions is on) and sends on what that consumer receives, its brokerPath grown
by this broker's id. A consumer's RemoveInfo advisory unsubscribes it.

Store and forward: a persistent message is sent asking for a response, and its local copy
is acknowledged only once the remote answered, so a crash of either side leaves it here
to be sent again; the receiving broker drops a copy it already has (network/audit.py, or
ActiveMQ's producer audit). The local consumer's filter (``additional_predicate``) keeps
back what came from the remote (unless its consumers moved there: replay) or has passed
through message_ttl brokers already.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from typing import Any, Final

from dovecote.broker.connection import Peer
from dovecote.core.commands import (
    LAST_DELIVERED_UNSET,
    AckType,
    ConnectionInfo,
    ConsumerInfo,
    DestinationInfo,
    RemoveInfo,
    RemoveSubscriptionInfo,
    SessionInfo,
)
from dovecote.core.destinations import Destination, queue, topic
from dovecote.core.errors import DovecoteError
from dovecote.core.ids import ConsumerId, SessionId
from dovecote.core.message import Message
from dovecote.network.duplex import DuplexInbound
from dovecote.network.forwarding import Forwarding
from dovecote.network.paths import broker_path
from dovecote.network.records import BridgeCounts, Demand, LocalBroker
from dovecote.network.settings import NETWORK_CONSUMER_PRIORITY, NetworkConnectorSettings
from dovecote.network.sync import (
    DURABLE_SYNC_VERSION,
    is_own_network_subscription,
    subscription_info,
)
from dovecote.network.wire import Channel
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.converter import OpenWireConverter
from dovecote.protocol.openwire.structures import destination_of

log = logging.getLogger("dovecote.network")

ADVISORY_PREFIX: Final = "ActiveMQ.Advisory."
REQUEST_TIMEOUT_S: Final = 30.0
CONSUMER_ADVISORIES: Final = (
    "ActiveMQ.Advisory.Consumer.>,ActiveMQ.Advisory.TempQueue,ActiveMQ.Advisory.TempTopic"
)


def consumer_key(s: Structure | None) -> tuple[Any, ...]:
    if s is None:
        return ()
    return (s["connectionId"], s["sessionId"], s["value"])


def path_of(s: Structure) -> tuple[str, ...]:
    return tuple(str(b["value"]) for b in s["brokerPath"] or () if b is not None)


class Bridge(Forwarding):
    """One bridge, from connecting to closing; ``run`` returns when it fails or stops (the
    connector then connects again after its back-off)."""

    def __init__(
        self,
        broker: LocalBroker,
        settings: NetworkConnectorSettings,
        local_broker_id: str,
        remote: Channel,
        counts: BridgeCounts,
        local_consumers: Callable[[Destination], int],
        forget: Callable[[str], None],
        accepted_duplex: bool = False,
    ) -> None:
        self.broker = broker
        self.settings = settings
        self.local_id = local_broker_id
        self.remote = remote
        self.counts = counts
        self.local_consumers = local_consumers
        """How many consumers a destination has here that no bridge owns."""
        self.forget = forget
        self.accepted_duplex = accepted_duplex
        self.duplex_inbound: DuplexInbound | None = None
        """With duplex = true: serving the remote's bridge back over our connection (what
        it sends waits in its queue until the bridge runs)."""
        if settings.duplex and not accepted_duplex:
            name = broker.settings.broker_name
            self.duplex_inbound = DuplexInbound(
                broker, remote, f"{settings.name}_{remote.remote_broker_name}_inbound_duplex_"
                f"{name}", (settings.user, settings.password), self._duplex_demand,
                self._duplex_demand_removed,
            )  # fmt: skip
        """Bridging back over a connection the remote's duplex connector opened to us."""
        """Tell the inbound audits that a message left (it may come back)."""
        self.remote_id = remote.remote_broker_id
        self.connection_id = broker.ids.next_connection_id()
        self.session_id = SessionId(self.connection_id, 1)
        self._consumer_ids = itertools.count(1)
        self.demands: dict[Any, Demand] = {}
        self.by_remote: dict[tuple[Any, ...], Any] = {}
        self.by_local: dict[ConsumerId, Demand] = {}
        self._converter = OpenWireConverter(self.connection_id, broker.settings.broker_name)
        self._start_forwarding()
        self._advisories: asyncio.Queue[Structure | None] = asyncio.Queue()
        self._remote_conn = f"{self.connection_id}-remote"
        self._remote_consumer = Structure(t.CONSUMER_ID, {
            "connectionId": self._remote_conn, "sessionId": 1, "value": 1})  # fmt: skip
        self._remote_producer = Structure(t.PRODUCER_ID, {
            "connectionId": self._remote_conn, "sessionId": 1, "value": 1})  # fmt: skip
        self.durable_remote: dict[Destination, set[tuple[str | None, str]]] = {}
        """The remote durable subscriptions (client id when the advisory says it, name) each
        network durable subscription here is kept for: when the last is deleted, so is it."""
        self.local_client_id = ""
        self.temps: set[Destination] = set()
        """The remote's temporary destinations this bridge made here (their consumers
        there are demand like any other)."""
        self.failure: str | None = None
        self._stopped = asyncio.Event()

    # -- the remote side -------------------------------------------------------------------

    async def start(self) -> None:
        """Say who we are to the remote and subscribe to its consumer advisories; open the
        local connection. Raises RemoteError or DovecoteError when either refuses."""
        s = self.settings
        name = self.broker.settings.broker_name
        if not self.accepted_duplex:  # (our listener already said who we are)
            self.remote.send(Structure(t.BROKER_INFO, {
                "brokerId": Structure(t.BROKER_ID, {"value": self.local_id}),
                "brokerName": name, "networkConnection": True, "duplexConnection": s.duplex,
                "networkProperties": s.network_properties(name),
            }))  # fmt: skip
            if s.sync_durable_subs and s.duplex and self.remote.version >= DURABLE_SYNC_VERSION:
                # (As ActiveMQ's: the remote's bridge back syncs from ours.)
                self.remote.send(subscription_info(self.broker.query, name,
                                                   s.dynamically_included))  # fmt: skip
        connection_info = Structure(t.CONNECTION_INFO, {
            "connectionId": Structure(t.CONNECTION_ID, {"value": self._remote_conn}),
            "clientId": f"{s.name}_{name}_outbound", "userName": s.user, "password": s.password,
            "brokerMasterConnector": False, "manageable": False,
        })  # fmt: skip
        if s.duplex or self.accepted_duplex:
            # (On a duplex connection the remote's bridge takes it and answers nothing.)
            self.remote.send(connection_info)
        else:
            # Answered: a refused login is told here, not as the connection closing.
            await asyncio.wait_for(self.remote.request(connection_info), REQUEST_TIMEOUT_S)
        session = Structure(t.SESSION_ID, {"connectionId": self._remote_conn, "value": 1})
        self.remote.send(Structure(t.SESSION_INFO, {"sessionId": session}))
        self.remote.send(Structure(t.PRODUCER_INFO, {"producerId": self._remote_producer}))
        self.remote.send(Structure(t.CONSUMER_INFO, {
            "consumerId": self._remote_consumer,
            "destination": Structure(t.TOPIC, {"physicalName": CONSUMER_ADVISORIES}),
            "prefetchSize": 1000, "dispatchAsync": True,
        }))  # fmt: skip
        # One local connection per remote broker (a static: list bridges to several).
        local_client_id = f"{s.name}_{name}_inbound_{self.remote.remote_broker_name}"
        self.local_client_id = local_client_id
        info = ConnectionInfo(self.connection_id, local_client_id, s.user, s.password)
        peer = Peer(self.remote.peer_address, "network")
        await self.broker.add_connection(info, self._on_local_dispatch, peer)
        if self.duplex_inbound is not None:
            await self.duplex_inbound.open()
        await self.broker.process(self.connection_id, SessionInfo(self.session_id))
        for pattern in s.statically_included:
            if not pattern.pattern or any(c in pattern.pattern for c in "*>"):
                continue  # demand on a wildcard comes from the remote's consumers
            static = queue(pattern.pattern) if pattern.queues else topic(pattern.pattern)
            await self._subscribe(("static", static), static, None, None, 0, (), static=True)
        if not s.dynamic_only:
            await self._reactivate_durables()

    async def _reactivate_durables(self) -> None:
        """ActiveMQ's dynamicOnly = false (its default): the network durable subscriptions
        an earlier bridge of this connector left here are active from the bridge's start, for
        its whole life (what they kept goes to the remote broker, whose durable subscriptions
        keep it), rather than only once a remote subscriber's advisory comes again."""
        prefix = f"NC-DS_{self.broker.settings.broker_name}_"
        for view in self.broker.query.durable_subscriptions():
            if (
                view.client_id == self.local_client_id
                and view.name.startswith(prefix)
                and not view.active
                and self.settings.wants(view.destination)
            ):
                await self._subscribe(("durable", view.destination), view.destination, None,
                                      None, 0, (), static=True,
                                      subscription_name=view.name)  # fmt: skip

    async def run(self) -> str:
        """Forward until the remote connection ends or ``stop``; returns why it ended."""
        tasks = [
            asyncio.create_task(self._forward_loop()),
            asyncio.create_task(self._ack_loop()),
            asyncio.create_task(self._advisory_loop()),
        ]
        if self.duplex_inbound is not None:
            tasks.append(asyncio.create_task(self.duplex_inbound.serve()))
        closed = asyncio.create_task(self.remote.closed.wait())
        stopped = asyncio.create_task(self._stopped.wait())
        try:
            done, _ = await asyncio.wait(
                [closed, stopped, *tasks], return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                if task in tasks and task.exception() is not None:
                    exc = task.exception()
                    self.failure = self.failure or f"{type(exc).__name__}: {exc}"
        finally:
            for task in [*tasks, closed, stopped]:
                task.cancel()
            for task in [*tasks, closed, stopped]:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            await self.close()
        return self.failure or self.remote.error or "stopped"

    def stop(self) -> None:
        self._stopped.set()

    async def close(self) -> None:
        """Close both sides: what was sent and not yet answered comes back to the queue
        here as it was (not counted as a redelivery) and goes again on the next bridge."""
        await self.remote.close(self.failure)
        self._forget_sent()
        with contextlib.suppress(DovecoteError):
            await self.broker.remove_connection(self.connection_id, LAST_DELIVERED_UNSET)
            if self.duplex_inbound is not None:
                await self.duplex_inbound.close()

    def on_remote_command(self, s: Structure) -> None:
        """A command from the remote: the advisories the bridge subscribed to (and on a
        duplex connection, the remote's bridge back)."""
        if self.duplex_inbound is not None and self.duplex_inbound.take(s):
            return
        if (s.type == t.MESSAGE_DISPATCH and s["message"] is not None) or (
            s.type == t.BROKER_SUBSCRIPTION_INFO
        ):
            self._advisories.put_nowait(s)
        elif s.type == t.CONNECTION_ERROR:
            exception = s["exception"]
            self.failure = f"remote error: {exception.message if exception else 'unknown'}"
            self.stop()

    async def _advisory_loop(self) -> None:
        while (dispatch := await self._advisories.get()) is not None:
            if dispatch.type == t.BROKER_SUBSCRIPTION_INFO:
                await self._sync_durables(dispatch)
                continue
            message = dispatch["message"]
            if not dispatch["forwarded"]:
                self.remote.send(Structure(t.MESSAGE_ACK, {
                    "destination": dispatch["destination"], "consumerId": self._remote_consumer,
                    "ackType": int(AckType.STANDARD), "firstMessageId": message["messageId"],
                    "lastMessageId": message["messageId"], "messageCount": 1,
                }))  # fmt: skip
            data = message["dataStructure"]
            if data is None:
                continue
            if data.type == t.CONSUMER_INFO:
                await self._remote_consumer_added(data)
            elif data.type == t.REMOVE_INFO and data["objectId"] is not None:
                await self._remote_consumer_removed(consumer_key(data["objectId"]))
            elif data.type == t.REMOVE_SUBSCRIPTION_INFO:
                await self._remote_subscription_deleted(dispatch["destination"], data)
            elif data.type == t.DESTINATION_INFO:
                await self._remote_temp_destination(data)

    async def _remote_temp_destination(self, info: Structure) -> None:
        """A temporary destination made (or deleted) on the remote broker, told by its
        TempQueue/TempTopic advisory: made here too, on the bridge's local connection, so
        that a reply sent here to it goes to its consumer there (request/reply across the
        bridge, as ActiveMQ's bridgeTempDestinations). One that exists here already is
        someone else's and left alone (which also ends its echo round a ring of bridges)."""
        try:
            destination = destination_of(info["destination"])
        except DovecoteError:
            return
        if destination is None or not destination.is_temporary or self.local_id in path_of(info):
            return
        add = info["operationType"] == 0
        if add == (destination in self.temps):
            return
        try:
            await self.broker.process(
                self.connection_id, DestinationInfo(self.connection_id, destination, add)
            )
        except DovecoteError:
            return
        if add:
            self.temps.add(destination)
        else:
            self.temps.discard(destination)

    async def _duplex_demand(self, info: Structure) -> None:
        """The remote's bridge back subscribes to our advisories: forward them to it."""
        await self._remote_consumer_added(info, advisories=True)

    async def _duplex_demand_removed(self, consumer_id: Structure) -> None:
        await self._remote_consumer_removed(consumer_key(consumer_id))

    async def _remote_consumer_added(self, info: Structure, advisories: bool = False) -> None:
        s = self.settings
        try:
            destination = destination_of(info["destination"])
        except DovecoteError:
            return
        if destination is None or (destination.is_temporary and destination not in self.temps):
            return  # (a temporary one once its advisory made it here)
        path = path_of(info)
        if (
            (destination.name.startswith(ADVISORY_PREFIX) and not advisories)
            or self.local_id in path
            or len(path) >= s.consumer_ttl
            or info["browser"]
            or not (advisories or destination.is_temporary or s.wants(destination))
        ):
            log.debug("bridge %s: not bridging demand on %s (path %s)", s.name, destination, path)
            return
        key = consumer_key(info["consumerId"])
        selector = info["selector"] or None
        conduit = s.conduit_subscriptions and selector is None
        demand_key: Any = (destination, None) if conduit else key
        durable_key = ("durable", destination)
        if destination.is_topic and info["subscriptionName"]:
            remote_subscription = (info["clientId"] or None, str(info["subscriptionName"]))
            self.durable_remote.setdefault(destination, set()).add(remote_subscription)
            await self._subscribe_durably(destination, key, path)
            return
        if conduit and durable_key in self.demands:
            demand_key = durable_key  # the durable network subscription serves them all
        await self._subscribe(demand_key, destination, key, selector, info.get("priority", 0),
                              path)  # fmt: skip

    async def _subscribe_durably(
        self, destination: Destination, remote_key: tuple[Any, ...], path: tuple[str, ...]
    ) -> None:
        """A remote durable subscriber: one durable subscription here per topic (ActiveMQ's
        DurableConduitBridge, named NC-DS_<this broker>_<topic>), active while the remote
        subscription exists and keeping what is sent while the bridge is down; it takes
        over the topic's plain conduit consumer, so no message crosses twice."""
        name = f"NC-DS_{self.broker.settings.broker_name}_{destination.name}"
        durable_key = ("durable", destination)
        await self._subscribe(durable_key, destination, remote_key, None, 0, path,
                              subscription_name=name)  # fmt: skip
        plain = self.demands.get((destination, None))
        if plain is not None:
            for key in plain.remote:
                self.by_remote[key] = durable_key
            self.demands[durable_key].remote |= plain.remote
            plain.remote.clear()
            await self._unsubscribe((destination, None), plain)

    async def _remote_subscription_deleted(
        self, advisory_topic: Structure | None, info: Structure
    ) -> None:
        """A remote durable subscription was deleted (its advisory on the topic's consumer
        advisory topic): when no other remote durable subscription known to this bridge
        needs the topic's network durable subscription here, it is deleted too, with what
        it kept. Ones this bridge never saw (they were away since it started) keep it."""
        advisory = str(advisory_topic["physicalName"] or "") if advisory_topic else ""
        name = advisory.removeprefix(f"{ADVISORY_PREFIX}Consumer.Topic.")
        destination = topic(name)
        known = self.durable_remote.get(destination)
        if name == advisory or not known:
            return
        client_id, subscription = info["clientId"] or None, str(info["subcriptionName"] or "")
        known -= {(c, n) for c, n in known if n == subscription and c in (None, client_id)}
        if known:
            return
        del self.durable_remote[destination]
        await self._delete_network_durable(destination)

    async def _delete_network_durable(self, destination: Destination) -> None:
        """Delete the topic's network durable subscription here, with what it kept;
        non-durable remote subscribers it served get a plain conduit consumer."""
        durable_key = ("durable", destination)
        demand = self.demands.get(durable_key)
        plain: set[tuple[Any, ...]] = set()
        if demand is not None:
            plain = set(demand.remote)  # non-durable subscribers it served: a plain conduit
            await self._unsubscribe(durable_key, demand)
        local_name = f"NC-DS_{self.broker.settings.broker_name}_{destination.name}"
        with contextlib.suppress(DovecoteError):  # (already gone)
            await self.broker.process(
                self.connection_id, RemoveSubscriptionInfo(self.local_client_id, local_name)
            )
        log.info("bridge %s: network durable subscription %s removed (the remote one was)",
                 self.settings.name, local_name)  # fmt: skip
        for key in plain:
            await self._subscribe((destination, None), destination, key, None, 0, ())

    async def _sync_durables(self, info: Structure) -> None:
        """The remote's durable subscriptions (its BrokerSubscriptionInfo, asked for by
        sync_durable_subs; ActiveMQ's conditions: conduit subscriptions and not
        dynamic_only): the ones on the dynamically included destinations are taken as
        demand, as their advisories would be (a network durable subscription made here
        for each that appeared while the bridge was down); then the network durable
        subscriptions on those destinations that no remote one needs are deleted."""
        s = self.settings
        if not s.sync_durable_subs or not s.conduit_subscriptions or s.dynamic_only:
            return
        included = s.dynamically_included
        for consumer in info["subscriptionInfos"] or ():
            if consumer is None or is_own_network_subscription(consumer, s.name):
                continue
            with contextlib.suppress(DovecoteError):
                destination = destination_of(consumer["destination"])
                if destination is not None and any(p.matches(destination) for p in included):
                    await self._remote_consumer_added(consumer)
        for key in list(self.demands):
            if not (isinstance(key, tuple) and len(key) == 2 and key[0] == "durable"):
                continue
            destination = key[1]
            if any(p.matches(destination) for p in included) and not self.durable_remote.get(
                destination
            ):
                log.info("bridge %s: the remote has no durable subscription on %s any more",
                         s.name, destination)  # fmt: skip
                await self._delete_network_durable(destination)

    async def _subscribe(
        self,
        demand_key: Any,
        destination: Destination,
        remote_key: tuple[Any, ...] | None,
        selector: str | None,
        priority: int,
        path: tuple[str, ...],
        static: bool = False,
        subscription_name: str | None = None,
    ) -> None:
        demand = self.demands.get(demand_key)
        if demand is None:
            s = self.settings
            if s.decrease_network_consumer_priority:
                priority = NETWORK_CONSUMER_PRIORITY - len(path)
            consumer_id = ConsumerId(self.session_id, next(self._consumer_ids))
            info = ConsumerInfo(
                consumer_id, destination, prefetch_size=s.prefetch_size, selector=selector,
                priority=priority, broker_path=(*path, self.remote_id),
                subscription_name=subscription_name, additional_predicate=self._forwardable,
            )  # fmt: skip
            demand = Demand(consumer_id, destination, static=static)
            self.demands[demand_key] = demand
            self.by_local[consumer_id] = demand
            await self.broker.process(self.connection_id, info)
            self.counts.demands = len(self.demands)
            log.info(
                "bridge %s: forwarding %s to %s", s.name, destination, self.counts.remote_broker
            )
        if remote_key is not None:
            demand.remote.add(remote_key)
            self.by_remote[remote_key] = demand_key

    async def _remote_consumer_removed(self, key: tuple[Any, ...]) -> None:
        demand_key = self.by_remote.pop(key, None)
        demand = self.demands.get(demand_key) if demand_key is not None else None
        if demand is None:
            return
        demand.remote.discard(key)
        if demand.remote or demand.static:
            return
        if demand_key == ("durable", demand.destination) and self.durable_remote.get(
            demand.destination
        ):
            # As ActiveMQ's DurableConduitBridge: while the remote durable subscription
            # exists (its subscriber away), the network one stays active and the remote
            # broker keeps what it forwards for it; deleting it ends this one.
            return
        await self._unsubscribe(demand_key, demand)

    async def _unsubscribe(self, demand_key: Any, demand: Demand) -> None:
        """Close a demand's local consumer: what it had not yet sent goes back as it was
        (it was never delivered); a durable one's subscription stays and keeps what comes
        until a bridge activates it again."""
        del self.demands[demand_key]
        self.by_local.pop(demand.consumer_id, None)
        self.counts.demands = len(self.demands)
        await self.broker.process(
            self.connection_id, RemoveInfo(demand.consumer_id, LAST_DELIVERED_UNSET)
        )

    # -- forwarding ------------------------------------------------------------------------

    def _forwardable(self, message: Message) -> bool:
        """The local consumers' filter (ActiveMQ's NetworkBridgeFilter, and its
        ConditionalNetworkBridgeFilter's replayWhenNoConsumers)."""
        path = broker_path(message)
        if not path:
            return True
        if self.remote_id in path:
            # Back where it came from only when its consumers moved there: none is left here.
            return (
                self.settings.replay_when_no_consumers
                and message.destination.is_queue
                and self.local_consumers(message.destination) == 0
            )
        return len(path) < self.settings.message_ttl and self.local_id not in path


__all__ = ["Bridge", "BridgeCounts", "LocalBroker"]
