"""The configuration: one TOML file with ActiveMQ's concepts (compatibility O4), parsed once into a
frozen, typed tree and passed down. With no file the embedded defaults apply.

Example (every key optional)::

    [broker]
    name = "localhost"
    data_dir = "data"

    [store]
    kind = "journal"

    [stomp]
    host = "127.0.0.1"
    port = 61613
    max_frame_size = 10485760

    [policy]
    expire_messages_period_ms = 30000

    [[policy.entries]]
    pattern = "orders.>"
    queues = true
    dead_letter = "individual"
    maximum_redeliveries = 3
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import msgspec
from msgspec import field

from dovecote.broker.policy import BrokerSettings, PolicyMap
from dovecote.config.base import ConfigError, Section, read_toml
from dovecote.config.base import problem as _problem
from dovecote.config.logging import LoggingSection
from dovecote.config.network import NetworkConnectorSection, NetworkDestinationEntry
from dovecote.config.sections import (
    AutoSection,
    BrokerSection,
    ConsoleSection,
    DeadLetterSection,
    OpenWireSection,
    PolicyEntry,
    PolicySection,
    SslSection,
    StompSection,
    StompSslSection,
    StoreSection,
    TlsSection,
    UsageSection,
)
from dovecote.config.security import (
    AuthorizationEntrySection,
    CertificateUserEntry,
    RightsSection,
    SecuritySection,
    UserEntry,
)
from dovecote.network.settings import NetworkConnectorSettings

__all__ = [
    "AuthorizationEntrySection", "AutoSection", "BrokerSection", "CertificateUserEntry",
    "Config", "ConfigError", "ConsoleSection", "DeadLetterSection", "NetworkConnectorSection",
    "NetworkDestinationEntry", "OpenWireSection", "PolicyEntry", "PolicySection",
    "RightsSection", "SecuritySection", "SslSection", "StompSection", "StompSslSection",
    "StoreSection", "TlsSection", "UsageSection", "UserEntry", "check_exposure",
    "exposure_problem", "is_loopback", "load_config", "network_settings", "read_toml",
    "tls_listeners", "tls_problem", "with_ports",
]  # fmt: skip


class Config(Section, frozen=True):
    broker: BrokerSection = field(default_factory=BrokerSection)
    store: StoreSection = field(default_factory=StoreSection)
    stomp: StompSection = field(default_factory=StompSection)
    openwire: OpenWireSection = field(default_factory=OpenWireSection)
    auto: AutoSection = field(default_factory=AutoSection)
    console: ConsoleSection = field(default_factory=ConsoleSection)
    tls: TlsSection = field(default_factory=TlsSection)
    ssl: SslSection = field(default_factory=SslSection)
    stomp_ssl: StompSslSection = field(default_factory=StompSslSection)
    policy: PolicySection = field(default_factory=PolicySection)
    usage: UsageSection = field(default_factory=UsageSection)
    security: SecuritySection = field(default_factory=SecuritySection)
    logging: LoggingSection = field(default_factory=LoggingSection)
    network_connectors: tuple[NetworkConnectorSection, ...] = ()

    def broker_settings(self) -> BrokerSettings:
        return BrokerSettings(
            broker_name=self.broker.name,
            policies=PolicyMap(entries=tuple(e.to_policy() for e in self.policy.entries)),
            expire_messages_period_ms=self.policy.expire_messages_period_ms,
            memory_limit=self.usage.memory_limit,
            store_limit=self.usage.store_limit,
            temp_limit=self.usage.temp_limit,
            send_fail_if_no_space=self.usage.send_fail_if_no_space,
            temp_directory=self.broker.data_dir / "tmp_storage",
        )


def load_config(path: Path | None) -> Config:
    """Read a TOML file (None: the embedded defaults). Raises ConfigError naming the problem."""
    if path is None:
        return Config()
    data = read_toml(path, "config file")
    try:
        config = msgspec.convert(data, Config, dec_hook=_path_from_text)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"config file {path}: {_problem(str(exc))}") from None
    if problem := tls_problem(config):
        raise ConfigError(f"config file {path}: {problem}")
    try:
        network_settings(config)
    except ConfigError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    return config


def network_settings(config: Config) -> list[NetworkConnectorSettings]:
    """The network connectors' settings (ConfigError for a bad URI or list entry)."""
    return [c.to_settings(i) for i, c in enumerate(config.network_connectors)]


def tls_listeners(config: Config) -> list[str]:
    """The listeners configured to speak TLS, by their sections' names."""
    return [
        name
        for name, wants in (
            ("ssl", config.ssl.enabled),
            ("stomp_ssl", config.stomp_ssl.enabled),
            ("auto.tls", config.auto.enabled and config.auto.tls),
            ("console.tls", config.console.enabled and config.console.tls),
        )
        if wants
    ]


def tls_problem(config: Config) -> str | None:
    """What is missing for the TLS listeners configured, if anything."""
    wanting = tls_listeners(config)
    if wanting and config.tls.certificate_file is None:
        return f"{', '.join(wanting)}: TLS needs the broker's certificate: set tls.certificate_file"
    if config.tls.client_auth != "none" and config.tls.ca_file is None:
        return (
            f'tls.client_auth = "{config.tls.client_auth}" needs tls.ca_file: the CA '
            "certificates that client certificates must chain to"
        )
    return None


_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def exposure_problem(config: Config) -> str | None:
    """Why the broker must not start as configured: a listener beyond loopback while
    nobody is authenticated, unless allow_anonymous says it is meant (secure by default)."""
    security = config.security
    if security.authenticates or security.allow_anonymous:
        return None
    exposed = []
    for name in config.__struct_fields__:
        section = getattr(config, name)
        host = getattr(section, "host", None)
        if isinstance(host, str) and getattr(section, "enabled", False) and not is_loopback(host):
            exposed.append(f"{name}.host = {host!r}")
    if not exposed:
        return None
    return (
        f"{', '.join(exposed)} listens beyond loopback with no authentication: configure "
        "[security] users, or set [security] allow_anonymous = true to let anyone in on purpose"
    )


def check_exposure(config: Config) -> None:
    """Raise ConfigError saying why, when ``exposure_problem`` finds one."""
    if problem := exposure_problem(config):
        raise ConfigError(problem)


def _path_from_text(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise TypeError(f"Expected a path as text, got `{type(value).__name__}`")


def with_ports(
    config: Config,
    stomp: int | None = None,
    openwire: int | None = None,
    console: int | None = None,
) -> Config:
    """``config`` with the listener ports the command line overrides (None: as configured)."""
    replace = msgspec.structs.replace
    if stomp is not None:
        config = replace(config, stomp=replace(config.stomp, port=stomp))
    if openwire is not None:
        config = replace(config, openwire=replace(config.openwire, port=openwire))
    if console is not None:
        config = replace(config, console=replace(config.console, port=console))
    return config
