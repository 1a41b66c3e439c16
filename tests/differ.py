"""What a differential scenario is given: one broker, as a client of it sees it
(tests/differential/conftest.py runs each scenario against dovecote and ActiveMQ)."""

from __future__ import annotations

import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path


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


# ActiveMQ's policy-flagged advisories (tests/differential/test_advisory_flags.py) on the
# session's peers, on destinations of their own (flag.>, flagd.>): dovecote's entries come
# before any other (its first matching entry wins; ActiveMQ's most specific one).
FLAG_POLICY = """
[[policy.entries]]
pattern = "flag.>"
queues = true
memory_limit = 4096
pending_queue_cursor = "vm"
advisory_for_delivery = true
advisory_for_consumed = true
advisory_when_full = true
advisory_for_fast_producers = true

[[policy.entries]]
pattern = "flag.>"
queues = false
advisory_for_delivery = true
advisory_for_slow_consumers = true

[[policy.entries]]
pattern = "flagd.>"
queues = false
pending_message_limit = 2
advisory_for_discarding_messages = true
"""
FLAG_POLICY_XML = (
    '<policyEntry queue="flag.>" memoryLimit="4kb" producerFlowControl="true"'
    ' advisoryForDelivery="true" advisoryForConsumed="true" advisoryWhenFull="true"'
    ' advisoryForFastProducers="true"><pendingQueuePolicy><vmQueueCursor/>'
    "</pendingQueuePolicy></policyEntry>"
    '<policyEntry topic="flag.>" advisoryForDelivery="true" advisoryForSlowConsumers="true"/>'
    '<policyEntry topic="flagd.>" advisoryForDiscardingMessages="true">'
    '<pendingMessageLimitStrategy><constantPendingMessageLimitStrategy limit="2"/>'
    "</pendingMessageLimitStrategy></policyEntry>"
)


def java_outcomes(source: Path, peers: Peers) -> dict[str, dict[str, str]]:
    """Run the Java program ``source`` (tests/java/, compiled once for the run) against
    each broker (its OpenWire port and a fresh destination prefix as arguments): the
    ``scenario: outcome`` lines it printed, by broker."""
    from activemq import classpath, java_classes  # the Debian ActiveMQ jars it runs on

    classes = java_classes()
    found: dict[str, dict[str, str]] = {}
    for broker, (port, _) in (("activemq", peers.activemq), ("dovecote", peers.dovecote)):
        result = subprocess.run(
            ["java", "-cp", f"{classpath()}:{classes}", source.stem, str(port),
             f"r{uuid.uuid4().hex[:8]}"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        lines = result.stdout.splitlines()
        found[broker] = dict(line.split(": ", 1) for line in lines if ": " in line)
        if not found[broker]:
            raise AssertionError(
                f"{source.stem} printed nothing on {broker}:\n{result.stdout}\n{result.stderr}"
            )
    return found
