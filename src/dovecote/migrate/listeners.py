"""<broker>'s own attributes, <transportConnectors>, <sslContext> and the web console."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path, PurePosixPath
from urllib.parse import parse_qsl, urlsplit

from dovecote.migrate.context import NO_EQUIVALENT, Conversion
from dovecote.migrate.tomlout import Parse
from dovecote.migrate.xmlread import (
    MigrationError,
    XmlDocument,
    children,
    local,
    parse_bool,
    parse_float,
    parse_int,
    parse_size,
)

BROKER_ATTRIBUTES = {
    "brokerName": "name",
    "persistent": "persistent",
    "schedulerSupport": "scheduler_support",
    "advisorySupport": "advisory_support",
}

# The URI scheme of a transport connector -> dovecote's listener (and auto+ssl's tls).
SCHEMES = {
    "tcp": "openwire",
    "nio": "openwire",
    "ssl": "ssl",
    "nio+ssl": "ssl",
    "stomp": "stomp",
    "stomp+nio": "stomp",
    "stomp+ssl": "stomp_ssl",
    "stomp+nio+ssl": "stomp_ssl",
    "auto": "auto",
    "auto+nio": "auto",
    "auto+ssl": "auto",
    "auto+nio+ssl": "auto",
}

_OPENWIRE_OPTIONS: dict[str, tuple[str, Parse]] = {
    "maximumConnections": ("max_connections", parse_int),
    "wireFormat.maxFrameSize": ("max_frame_size", parse_size),
    "wireFormat.maxInactivityDuration": ("max_inactivity_ms", parse_int),
    "wireFormat.maxInactivityDurationInitalDelay": ("max_inactivity_initial_delay_ms", parse_int),
    "maxInactivityDurationInitalDelay": ("max_inactivity_initial_delay_ms", parse_int),
    "connectAttemptTimeout": ("connect_attempt_timeout_ms", parse_int),
}
_STOMP_OPTIONS: dict[str, tuple[str, Parse]] = {
    "maximumConnections": ("max_connections", parse_int),
    "wireFormat.maxFrameSize": ("max_frame_size", parse_size),
    "maxFrameSize": ("max_frame_size", parse_size),
    "hbGracePeriodMultiplier": ("heartbeat_grace", parse_float),
    "connectAttemptTimeout": ("connect_attempt_timeout_ms", parse_int),
}
_AUTO_OPTIONS: dict[str, tuple[str, Parse]] = {
    "maximumConnections": ("max_connections", parse_int),
    "protocolDetectionTimeOut": ("protocol_detection_timeout_ms", parse_int),
}
OPTIONS: dict[str, dict[str, tuple[str, Parse]]] = {
    "openwire": _OPENWIRE_OPTIONS,
    "ssl": _OPENWIRE_OPTIONS,
    "stomp": _STOMP_OPTIONS,
    "stomp_ssl": _STOMP_OPTIONS,
    "auto": _AUTO_OPTIONS,
}
LISTENERS = ("openwire", "ssl", "stomp", "stomp_ssl", "auto")
_OFF_BY_DEFAULT = ("ssl", "stomp_ssl", "auto")


def convert_broker(conv: Conversion, broker: ET.Element) -> None:
    table = conv.table("broker")
    for attr, key in BROKER_ATTRIBUTES.items():
        conv.carry(table, key, broker, attr, str if key == "name" else parse_bool)
    conv.carry(table, "data_dir", broker, "dataDirectory", tidy_path)
    if broker.get("useJmx", "").strip().lower() == "false":
        conv.same_as(broker, "useJmx", "dovecote has no JMX")
    elif "useJmx" in broker.attrib:
        conv.leftover(broker, "useJmx", "dovecote has no JMX: its admin API and /metrics instead")
    if broker.get("useShutdownHook", "").strip().lower() == "true":
        conv.same_as(broker, "useShutdownHook", "dovecote stops cleanly on SIGTERM")


def tidy_path(text: str) -> str:
    """A path as written, with ./ and file: prefixes gone (``./data`` -> ``data``)."""
    text = text.removeprefix("file:")
    return str(PurePosixPath(text)) if text else text


def convert_listeners(conv: Conversion, broker: ET.Element) -> set[str]:
    """The transport connectors; dovecote's listeners that none configures are turned off,
    as ActiveMQ listens only where a connector says. Returns the listeners enabled."""
    enabled: dict[str, ET.Element] = {}
    for wrapper in children(broker, "transportConnectors"):
        conv.use(wrapper)
        for connector in children(wrapper):
            if local(connector.tag) != "transportConnector":
                continue
            _connector(conv, connector, enabled)
    for name in LISTENERS:
        if name not in enabled and name not in _OFF_BY_DEFAULT:
            conv.put(
                conv.table(name), "enabled", False, None, comment="no such transport connector"
            )
    return set(enabled)


def _connector(conv: Conversion, connector: ET.Element, enabled: dict[str, ET.Element]) -> None:
    conv.use(connector, "name")
    uri = conv.text(connector, "uri")
    if uri is None:
        if "uri" not in connector.attrib:
            conv.leftover(connector, None, "no uri")
        return
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    section = SCHEMES.get(scheme)
    if section is None:
        conv.leftover(connector, "uri", f"{scheme}://: dovecote speaks OpenWire and STOMP only")
        return
    if section in enabled:
        first = conv.line(enabled[section])
        conv.leftover(connector, "uri", f"dovecote has one {section} listener (kept line {first})")
        return
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        conv.leftover(connector, "uri", str(exc))
        return
    if host is None or port is None:
        conv.leftover(connector, "uri", "no host:port")
        return
    enabled[section] = connector
    table = conv.table(section)
    conv.put(table, "enabled", True, connector, "uri")
    conv.put(table, "host", host, connector, "uri")
    conv.put(table, "port", port, connector, "uri")
    if section == "auto":
        conv.put(table, "tls", scheme.endswith("+ssl"), connector, "uri")
    where = conv.source(connector, "uri")
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        _option(conv, connector, section, key, value, where)


def _option(
    conv: Conversion, connector: ET.Element, section: str, key: str, value: str, where: str
) -> None:
    name = key.removeprefix("transport.")
    mapped = OPTIONS[section].get(name)
    option = f"{key}={value}"
    if section in ("ssl", "stomp_ssl", "auto") and name in ("needClientAuth", "wantClientAuth"):
        if value.strip().lower() == "true":
            kind = "need" if name == "needClientAuth" else "want"
            tls = conv.table("tls")
            if tls.get("client_auth") != "need":
                conv.put(tls, "client_auth", kind, None, comment=f"{option} in {where}")
        return
    label = f"{conv.describe(connector, 'uri')} option {option}"
    if mapped is None:
        conv.leftover(connector, "uri", NO_EQUIVALENT, label)
        return
    target, parse = mapped
    try:
        parsed = parse(value)
    except ValueError as exc:
        conv.leftover(connector, "uri", str(exc), label)
        return
    conv.put(conv.table(section), target, parsed, connector, "uri", f"{option} in {where}", label)


def convert_ssl_context(conv: Conversion, broker: ET.Element, listeners: set[str]) -> None:
    """<sslContext>: Java key stores, where dovecote takes PEM files: the [tls] paths are the
    key stores' names with .pem, to be made from them (docs/tls.md)."""
    wanting = listeners & {"ssl", "stomp_ssl"} or (
        {"auto"} if conv.table("auto").get("tls") is True else set()
    )
    for wrapper in children(broker, "sslContext"):
        conv.use(wrapper)
        for context in children(wrapper, "sslContext"):
            conv.use(context)
            tls = conv.table("tls")
            for attr, key in (("keyStore", "certificate_file"), ("trustStore", "ca_file")):
                store = conv.text(context, attr)
                if store is None:
                    continue
                pem = str(Path(tidy_path(store)).with_suffix(".pem"))
                conv.put(tls, key, pem, context, attr, comment=f"convert {store} to PEM")
                made = pem
                if key == "certificate_file":  # docs/tls.md's commands write the key apart
                    made += " and " + (private := str(Path(pem).with_suffix(".key")))
                    conv.put(tls, "key_file", private, context, attr, comment="its private key")
                conv.leftover(
                    context, attr, f"a Java key store: convert it to PEM as {made} (docs/tls.md)"
                )
            for attr in context.attrib:
                if (id(context), attr) not in conv.used:
                    conv.leftover(context, attr, "dovecote reads PEM files ([tls], docs/tls.md)")
    tls = conv.table("tls")
    if wanting and tls.get("certificate_file") is None:
        conv.put(tls, "certificate_file", "broker.pem", None, comment="make it: docs/tls.md")
        conv.warnings.append(
            f"{', '.join(sorted(wanting))}: TLS needs the broker's certificate and key as PEM: "
            "tls.certificate_file names broker.pem, which you make (docs/tls.md)"
        )


