"""Reading ActiveMQ's activemq.xml: a safe parse that keeps each element's line, Spring's
property placeholders, and ActiveMQ's value syntaxes (sizes, booleans)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import xml.parsers.expat as expat
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class MigrationError(Exception):
    """The input cannot be converted at all (unreadable, not XML, no <broker>)."""


def local(tag: str) -> str:
    """An element's name without its namespace (``{http://...core}broker`` -> ``broker``)."""
    return tag.rpartition("}")[2]


class XmlDocument:
    """The parsed file: its root and the line each element starts on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: dict[int, int] = {}
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise MigrationError(f"cannot read {path}: {exc.strerror}") from None
        self.root = _parse(data, self.lines, path)

    def line(self, element: ET.Element) -> int:
        return self.lines.get(id(element), 0)

    def walk(self) -> Iterator[ET.Element]:
        return self.root.iter()


class _EntityRefused(Exception):
    pass


def _refuse_entities(*_args: Any) -> None:
    raise _EntityRefused


def _name(name: str) -> str:
    return "{" + name if "}" in name else name  # expat's "uri}local" as ElementTree's "{uri}local"


def _parse(data: bytes, lines: dict[int, int], path: Path) -> ET.Element:
    """ElementTree's tree, built from expat directly to learn each element's line."""
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate(namespace_separator="}")
    parser.buffer_text = True

    def start(name: str, attrs: dict[str, str]) -> None:
        element = builder.start(_name(name), {_name(k): v for k, v in attrs.items()})
        lines[id(element)] = parser.CurrentLineNumber

    parser.StartElementHandler = start
    parser.EndElementHandler = lambda name: builder.end(_name(name))
    parser.CharacterDataHandler = builder.data
    # defusedxml is not a dependency: entity declarations (the billion laughs, external
    # entities) are refused as defusedxml refuses them; ActiveMQ's files have none.
    parser.EntityDeclHandler = _refuse_entities
    parser.UnparsedEntityDeclHandler = _refuse_entities
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise MigrationError(f"{path} is not well-formed XML: {exc}") from None
    except _EntityRefused:
        raise MigrationError(
            f"{path} declares XML entities, which are refused (entity expansion): remove "
            "the <!DOCTYPE> internal subset"
        ) from None
    return builder.close()


def children(element: ET.Element, name: str | None = None) -> list[ET.Element]:
    """Child elements (by local name when given)."""
    return [c for c in element if isinstance(c.tag, str) and (name is None or local(c.tag) == name)]


def find_broker(root: ET.Element) -> ET.Element:
    if local(root.tag) == "broker":
        return root
    for element in root.iter():
        if isinstance(element.tag, str) and local(element.tag) == "broker":
            return element
    raise MigrationError("no <broker> element: is this an ActiveMQ 5.x activemq.xml?")


# --- values -----------------------------------------------------------------------------

_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]?)b?\s*$", re.IGNORECASE)
_SIZE_FACTORS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    """ActiveMQ's sizes: "64 mb", "1gb", "512k", "1024" (XBeanByteConverterUtil's forms)."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a size (a number, optionally kb, mb or gb)")
    return int(match[1]) * _SIZE_FACTORS[match[2].lower()]


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return lowered == "true"


def parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_DURATION_FACTORS = {"": 1, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def parse_duration_ms(text: str) -> int:
    """A duration as replicatedLevelDB's zkSessionTimeout takes it ("2s", "500ms"), in ms."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration (a number with ms, s, m or h)")
    return int(match[1]) * _DURATION_FACTORS[(match[2] or "").lower()]


def parse_float(text: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None


def parse_groups(text: str) -> list[str]:
    return [g.strip() for g in text.split(",") if g.strip()]


# --- placeholders -----------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\$\{([^}:]+)(?::([^}]*))?\}")

WELL_KNOWN = {
    "activemq.base": (".", "the directory dovecote runs in"),
    "activemq.home": (".", "the directory dovecote runs in"),
    "activemq.data": ("data", "data under the directory dovecote runs in"),
}
"""ActiveMQ's launcher sets these; dovecote's paths are relative to its working directory."""


def read_properties(path: Path) -> dict[str, str]:
    """A Java .properties file's simple ``key=value`` / ``key: value`` lines."""
    values: dict[str, str] = {}
    for raw in path.read_text(encoding="latin-1").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        key, value = (match[1], match[2]) if match else (line, "")
        values[key] = value.strip()
    return values


class Placeholders:
    """Spring's ${name} and ${name:default}: ActiveMQ's well-known ones, activemq.conf (the
    XML's directory) and the properties files a PropertyPlaceholderConfigurer loads."""

    def __init__(self, conf_dir: Path) -> None:
        self.values: dict[str, tuple[str, str]] = dict(WELL_KNOWN)
        self.values["activemq.conf"] = (str(conf_dir), "the directory of the XML file")
        self.used: dict[str, tuple[str, str]] = {}

    def load(self, path: Path) -> None:
        for key, value in read_properties(path).items():
            if not value.startswith("ENC("):  # jasypt's encrypted values stay unresolved
                self.values.setdefault(key, (value, f"from {path}"))

    def resolve(self, text: str) -> tuple[str, list[str]]:
        """The text with what can be resolved replaced, and the names that could not."""
        missing: list[str] = []

        def substitute(match: re.Match[str]) -> str:
            name, default = match[1], match[2]
            if name in self.values:
                self.used[name] = self.values[name]
                return self.values[name][0]
            if default is not None:
                self.used[name] = (default, "the default written in the XML")
                return default
            missing.append(name)
            return match[0]

        return _PLACEHOLDER.sub(substitute, text), missing
