"""The protocol listeners' settings, in a module of their own: the listeners
(transport/servers.py) and their connections (transport/stomp.py, transport/openwire.py)
both use them, and a listener imports its connection's module (at its first connection)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StompListenerSettings:
    host: str = "127.0.0.1"
    port: int = 61613
    max_frame_size: int = 10 * 1024 * 1024
    max_header_size: int = 64 * 1024
    max_headers: int = 1000
    heartbeat_ms: tuple[int, int] = (10_000, 10_000)
    heartbeat_grace: float = 1.5
    max_connections: int = 1000
    connect_attempt_timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class OpenWireListenerSettings:
    host: str = "127.0.0.1"
    port: int = 61616
    max_frame_size: int = 100 * 1024 * 1024
    max_inactivity_ms: int = 30_000
    max_inactivity_initial_delay_ms: int = 10_000
    max_connections: int = 1000
    connect_attempt_timeout_ms: int = 30_000


@dataclass(frozen=True, slots=True)
class AutoListenerSettings:
    host: str = "127.0.0.1"
    port: int = 61608
    max_connections: int = 1000
    protocol_detection_timeout_ms: int = 30_000
    """A client that sends nothing in this long is dropped (protocolDetectionTimeOut)."""