def convert_console(conv: Conversion, root: ET.Element, doc: XmlDocument) -> None:
    """ActiveMQ's web console is jetty.xml, imported beside activemq.xml; without it there
    is none, and dovecote's console (the admin API) is turned off to match."""
    imports = [e for e in root.iter() if isinstance(e.tag, str) and local(e.tag) == "import"]
    jetty = [e for e in imports if "jetty" in e.get("resource", "")]
    console = conv.table("console")
    if not jetty:
        conv.put(
            console,
            "enabled",
            False,
            None,
            comment="no jetty.xml import: no web console (true: dovecote's admin API)",
        )
        return
    element = jetty[0]
    conv.use(element, "resource")
    conv.put(console, "enabled", True, element, "resource")
    path = doc.path.parent / element.get("resource", "").removeprefix("file:")
    for key, value in _jetty_address(path).items():
        conv.put(console, key, value, None, comment=f"jettyPort in {path}")
    conv.warnings.append(
        "the web console becomes dovecote's console and admin API (docs/admin-api.md): "
        "jetty.xml's realm, users and web applications are not carried over"
    )


def _jetty_address(path: Path) -> dict[str, str | int]:
    """The host and port of jetty.xml's jettyPort bean (what of them is there)."""
    try:
        jetty = XmlDocument(path).root
    except MigrationError:  # jetty.xml is optional reading: its address or nothing
        return {}
    address: dict[str, str | int] = {}
    for bean in jetty.iter():
        if isinstance(bean.tag, str) and bean.get("id") == "jettyPort":
            for prop in bean:
                name, value = prop.get("name"), prop.get("value") or ""
                if name == "port" and value.isdigit():
                    address["port"] = int(value)
                elif name == "host" and value and "${" not in value:
                    address["host"] = value
    return address
