"""``dovecote import-config``: an ActiveMQ 5.x activemq.xml as a commented dovecote.toml
(docs/migration.md). Every value written says where it came from; every element or
attribute that could not be carried over is named with its line and why, at the top of the
file and on stderr. The result is checked by dovecote's own configuration loader."""

from __future__ import annotations

import os
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from dovecote.config import Config, ConfigError, exposure_problem, load_config
from dovecote.migrate.context import NO_EQUIVALENT, Conversion
from dovecote.migrate.links import convert_network
from dovecote.migrate.listeners import (
    convert_broker,
    convert_console,
    convert_listeners,
    convert_ssl_context,
)
from dovecote.migrate.policies import convert_policies
from dovecote.migrate.security import convert_plugins
from dovecote.migrate.stores import bean_properties, convert_store, convert_usage
from dovecote.migrate.tomlout import comment_lines, render
from dovecote.migrate.xmlread import (
    MigrationError,
    Placeholders,
    XmlDocument,
    children,
    find_broker,
    local,
)

__all__ = ["ImportResult", "MigrationError", "import_activemq", "run"]

_REASONS = {
    "managementContext": "dovecote has no JMX: its admin API and /metrics (docs/admin-api.md)",
    "shutdownHooks": "dovecote stops cleanly on SIGTERM",
    "destinationInterceptors": "dovecote has no virtual or composite destinations configured "
    "in the broker",
    "destinations": "dovecote creates destinations when they are first used",
    "jmsBridgeConnectors": "dovecote has no JMS bridge",
    "proxyConnectors": "dovecote has no proxy connector",
    "ioExceptionHandler": "dovecote's stores handle I/O errors in a degraded mode (README)",
    "tempDataStore": "dovecote's temp store is data_dir/tmp_storage",
    "jobSchedulerStore": "dovecote keeps scheduled messages in its store",
    "producerSystemUsage": "dovecote has one [usage] for producers and consumers",
    "consumerSystemUsage": "dovecote has one [usage] for producers and consumers",
}


@dataclass(frozen=True)
class ImportResult:
    text: str
    """The dovecote.toml."""
    config: Config
    """The file as dovecote's loader reads it."""
    not_carried: list[str]
    """``<element> at line N: reason`` for everything left behind."""
    warnings: list[str]
    """What to see to before the broker starts with it."""


def import_activemq(xml_path: Path) -> ImportResult:
    doc = XmlDocument(xml_path)
    root = doc.root
    broker = find_broker(root)
    conv = Conversion(doc, Placeholders(xml_path.resolve().parent))
    conv.use(root, *root.attrib)
    _load_properties(conv, root)
    conv.use(broker)
    convert_broker(conv, broker)
    listeners = convert_listeners(conv, broker)
    convert_ssl_context(conv, broker, listeners)
    convert_console(conv, root, doc)
    convert_store(conv, root, broker)
    convert_usage(conv, broker)
    convert_policies(conv, broker)
    convert_network(conv, broker)
    convert_plugins(conv, broker)
    conv.sweep(root, _reason)
    text = _render(conv, xml_path)
    config = _check(text)
    if problem := exposure_problem(config):
        conv.warnings.append(f"dovecote will not start so: {problem} (ActiveMQ starts open)")
    if config.security.authenticates:
        try:
            config.security.to_settings()
        except ConfigError as exc:
            conv.warnings.append(str(exc))
    text = _render(conv, xml_path)
    return ImportResult(text, _check(text), conv.messages(), list(conv.warnings))


def _reason(element: ET.Element) -> str:
    name = local(element.tag)
    if name == "bean":
        return f"a Spring bean ({element.get('class', '?')}): {NO_EQUIVALENT}"
    return _REASONS.get(name, NO_EQUIVALENT)


def _load_properties(conv: Conversion, root: ET.Element) -> None:
    """The properties files a PropertyPlaceholderConfigurer bean loads, for ${...}."""
    for bean in root.iter():
        if not isinstance(bean.tag, str) or local(bean.tag) != "bean":
            continue
        if not bean.get("class", "").endswith("PropertyPlaceholderConfigurer"):
            continue
        conv.use(bean, "id", "class")
        locations = []
        for prop in children(bean, "property"):
            if prop.get("name") in ("location", "locations"):
                conv.use(prop, "name")
                if "value" in prop.attrib:
                    locations.append((prop, prop.get("value", "")))
                for value in prop.iter():
                    if local(value.tag) in ("list", "value"):
                        conv.use(value)
                        if value.text and value.text.strip():
                            locations.append((value, value.text.strip()))
        for element, location in locations:
            if "value" in element.attrib:
                conv.use(element, "value")
            resolved, missing = conv.placeholders.resolve(location)
            path = Path(resolved.removeprefix("file:"))
            if missing or resolved.startswith("classpath:") or not path.is_file():
                conv.leftover(element, None, f"{location}: not found, its properties unresolved")
            else:
                conv.placeholders.load(path)
        bean_properties(conv, bean)  # what else it sets is named by the sweep


def _render(conv: Conversion, xml_path: Path) -> str:
    header = comment_lines(
        f"dovecote configuration converted by `dovecote import-config` from {xml_path}, an "
        "ActiveMQ 5.x configuration. Each value says where it came from; docs/migration.md "
        "says what maps to what."
    )
    sections = [
        ("Check before starting", conv.warnings),
        ("Not carried over", conv.messages()),
        ("Nothing to write (dovecote does the same)", [t for _, t in sorted(conv.same)]),
        (
            "Placeholders resolved",
            [
                # activemq.* are paths; other values may be passwords: where they came from
                f"${{{name}}} = {value!r} ({why})"
                if name.startswith("activemq.")
                else f"${{{name}}}: {why}"
                for name, (value, why) in conv.placeholders.used.items()
            ],
        ),
    ]
    for title, lines in sections:
        if lines:
            header += ["#", f"# {title} ({len(lines)}):"]
            for line in lines:
                header += ["#   " + text.removeprefix("# ") for text in comment_lines(line, 88)]
    return render(header, conv.ordered_tables())


def _check(text: str) -> Config:
    """The text through dovecote's own loader (a failure here is a bug of the converter)."""
    with tempfile.TemporaryDirectory(prefix="dovecote-import-") as directory:
        path = Path(directory) / "dovecote.toml"
        path.write_text(text, encoding="utf-8")
        try:
            return load_config(path)
        except ConfigError as exc:
            raise MigrationError(f"the converted configuration does not load: {exc}") from None


def run(xml_path: Path, output: Path | None) -> None:
    """The command: the TOML to ``output`` (stdout when None), what was left on stderr."""
    result = import_activemq(xml_path)
    if output is None:
        sys.stdout.write(result.text)
    else:
        _write(output, result.text)  # first: a file that cannot be written says only that
    for line in result.not_carried:
        print(f"not carried over: {line}", file=sys.stderr)
    for line in result.warnings:
        print(f"warning: {line}", file=sys.stderr)
    if output is None:
        return
    print(
        f"wrote {output}: {len(result.not_carried)} not carried over, "
        f"{len(result.warnings)} to check before starting",
        file=sys.stderr,
    )


def _write(output: Path, text: str) -> None:
    """``text`` to ``output`` whole or not at all (a temporary file renamed)."""
    try:
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=output.parent, delete=False, suffix=".tmp"
        ) as handle:
            handle.write(text)
        os.replace(handle.name, output)
    except OSError as exc:
        raise MigrationError(f"cannot write {output}: {exc.strerror}") from None
