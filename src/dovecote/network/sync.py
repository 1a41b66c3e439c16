"""ActiveMQ's ``syncDurableSubs``: a bridge starting again learns which durable subscriptions
the remote broker has now, so that it deletes the network durable subscriptions here whose
remote subscription went away while it was down and makes the ones that appeared.

The bridge asks by ``syncDurableSubs=true`` in its BrokerInfo's networkProperties; the
remote answers at once with a BrokerSubscriptionInfo (OpenWire v12, type 92): its broker
name and one ConsumerInfo per durable subscription on a destination the bridge's
``dynamicallyIncludedDestinations`` name, with the subscription's client id. As in
ActiveMQ (NetworkBridgeUtils), only that list is synced: a bridge without one is sent
nothing and deletes nothing. Network durable subscriptions (``NC-DS_``) are left out: the
demand they stand for came from another broker, and its own bridge tells of it.
"""

from __future__ import annotations

from typing import Final

from dovecote.broker.query import BrokerQuery
from dovecote.network.properties import parse_properties, patterns_of
from dovecote.network.settings import DestinationPattern
from dovecote.protocol.openwire import Structure
from dovecote.protocol.openwire import schema as t
from dovecote.protocol.openwire.structures import destination_structure

NETWORK_DURABLE_PREFIX: Final = "NC-DS_"
"""ActiveMQ's DURABLE_SUB_PREFIX: a network durable subscription's name begins with it."""
DURABLE_SYNC_VERSION: Final = 12
"""ActiveMQ's PROTOCOL_VERSION_DURABLE_SYNC: the first OpenWire version with type 92."""


def sync_asked(broker_info: Structure) -> tuple[DestinationPattern, ...] | None:
    """The destinations a bridge's BrokerInfo asks the durable subscriptions of, or None
    when it does not ask (not a bridge, or syncDurableSubs off)."""
    if not broker_info["networkConnection"]:
        return None
    props = parse_properties(broker_info["networkProperties"] or "")
    if props.get("syncDurableSubs", "").strip().lower() != "true":
        return None
    return patterns_of(props.get("dynamicallyIncludedDestinations"))


def subscription_info(
    query: BrokerQuery, broker_name: str, included: tuple[DestinationPattern, ...]
) -> Structure:
    """This broker's durable subscriptions on ``included`` destinations, as ActiveMQ's
    BrokerSubscriptionInfo carries them (one ConsumerInfo each, with its client id)."""
    infos: list[Structure | None] = []
    for number, view in enumerate(query.durable_subscriptions(), 1):
        if view.name.startswith(NETWORK_DURABLE_PREFIX):
            continue
        if not any(pattern.matches(view.destination) for pattern in included):
            continue
        consumer_id = Structure(t.CONSUMER_ID, {"connectionId": f"ID:{broker_name}-durable",
                                                "sessionId": 0, "value": number})  # fmt: skip
        infos.append(Structure(t.CONSUMER_INFO, {
            "consumerId": consumer_id, "destination": destination_structure(view.destination),
            "prefetchSize": 100, "clientId": view.client_id, "subscriptionName": view.name,
            "selector": view.selector, "maximumPendingMessageLimit": 0,
        }))  # fmt: skip
    return Structure(t.BROKER_SUBSCRIPTION_INFO, {"brokerName": broker_name,
                                                  "subscriptionInfos": infos})  # fmt: skip


def is_own_network_subscription(info: Structure, connector_name: str) -> bool:
    """A network durable subscription a bridge of this connector made there (ActiveMQ's
    isDirectBridgeConsumer): not demand of the remote's own."""
    name = str(info["subscriptionName"] or "")
    client_id = info["clientId"]
    return name.startswith(NETWORK_DURABLE_PREFIX) and (
        client_id is None or str(client_id).startswith(connector_name)
    )
