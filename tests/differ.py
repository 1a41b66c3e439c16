"""What a differential scenario is given: one broker, as a client of it sees it
(tests/differential/conftest.py runs each scenario against dovecote and ActiveMQ)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One broker as a scenario sees it."""

    broker: str
    """``"dovecote"`` or ``"activemq"``: for the test's messages, never for a scenario's
    logic (a scenario that branches on it compares nothing)."""
    openwire_port: int
    stomp_port: int
    name: str
    """A destination name of this scenario's own, the same on both brokers but for a suffix."""

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.openwire_port}"

    @property
    def stomp_address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.stomp_port)


@dataclass(frozen=True)
class Peers:
    """The two brokers of the suite: (OpenWire port, STOMP port) of each."""

    dovecote: tuple[int, int]
    activemq: tuple[int, int]
