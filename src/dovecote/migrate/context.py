"""What a conversion keeps while it reads the XML: the tables it writes, which elements and
attributes it has used, and every one it could not carry over (with its line and why)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from dovecote.config import (
    AuthorizationEntrySection,
    AutoSection,
    BrokerSection,
    ConsoleSection,
    NetworkConnectorSection,
    OpenWireSection,
    PolicyEntry,
    PolicySection,
    RightsSection,
    SecuritySection,
    SslSection,
    StompSection,
    StompSslSection,
    StoreSection,
    TlsSection,
    UsageSection,
    UserEntry,
)
from dovecote.config.base import problem
from dovecote.migrate.tomlout import Table, Value
from dovecote.migrate.xmlread import Placeholders, XmlDocument, children, local

T = TypeVar("T")

NO_EQUIVALENT = "dovecote has no equivalent"

SECTIONS: dict[str, type[msgspec.Struct]] = {
    "broker": BrokerSection,
    "store": StoreSection,
    "usage": UsageSection,
    "openwire": OpenWireSection,
    "ssl": SslSection,
    "stomp": StompSection,
    "stomp_ssl": StompSslSection,
    "auto": AutoSection,
    "tls": TlsSection,
    "console": ConsoleSection,
    "policy": PolicySection,
    "policy.entries": PolicyEntry,
    "network_connectors": NetworkConnectorSection,
    "security": SecuritySection,
    "security.users": UserEntry,
    "security.authorization": AuthorizationEntrySection,
    "security.temp_destinations": RightsSection,
}
"""The table each output table is checked against, key by key, before a value is written."""

_REQUIRED: dict[str, dict[str, Any]] = {
    "network_connectors": {"uri": "static:(tcp://localhost:61616)"},
    "security.users": {"name": "x"},
    "security.authorization": {"queue": ">"},
}
ORDER = list(SECTIONS)


class Conversion:
    def __init__(self, doc: XmlDocument, placeholders: Placeholders) -> None:
        self.doc = doc
        self.placeholders = placeholders
        self.used: set[tuple[int, str | None]] = set()
        self.leftovers: list[tuple[int, str]] = []
        self.same: list[tuple[int, str]] = []
        self.warnings: list[str] = []
        self.tables: list[Table] = []

    # --- the output ---------------------------------------------------------------------

    def table(self, name: str, comment: str = "") -> Table:
        for table in self.tables:
            if table.name == name and not table.array:
                return table
        table = Table(name, comment=comment)
        self.tables.append(table)
        return table

    def array_table(self, name: str, comment: str = "") -> Table:
        table = Table(name, array=True, comment=comment)
        self.tables.append(table)
        return table

    def ordered_tables(self) -> list[Table]:
        return sorted(self.tables, key=lambda t: ORDER.index(t.name))

    def put(
        self,
        table: Table,
        key: str,
        value: Value,
        element: ET.Element | None,
        attr: str | None = None,
        comment: str | None = None,
        label: str | None = None,
    ) -> bool:
        """Write ``key`` when dovecote has it and takes ``value``; else name the source as not
        carried over. The comment says where the value came from."""
        section = SECTIONS.get(table.name)
        if section is not None:
            if key not in section.__struct_fields__:
                self.leftover(element, attr, NO_EQUIVALENT, label)
                return False
            required = {
                k: v
                for k, v in _REQUIRED.get(table.name, {}).items()
                if k != "queue" or key != "topic"
            }
            trial = {**required, key: value}
            try:
                msgspec.convert(trial, section, dec_hook=_any_path)
            except msgspec.ValidationError as exc:
                reason = f"dovecote's {table.name}.{problem(str(exc))}"
                self.leftover(element, attr, reason, label)
                return False
        if comment is None:
            comment = self.source(element, attr) if element is not None else ""
        table.set(key, value, comment)
        return True

    # --- the input ----------------------------------------------------------------------

    def line(self, element: ET.Element) -> int:
        return self.doc.line(element)

    def use(self, element: ET.Element, *attrs: str) -> None:
        self.used.add((id(element), None))
        for attr in attrs:
            self.used.add((id(element), attr))

    def text(self, element: ET.Element, attr: str) -> str | None:
        """An attribute's value with its placeholders resolved (None: absent, or a
        placeholder unresolved, which is then named)."""
        raw = element.get(attr)
        if raw is None:
            return None
        self.use(element, attr)
        value, missing = self.placeholders.resolve(raw)
        if missing:
            names = ", ".join("${" + name + "}" for name in missing)
            self.leftover(element, attr, f"unresolved placeholder {names}")
            return None
        return value

    def typed(self, element: ET.Element, attr: str, parse: Callable[[str], T]) -> T | None:
        value = self.text(element, attr)
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError as exc:
            self.leftover(element, attr, str(exc))
            return None

    def carry(
        self, table: Table, key: str, element: ET.Element, attr: str, parse: Callable[[str], Value]
    ) -> None:
        """The attribute, when given and valid, as ``key`` of ``table``."""
        value = self.typed(element, attr, parse)
        if value is not None:
            self.put(table, key, value, element, attr)

    def describe(self, element: ET.Element | None, attr: str | None) -> str:
        if element is None:
            return "(the file)"
        tag = local(element.tag)
        if attr is not None:
            value = element.get(attr, "")
            if "password" in attr.lower() and "${" not in value:
                value = "..."  # a password in the clear stays out of the output
            return f'<{tag} {attr}="{value}">'
        for key in (
            "name",
            "queue",
            "topic",
            "tempQueue",
            "tempTopic",
            "uri",
            "class",
            "resource",
            "id",
        ):
            if key in element.attrib:
                return f'<{tag} {key}="{element.get(key)}">'
        return f"<{tag}>"

    def source(self, element: ET.Element, attr: str | None = None) -> str:
        """Where a value came from, for its comment (long attributes by name only)."""
        if attr is not None and len(element.get(attr, "")) > 40:
            return f"{self.describe(element, None)} {attr}, line {self.line(element)}"
        return f"{self.describe(element, attr)}, line {self.line(element)}"

    def leftover(
        self, element: ET.Element | None, attr: str | None, reason: str, label: str | None = None
    ) -> None:
        """Name what is not carried over: ``label`` (default: the element or attribute), its
        line and why."""
        if element is not None and attr is None:
            for inner in element.iter():  # the whole element: nothing below it is named again
                self.use(inner, *inner.attrib)
        elif element is not None:
            self.use(element, *([attr] if attr else []))
        line = 0 if element is None else self.line(element)
        label = label or self.describe(element, attr)
        self.leftovers.append((line, f"{label} at line {line}: {reason}"))

    def same_as(self, element: ET.Element, attr: str, why: str) -> None:
        """An attribute whose value is what dovecote does anyway: nothing to write."""
        self.use(element, attr)
        line = self.line(element)
        self.same.append((line, f"{self.describe(element, attr)} at line {line}: {why}"))

    def sweep(self, element: ET.Element, reason: Callable[[ET.Element], str]) -> None:
        """Name every element and attribute below ``element`` that nothing used."""
        if (id(element), None) not in self.used:
            self.leftover(element, None, reason(element))
            return
        for attr in element.attrib:
            if (id(element), attr) not in self.used:
                self.leftover(element, attr, NO_EQUIVALENT)
        for child in children(element):
            self.sweep(child, reason)

    def messages(self) -> list[str]:
        return [text for _, text in sorted(self.leftovers, key=lambda item: item[0])]


def _any_path(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise TypeError(f"Expected a path as text, got `{type(value).__name__}`")
