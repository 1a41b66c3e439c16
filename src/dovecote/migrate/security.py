"""<plugins>: simpleAuthenticationPlugin's users as [[security.users]] (passwords hashed),
authorizationPlugin's map as [[security.authorization]]; other plugins are named."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable

# The hash is the one `dovecote passwd` prints: the config's users only take such hashes.
from dovecote.broker.security.users import hash_password
from dovecote.migrate.context import Conversion
from dovecote.migrate.jaas import convert_jaas
from dovecote.migrate.tomlout import Table
from dovecote.migrate.xmlread import children, local, parse_bool, parse_groups

_PLUGIN_REASONS = {
    "jaasCertificateAuthenticationPlugin": "JAAS is Java's: name certificate subjects in "
    "[[security.certificate_users]] with [tls] client_auth",
    "jaasDualAuthenticationPlugin": "JAAS is Java's: [[security.users]] and "
    "[[security.certificate_users]] together do the same",
    "redeliveryPlugin": "dovecote has no broker-side redelivery (the client redelivers; "
    "maximum_redeliveries in [[policy.entries]])",
}


def convert_plugins(conv: Conversion, broker: ET.Element) -> None:
    handlers: dict[str, Callable[[Conversion, ET.Element], None]] = {
        "simpleAuthenticationPlugin": _authentication,
        "authorizationPlugin": _authorization,
        "jaasAuthenticationPlugin": convert_jaas,
    }
    for wrapper in children(broker, "plugins"):
        conv.use(wrapper)
        for plugin in children(wrapper):
            name = local(plugin.tag)
            if name in handlers:
                conv.use(plugin)
                handlers[name](conv, plugin)
            elif name == "statisticsBrokerPlugin":
                conv.use(plugin)
                conv.put(conv.table("broker"), "statistics", True, plugin)
            else:
                conv.leftover(
                    plugin, None, _PLUGIN_REASONS.get(name, "dovecote has no such plugin")
                )


def _authentication(conv: Conversion, plugin: ET.Element) -> None:
    security = conv.table("security")
    conv.carry(security, "allow_anonymous", plugin, "anonymousAccessAllowed", parse_bool)
    conv.carry(security, "anonymous_user", plugin, "anonymousUser", str)
    conv.carry(security, "anonymous_groups", plugin, "anonymousGroup", parse_groups)
    for wrapper in children(plugin, "users"):
        conv.use(wrapper)
        for user_element in children(wrapper, "authenticationUser"):
            _user(conv, user_element)


def _user(conv: Conversion, element: ET.Element) -> None:
    name = conv.text(element, "username")
    if not name:
        if "username" not in element.attrib:
            conv.leftover(element, None, "a user with no username")
        return
    conv.use(element)
    table = conv.array_table("security.users")
    conv.put(table, "name", name, element, "username")
    if "password" in element.attrib:
        password = conv.text(element, "password")
        if password is not None:
            conv.put(
                table,
                "password",
                hash_password(password),
                element,
                "password",
                comment=f"hashed from line {conv.line(element)} (dovecote passwd)",
            )
        else:
            conv.warnings.append(
                f"user {name!r} has no password here (its placeholder was not resolved): "
                "add one with dovecote passwd"
            )
    if (groups := conv.text(element, "groups")) is not None:
        conv.put(table, "groups", parse_groups(groups), element, "groups")


def _authorization(conv: Conversion, plugin: ET.Element) -> None:
    maps = [m for wrapper in children(plugin, "map") for m in children(wrapper)]
    for wrapper in children(plugin, "map"):
        conv.use(wrapper)
    for authorization_map in maps:
        if local(authorization_map.tag) != "authorizationMap":
            conv.leftover(
                authorization_map,
                None,
                "dovecote's authorization map is in the configuration file (no LDAP)",
            )
            continue
        conv.use(authorization_map)
        for group in children(authorization_map):
            name = local(group.tag)
            if name == "authorizationEntries":
                conv.use(group)
                for entry in children(group, "authorizationEntry"):
                    _entry(conv, entry)
            elif name == "tempDestinationAuthorizationEntry":
                conv.use(group)
                for entry in children(group, "tempDestinationAuthorizationEntry"):
                    conv.use(entry)
                    table = conv.table("security.temp_destinations")
                    _rights(conv, entry, table)
            elif name == "defaultEntry":
                conv.leftover(
                    group,
                    None,
                    "dovecote closes a destination no entry covers: write an entry for > instead",
                )


def _entry(conv: Conversion, entry: ET.Element) -> None:
    for attr in ("queue", "topic"):
        if attr in entry.attrib and (pattern := conv.text(entry, attr)):
            conv.use(entry)
            table = conv.array_table("security.authorization")
            conv.put(table, attr, pattern, entry, attr)
            _rights(conv, entry, table)
            return
    if "tempQueue" in entry.attrib or "tempTopic" in entry.attrib:
        conv.leftover(
            entry,
            None,
            "temporary destinations: [security.temp_destinations] "
            "(a tempDestinationAuthorizationEntry)",
        )
    else:
        conv.leftover(entry, None, "an entry with no queue or topic")


def _rights(conv: Conversion, entry: ET.Element, table: Table) -> None:
    for right in ("read", "write", "admin"):
        if (groups := conv.text(entry, right)) is not None:
            conv.put(table, right, parse_groups(groups), entry, right)
    group_class = entry.get("groupClass")
    if group_class is not None and group_class.endswith("GroupPrincipal"):
        conv.same_as(entry, "groupClass", "dovecote's groups are ActiveMQ's GroupPrincipal")
