"""<networkConnectors> as [[network_connectors]] (docs/networks.md)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from urllib.parse import parse_qsl

from dovecote.config import ConfigError, NetworkConnectorSection
from dovecote.migrate.context import NO_EQUIVALENT, Conversion
from dovecote.migrate.tomlout import Parse
from dovecote.migrate.xmlread import children, local, parse_bool, parse_float, parse_int

_ATTRIBUTES: dict[str, tuple[str, Parse]] = {
    "name": ("name", str),
    "duplex": ("duplex", parse_bool),
    "networkTTL": ("network_ttl", parse_int),
    "messageTTL": ("message_ttl", parse_int),
    "consumerTTL": ("consumer_ttl", parse_int),
    "conduitSubscriptions": ("conduit_subscriptions", parse_bool),
    "decreaseNetworkConsumerPriority": ("decrease_network_consumer_priority", parse_bool),
    "dynamicOnly": ("dynamic_only", parse_bool),
    "syncDurableSubs": ("sync_durable_subs", parse_bool),
    "prefetchSize": ("prefetch_size", parse_int),
    "userName": ("user", str),
    "password": ("password", str),
}
_URI_OPTIONS: dict[str, tuple[str, Parse]] = {
    "initialReconnectDelay": ("initial_reconnect_delay_ms", parse_int),
    "maxReconnectDelay": ("max_reconnect_delay_ms", parse_int),
    "useExponentialBackOff": ("use_exponential_backoff", parse_bool),
    "backOffMultiplier": ("back_off_multiplier", parse_float),
}
_LISTS = {
    "dynamicallyIncludedDestinations": "dynamically_included_destinations",
    "excludedDestinations": "excluded_destinations",
    "staticallyIncludedDestinations": "statically_included_destinations",
}
_QUERY = re.compile(r"^(?P<uri>(?:static|masterslave):(?://)?\s*\([^)]*\))\s*(?:\?(?P<query>.*))?$")


def convert_network(conv: Conversion, broker: ET.Element) -> None:
    for wrapper in children(broker, "networkConnectors"):
        conv.use(wrapper)
        for connector in children(wrapper):
            if local(connector.tag) != "networkConnector":
                conv.leftover(
                    connector, None, "dovecote has static: and masterslave: connectors only"
                )
                continue
            _connector(conv, connector)


def _connector(conv: Conversion, connector: ET.Element) -> None:
    conv.use(connector)
    uri = conv.text(connector, "uri")
    if uri is None:
        if "uri" not in connector.attrib:
            conv.leftover(connector, None, "no uri")
        return
    match = _QUERY.match(uri.strip())
    if match is None:
        conv.leftover(
            connector,
            None,
            "dovecote bridges to static:(...) and masterslave:(...) "
            "lists of tcp:// brokers (no discovery)",
            conv.describe(connector, "uri"),
        )
        return
    try:
        NetworkConnectorSection(uri=match["uri"]).to_settings(0)
    except ConfigError as exc:
        reason = str(exc).partition(": ")[2]
        conv.leftover(connector, None, reason, conv.describe(connector, "uri"))
        return
    table = conv.array_table("network_connectors")
    conv.put(table, "uri", match["uri"], connector, "uri")
    for key, value in parse_qsl(match["query"] or "", keep_blank_values=True):
        label = f"{conv.describe(connector, 'uri')} option {key}={value}"
        if key not in _URI_OPTIONS:
            conv.leftover(connector, "uri", NO_EQUIVALENT, label)
            continue
        target, parse = _URI_OPTIONS[key]
        try:
            conv.put(
                table, target, parse(value), connector, "uri", f"{key}={value} in its uri", label
            )
        except ValueError as exc:
            conv.leftover(connector, "uri", str(exc), label)
    for attr, (key, parse) in _ATTRIBUTES.items():
        conv.carry(table, key, connector, attr, parse)
    for name, key in _LISTS.items():
        for wrapper in children(connector, name):
            conv.use(wrapper)
            items = [item for d in children(wrapper) if (item := _destination(conv, d))]
            conv.put(table, key, items, wrapper, None)
    conv.put(
        table,
        "replay_when_no_consumers",
        True,
        None,
        comment="dovecote's default; ActiveMQ's is false (docs/networks.md)",
    )


def _destination(conv: Conversion, element: ET.Element) -> dict[str, str | int | float | bool]:
    kind = local(element.tag)
    if kind not in ("queue", "topic"):
        conv.leftover(element, None, "dovecote's lists take queues and topics")
        return {}
    name = conv.text(element, "physicalName")
    if name is None:
        return {}
    conv.use(element)
    return {kind: name}
