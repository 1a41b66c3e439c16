"""The protocol listeners' settings, in a module of their own: the listeners
(transport/servers.py) and their connections (transport/stomp.py, transport/openwire.py)
both use them, and a listener imports its connection's module (at its first connection).
No defaults here: they are the configuration's ([stomp], [openwire], [auto]; app.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StompListenerSettings:
    host: str
    port: int
    max_frame_size: int
    max_header_size: int
    max_headers: int
    heartbeat_ms: tuple[int, int]
    heartbeat_grace: float
    max_connections: int
    connect_attempt_timeout_ms: int


@dataclass(frozen=True, slots=True)
class OpenWireListenerSettings:
    host: str
    port: int
    max_frame_size: int
    max_inactivity_ms: int
    max_inactivity_initial_delay_ms: int
    max_connections: int
    connect_attempt_timeout_ms: int


@dataclass(frozen=True, slots=True)
class AutoListenerSettings:
    host: str
    port: int
    max_connections: int
    protocol_detection_timeout_ms: int
    """A client that sends nothing in this long is dropped (protocolDetectionTimeOut)."""
