"""<jaasAuthenticationPlugin>: when its login.config entry (beside the XML, where ActiveMQ's
launcher points java.security.auth.login.config) uses ActiveMQ's PropertiesLoginModule, its
users.properties and groups.properties become [[security.users]]; anything else is named."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from dovecote.broker.security.users import hash_password
from dovecote.migrate.context import Conversion
from dovecote.migrate.xmlread import parse_groups, read_properties

PROPERTIES_MODULE = "org.apache.activemq.jaas.PropertiesLoginModule"
_OPTION = re.compile(r'([\w.]+)\s*=\s*"([^"]*)"')


def login_modules(config: str, name: str) -> list[tuple[str, dict[str, str]]] | None:
    """The modules of entry ``name`` of a JAAS login.config, with their options (None: no
    such entry)."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", config, flags=re.DOTALL)
    match = re.search(r"(?:^|[\s;}])" + re.escape(name) + r"\s*\{(.*?)\}\s*;", text, re.DOTALL)
    if match is None:
        return None
    modules = []
    for statement in match[1].split(";"):
        words = statement.split(None, 2)
        if len(words) >= 2:
            modules.append((words[0], dict(_OPTION.findall(words[2] if len(words) > 2 else ""))))
    return modules


def convert_jaas(conv: Conversion, plugin: ET.Element) -> None:
    name = conv.text(plugin, "configuration") or "activemq"
    conv.use(plugin)
    login = Path(conv.placeholders.values["activemq.conf"][0]) / "login.config"
    modules = login_modules(login.read_text(encoding="utf-8"), name) if login.is_file() else None
    if not modules:
        conv.leftover(
            plugin,
            None,
            f"no entry {name!r} in {login}: put its users in "
            "[[security.users]] (dovecote passwd hashes their passwords)",
        )
        return
    for module, options in modules:
        if module != PROPERTIES_MODULE:
            conv.leftover(
                plugin,
                None,
                f"{module} in {login}: JAAS login modules are Java's "
                "(PropertiesLoginModule's files are read)",
            )
            continue
        users_file = login.parent / options.get("org.apache.activemq.jaas.properties.user", "")
        groups_file = login.parent / options.get("org.apache.activemq.jaas.properties.group", "")
        if not users_file.is_file():
            conv.leftover(plugin, None, f"{users_file} (PropertiesLoginModule's users) not found")
            continue
        groups: dict[str, list[str]] = {}
        if groups_file.is_file():
            for group, members in read_properties(groups_file).items():
                for member in parse_groups(members):
                    groups.setdefault(member, []).append(group)
        for user, password in read_properties(users_file).items():
            table = conv.array_table("security.users")
            conv.put(table, "name", user, None, comment=f"{users_file.name}, via {login.name}")
            conv.put(table, "password", hash_password(password), None, comment="hashed")
            conv.put(table, "groups", groups.get(user, []), None, comment=groups_file.name)
        conv.warnings.append(
            f"the users of {users_file} and groups of {groups_file} (the JAAS entry {name!r} "
            f"of {login}) are now [[security.users]], their passwords hashed"
        )
