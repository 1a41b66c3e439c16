from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from brokers import BrokerProcess, running_broker
from stompclient import Client

# Destination policies the conformance suite relies on: individual DLQs for "indiv.>" queues,
# a quick expiry sweep, 1 MiB frames, 200 ms heart-beats, a low broker-side redelivery
# limit for "short.>" queues, and a pending limit on topics (ActiveMQ's distribution sets
# one; a subscriber's own lower limit takes effect only where one is set).
CONFORMANCE_CONFIG = """
[stomp]
max_frame_size = 1048576
heartbeat_ms = [200, 200]

[policy]
expire_messages_period_ms = 200

[[policy.entries]]
pattern = "indiv.>"
dead_letter = "individual"

[[policy.entries]]
pattern = "short.>"
maximum_redeliveries = 2

[[policy.entries]]
pattern = ">"
queues = false
pending_message_limit = 1000
"""


@pytest.fixture(scope="session")
def broker() -> Iterator[BrokerProcess]:
    with running_broker(CONFORMANCE_CONFIG) as proc:
        yield proc


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A destination name no other test uses."""
    return f"{request.node.name.replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def connect(broker: BrokerProcess) -> Iterator[Callable[..., Client]]:
    """Open STOMP clients against the shared broker; all are closed after the test."""
    clients: list[Client] = []

    def make(**kwargs: object) -> Client:
        client = Client(broker.stomp_address, **kwargs)  # type: ignore[arg-type]
        clients.append(client)
        return client

    mark = len(broker.log_lines)
    yield make
    for client in clients:
        client.close()
    # Shown by pytest only when the test failed: what the broker logged meanwhile.
    print("".join(broker.log_lines[mark:]))


@pytest.fixture
def log_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The journal's data files (db-N.log) fsynced from now on, by path, in order: os.fsync
    is wrapped for the test (the real one still runs; a directory's fsync is not listed)."""
    synced: list[str] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.endswith(".log"):
            synced.append(path)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    return synced
